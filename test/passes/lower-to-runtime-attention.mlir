// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime=backend=cuda | FileCheck %s --check-prefix=CUDA
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime | FileCheck %s --check-prefix=CPU

// The attention backward's workspace. On the CUDA backend in bf16 with a
// head size of 64 or 128, the arena holds it (dprt::attentionBackwardWorkspaceBytes:
// cuDNN's dQ accumulator, dK and dV per query head with fewer key/value
// heads, a float a row and head, 4096 bytes more): with 2 samples of 4
// tokens, 2 heads of 64 and 1 key/value head, 16 rows and heads:
// 16 * 64 * 4 + 2 * 16 * 64 * 2 + 16 * 4 + 4096 = 12352 bytes. The CPU
// backend takes none; nor do f32 models, whose CUDA attention is the
// materialized path with scratch of its own.
dp.model @m {
  dp.param @emb : tensor<32x128xbf16>
  dp.param @wk : tensor<64x128xbf16>
  dp.param @wv : tensor<64x128xbf16>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x128xbf16>
    %k = dp.linear @wk(%x) : tensor<?x4x128xbf16> -> tensor<?x4x64xbf16>
    %v = dp.linear @wv(%x) : tensor<?x4x128xbf16> -> tensor<?x4x64xbf16>
    %a = dp.attention %x, %k, %v {causal, heads = 2, kv_heads = 1, rope} : tensor<?x4x128xbf16>, tensor<?x4x64xbf16>
    %o = dp.linear @emb(%a) : tensor<?x4x128xbf16> -> tensor<?x4x32xbf16>
    %l = dp.cross_entropy %o, %tgt : tensor<?x4x32xbf16>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  precision = #dp.precision<compute = bf16, master = f32>
}
// CUDA-LABEL: dprt.func @dp_microstep
// CUDA:       dprt.call "attention_forward"
// CUDA:       %[[W:.*]] = dprt.alloc {bytes = 12352 : i64, name = "attention_workspace"}
// CUDA-NEXT:  dprt.call "attention_backward"({{.*}}, %[[W]]) {args = [#dprt.dtype<BF16>, {{.*}}, 2, 4, 2, 1, 64, true, 9 : index]}
// CPU-LABEL:  dprt.func @dp_microstep
// CPU-NOT:    attention_workspace
// CPU:        dprt.call "attention_backward"({{.*}}) {args = [#dprt.dtype<BF16>, {{.*}}, 2, 4, 2, 1, 64, true, #dprt.null]}

// -----

dp.model @f {
  dp.param @emb : tensor<32x128xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x128xf32>
    %a = dp.attention %x, %x, %x {causal, heads = 2} : tensor<?x4x128xf32>, tensor<?x4x128xf32>
    %o = dp.linear @emb(%a) : tensor<?x4x128xf32> -> tensor<?x4x32xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x4x32xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @f {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CUDA-LABEL: dprt.func @dp_microstep
// CUDA-NOT:   attention_workspace
// CUDA:       dprt.call "attention_backward"({{.*}}) {args = [#dprt.dtype<F32>, {{.*}}, 2, 4, 2, 2, 64, true, #dprt.null]}
