// A tiny decoder-only transformer over bytes: 2 blocks of RMSNorm, causal
// grouped-query attention with rotary embeddings and a SwiGLU MLP.
//
//   dpc examples/tinylm.mlir -o tinylm && ./tinylm --data corpus.txt
//
// One line of the corpus is one record (the privacy unit). Inputs are the
// line's bytes after a '\n' start token; targets are the bytes followed by a
// '\n' end token, padded with -1.

shard.grid @ranks(shape = ?)

dp.model @tinylm attributes {vocab = 256, seq = 128, width = 128, blocks = 2} {
  dp.param @emb : tensor<256x128xf32> {init = #dp.normal<0.02>}
  dp.param @b0.n1 : tensor<128xf32> {init = #dp.ones}
  dp.param @b0.wq : tensor<128x128xf32>
  dp.param @b0.wk : tensor<64x128xf32>
  dp.param @b0.wv : tensor<64x128xf32>
  dp.param @b0.wo : tensor<128x128xf32>
  dp.param @b0.n2 : tensor<128xf32> {init = #dp.ones}
  dp.param @b0.gate : tensor<384x128xf32>
  dp.param @b0.up : tensor<384x128xf32>
  dp.param @b0.down : tensor<128x384xf32>
  dp.param @b1.n1 : tensor<128xf32> {init = #dp.ones}
  dp.param @b1.wq : tensor<128x128xf32>
  dp.param @b1.wk : tensor<64x128xf32>
  dp.param @b1.wv : tensor<64x128xf32>
  dp.param @b1.wo : tensor<128x128xf32>
  dp.param @b1.n2 : tensor<128xf32> {init = #dp.ones}
  dp.param @b1.gate : tensor<384x128xf32>
  dp.param @b1.up : tensor<384x128xf32>
  dp.param @b1.down : tensor<128x384xf32>
  dp.param @norm : tensor<128xf32> {init = #dp.ones}
  dp.param @head : tensor<256x128xf32>

  dp.forward(%tok: tensor<?x128xi32>, %tgt: tensor<?x128xi32>) -> tensor<?xf32> {
    %x0 = dp.embedding @emb(%tok) : tensor<?x128xi32> -> tensor<?x128x128xf32>

    %h0 = dp.rms_norm @b0.n1(%x0) {eps = 1.0e-5} : tensor<?x128x128xf32>
    %q0 = dp.linear @b0.wq(%h0) : tensor<?x128x128xf32> -> tensor<?x128x128xf32>
    %k0 = dp.linear @b0.wk(%h0) : tensor<?x128x128xf32> -> tensor<?x128x64xf32>
    %v0 = dp.linear @b0.wv(%h0) : tensor<?x128x128xf32> -> tensor<?x128x64xf32>
    %a0 = dp.attention %q0, %k0, %v0 {causal, heads = 4, kv_heads = 2, rope}
        : tensor<?x128x128xf32>, tensor<?x128x64xf32>
    %o0 = dp.linear @b0.wo(%a0) : tensor<?x128x128xf32> -> tensor<?x128x128xf32>
    %r0 = dp.add %x0, %o0 : tensor<?x128x128xf32>
    %m0 = dp.rms_norm @b0.n2(%r0) {eps = 1.0e-5} : tensor<?x128x128xf32>
    %g0 = dp.linear @b0.gate(%m0) : tensor<?x128x128xf32> -> tensor<?x128x384xf32>
    %u0 = dp.linear @b0.up(%m0) : tensor<?x128x128xf32> -> tensor<?x128x384xf32>
    %s0 = dp.silu %g0 : tensor<?x128x384xf32>
    %p0 = dp.mul %s0, %u0 : tensor<?x128x384xf32>
    %d0 = dp.linear @b0.down(%p0) : tensor<?x128x384xf32> -> tensor<?x128x128xf32>
    %x1 = dp.add %r0, %d0 : tensor<?x128x128xf32>

    %h1 = dp.rms_norm @b1.n1(%x1) {eps = 1.0e-5} : tensor<?x128x128xf32>
    %q1 = dp.linear @b1.wq(%h1) : tensor<?x128x128xf32> -> tensor<?x128x128xf32>
    %k1 = dp.linear @b1.wk(%h1) : tensor<?x128x128xf32> -> tensor<?x128x64xf32>
    %v1 = dp.linear @b1.wv(%h1) : tensor<?x128x128xf32> -> tensor<?x128x64xf32>
    %a1 = dp.attention %q1, %k1, %v1 {causal, heads = 4, kv_heads = 2, rope}
        : tensor<?x128x128xf32>, tensor<?x128x64xf32>
    %o1 = dp.linear @b1.wo(%a1) : tensor<?x128x128xf32> -> tensor<?x128x128xf32>
    %r1 = dp.add %x1, %o1 : tensor<?x128x128xf32>
    %m1 = dp.rms_norm @b1.n2(%r1) {eps = 1.0e-5} : tensor<?x128x128xf32>
    %g1 = dp.linear @b1.gate(%m1) : tensor<?x128x128xf32> -> tensor<?x128x384xf32>
    %u1 = dp.linear @b1.up(%m1) : tensor<?x128x128xf32> -> tensor<?x128x384xf32>
    %s1 = dp.silu %g1 : tensor<?x128x384xf32>
    %p1 = dp.mul %s1, %u1 : tensor<?x128x384xf32>
    %d1 = dp.linear @b1.down(%p1) : tensor<?x128x384xf32> -> tensor<?x128x128xf32>
    %x2 = dp.add %r1, %d1 : tensor<?x128x128xf32>

    %f = dp.rms_norm @norm(%x2) {eps = 1.0e-5} : tensor<?x128x128xf32>
    %logits = dp.linear @head(%f) : tensor<?x128x128xf32> -> tensor<?x128x256xf32>
    %loss = dp.cross_entropy %logits, %tgt per_sample = mean ignore_index = -1
        : tensor<?x128x256xf32>, tensor<?x128xi32> -> tensor<?xf32>
    dp.return %loss : tensor<?xf32>
  }
}

dp.recipe @train for @tinylm {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.target<epsilon = 8.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 64, physical_batch = 16>,
  optimizer = #dp.adamw<lr = 2.0e-3, weight_decay = 0.0>,
  steps = 400,
  precision = #dp.precision<compute = f32, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}
