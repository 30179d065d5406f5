// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime=backend=cuda | FileCheck %s

// The lowering of what Hugging Face models add. Learned positions:
// position_embedding_forward, norm_position_embedding, and the clipped
// gradient of the first T rows as bias_grad over T * d values. Llama 3 rope:
// dp_init fills one f64 table of d_head / 2 frequencies, which every
// rope_forward and rope_backward reads. The tied head: the head's Gram norm,
// the embedding norm and norm_tied_cross with its T x T workspace, all into
// the one n2 of the flat norm sum; both weight-gradient kernels add into the
// table's gradient.
dp.model @m {
  dp.param @emb : tensor<32x8xf32>
  dp.param @pos : tensor<6x8xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %e = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %x = dp.position_embedding @pos(%e) : tensor<?x4x8xf32>
    %a = dp.attention %x, %x, %x {causal, heads = 2, rope, rope_scaling = #dp.rope_llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 16>} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %o = dp.linear @emb(%a) : tensor<?x4x8xf32> -> tensor<?x4x32xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x4x32xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 2.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dprt.func @dp_init
// CHECK:      %[[T:.*]] = dprt.get_global @rope.llama3.0
// CHECK-NEXT: dprt.call "rope_llama3_frequencies"(%[[T]]) {args = [0 : index, 4, 1.000000e+04, 8.000000e+00, 1.000000e+00, 4.000000e+00, 16]}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK:      dprt.call "position_embedding_forward"(%{{.*}}, %{{.*}}, %{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 2, 4, 8]}
// CHECK:      %[[F:.*]] = dprt.get_global @rope.llama3.0
// CHECK:      dprt.call "rope_forward"(%{{.*}}, %{{.*}}, %[[F]]) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 2, 4, 2, 4, 1.000000e+04]}
// CHECK:      dprt.call "rope_forward"(%{{.*}}, %{{.*}}, %[[F]])
// CHECK:      %[[B:.*]] = dprt.get_global @rope.llama3.0
// CHECK-NEXT: dprt.call "rope_backward"(%{{.*}}, %{{.*}}, %[[B]])
// CHECK-NEXT: dprt.call "rope_backward"(%{{.*}}, %{{.*}}, %[[B]])
// CHECK:      dprt.call "norm_position_embedding"(%[[DX:.*]], %[[N2:.*]]) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2, 4, 8]}
// CHECK:      dprt.call "gram_norm"(%{{.*}}, %{{.*}}, %{{.*}}, %[[N2]])
// CHECK-NEXT: dprt.call "norm_embedding"(%[[TOK:.*]], %[[DX]], %[[N2]])
// CHECK-NEXT: %[[WS:.*]] = dprt.alloc {bytes = 128 : i64, name = "tied_cross"}
// CHECK-NEXT: dprt.call "norm_tied_cross"(%[[TOK]], %[[DX]], %[[X:.*]], %[[DL:.*]], %[[N2]], %[[WS]]) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 2, 4, 4, 32, 8, 5 : index]}
// CHECK:      dprt.call "linear_weight_grad"(%[[X]], %[[DL]],
// CHECK:      dprt.call "bias_grad"(%[[DX]], %{{.*}}, %{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 2, 1, 32]}
// CHECK:      dprt.call "embedding_grad"(%[[TOK]], %[[DX]],
// CHECK:      dprt.global @rope.llama3.0 {bytes = 16 : i64}

// -----

// The formed tied gradient (dp.norm_tied_direct, chosen at V = 4): one
// vocab x d accumulator workspace, V d 4 = 128 bytes, reused sample by sample.
dp.model @small {
  dp.param @emb : tensor<4x8xf32>
  dp.forward(%tok: tensor<?x8xi32>, %tgt: tensor<?x8xi32>) -> tensor<?xf32> {
    %e = dp.embedding @emb(%tok) : tensor<?x8xi32> -> tensor<?x8x8xf32>
    %o = dp.linear @emb(%e) : tensor<?x8x8xf32> -> tensor<?x8x4xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x8x4xf32>, tensor<?x8xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @small {
  clip = #dp.clip<flat, max_norm = 2.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK:      %[[WS:.*]] = dprt.alloc {bytes = 128 : i64, name = "tied_workspace"}
// CHECK-NEXT: dprt.call "norm_tied_direct"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[WS]]) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 2, 8, 8, 4, 8, 5 : index]}
