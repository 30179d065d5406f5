// Llama-shaped decoder: vocab 32000, width 2048, 16 blocks, 32 heads,
// 8 KV heads, MLP 8192, 1024 tokens. Written by scripts/gen-llama.py.

shard.grid @ranks(shape = ?)

dp.model @llama attributes {vocab = 32000, seq = 1024, width = 2048, blocks = 16} {
  dp.param @emb : tensor<32000x2048xbf16> {init = #dp.normal<0.02>}
  dp.param @b0.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b0.wq : tensor<2048x2048xbf16>
  dp.param @b0.wk : tensor<512x2048xbf16>
  dp.param @b0.wv : tensor<512x2048xbf16>
  dp.param @b0.wo : tensor<2048x2048xbf16>
  dp.param @b0.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b0.gate : tensor<8192x2048xbf16>
  dp.param @b0.up : tensor<8192x2048xbf16>
  dp.param @b0.down : tensor<2048x8192xbf16>
  dp.param @b1.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b1.wq : tensor<2048x2048xbf16>
  dp.param @b1.wk : tensor<512x2048xbf16>
  dp.param @b1.wv : tensor<512x2048xbf16>
  dp.param @b1.wo : tensor<2048x2048xbf16>
  dp.param @b1.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b1.gate : tensor<8192x2048xbf16>
  dp.param @b1.up : tensor<8192x2048xbf16>
  dp.param @b1.down : tensor<2048x8192xbf16>
  dp.param @b2.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b2.wq : tensor<2048x2048xbf16>
  dp.param @b2.wk : tensor<512x2048xbf16>
  dp.param @b2.wv : tensor<512x2048xbf16>
  dp.param @b2.wo : tensor<2048x2048xbf16>
  dp.param @b2.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b2.gate : tensor<8192x2048xbf16>
  dp.param @b2.up : tensor<8192x2048xbf16>
  dp.param @b2.down : tensor<2048x8192xbf16>
  dp.param @b3.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b3.wq : tensor<2048x2048xbf16>
  dp.param @b3.wk : tensor<512x2048xbf16>
  dp.param @b3.wv : tensor<512x2048xbf16>
  dp.param @b3.wo : tensor<2048x2048xbf16>
  dp.param @b3.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b3.gate : tensor<8192x2048xbf16>
  dp.param @b3.up : tensor<8192x2048xbf16>
  dp.param @b3.down : tensor<2048x8192xbf16>
  dp.param @b4.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b4.wq : tensor<2048x2048xbf16>
  dp.param @b4.wk : tensor<512x2048xbf16>
  dp.param @b4.wv : tensor<512x2048xbf16>
  dp.param @b4.wo : tensor<2048x2048xbf16>
  dp.param @b4.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b4.gate : tensor<8192x2048xbf16>
  dp.param @b4.up : tensor<8192x2048xbf16>
  dp.param @b4.down : tensor<2048x8192xbf16>
  dp.param @b5.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b5.wq : tensor<2048x2048xbf16>
  dp.param @b5.wk : tensor<512x2048xbf16>
  dp.param @b5.wv : tensor<512x2048xbf16>
  dp.param @b5.wo : tensor<2048x2048xbf16>
  dp.param @b5.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b5.gate : tensor<8192x2048xbf16>
  dp.param @b5.up : tensor<8192x2048xbf16>
  dp.param @b5.down : tensor<2048x8192xbf16>
  dp.param @b6.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b6.wq : tensor<2048x2048xbf16>
  dp.param @b6.wk : tensor<512x2048xbf16>
  dp.param @b6.wv : tensor<512x2048xbf16>
  dp.param @b6.wo : tensor<2048x2048xbf16>
  dp.param @b6.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b6.gate : tensor<8192x2048xbf16>
  dp.param @b6.up : tensor<8192x2048xbf16>
  dp.param @b6.down : tensor<2048x8192xbf16>
  dp.param @b7.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b7.wq : tensor<2048x2048xbf16>
  dp.param @b7.wk : tensor<512x2048xbf16>
  dp.param @b7.wv : tensor<512x2048xbf16>
  dp.param @b7.wo : tensor<2048x2048xbf16>
  dp.param @b7.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b7.gate : tensor<8192x2048xbf16>
  dp.param @b7.up : tensor<8192x2048xbf16>
  dp.param @b7.down : tensor<2048x8192xbf16>
  dp.param @b8.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b8.wq : tensor<2048x2048xbf16>
  dp.param @b8.wk : tensor<512x2048xbf16>
  dp.param @b8.wv : tensor<512x2048xbf16>
  dp.param @b8.wo : tensor<2048x2048xbf16>
  dp.param @b8.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b8.gate : tensor<8192x2048xbf16>
  dp.param @b8.up : tensor<8192x2048xbf16>
  dp.param @b8.down : tensor<2048x8192xbf16>
  dp.param @b9.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b9.wq : tensor<2048x2048xbf16>
  dp.param @b9.wk : tensor<512x2048xbf16>
  dp.param @b9.wv : tensor<512x2048xbf16>
  dp.param @b9.wo : tensor<2048x2048xbf16>
  dp.param @b9.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b9.gate : tensor<8192x2048xbf16>
  dp.param @b9.up : tensor<8192x2048xbf16>
  dp.param @b9.down : tensor<2048x8192xbf16>
  dp.param @b10.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b10.wq : tensor<2048x2048xbf16>
  dp.param @b10.wk : tensor<512x2048xbf16>
  dp.param @b10.wv : tensor<512x2048xbf16>
  dp.param @b10.wo : tensor<2048x2048xbf16>
  dp.param @b10.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b10.gate : tensor<8192x2048xbf16>
  dp.param @b10.up : tensor<8192x2048xbf16>
  dp.param @b10.down : tensor<2048x8192xbf16>
  dp.param @b11.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b11.wq : tensor<2048x2048xbf16>
  dp.param @b11.wk : tensor<512x2048xbf16>
  dp.param @b11.wv : tensor<512x2048xbf16>
  dp.param @b11.wo : tensor<2048x2048xbf16>
  dp.param @b11.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b11.gate : tensor<8192x2048xbf16>
  dp.param @b11.up : tensor<8192x2048xbf16>
  dp.param @b11.down : tensor<2048x8192xbf16>
  dp.param @b12.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b12.wq : tensor<2048x2048xbf16>
  dp.param @b12.wk : tensor<512x2048xbf16>
  dp.param @b12.wv : tensor<512x2048xbf16>
  dp.param @b12.wo : tensor<2048x2048xbf16>
  dp.param @b12.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b12.gate : tensor<8192x2048xbf16>
  dp.param @b12.up : tensor<8192x2048xbf16>
  dp.param @b12.down : tensor<2048x8192xbf16>
  dp.param @b13.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b13.wq : tensor<2048x2048xbf16>
  dp.param @b13.wk : tensor<512x2048xbf16>
  dp.param @b13.wv : tensor<512x2048xbf16>
  dp.param @b13.wo : tensor<2048x2048xbf16>
  dp.param @b13.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b13.gate : tensor<8192x2048xbf16>
  dp.param @b13.up : tensor<8192x2048xbf16>
  dp.param @b13.down : tensor<2048x8192xbf16>
  dp.param @b14.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b14.wq : tensor<2048x2048xbf16>
  dp.param @b14.wk : tensor<512x2048xbf16>
  dp.param @b14.wv : tensor<512x2048xbf16>
  dp.param @b14.wo : tensor<2048x2048xbf16>
  dp.param @b14.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b14.gate : tensor<8192x2048xbf16>
  dp.param @b14.up : tensor<8192x2048xbf16>
  dp.param @b14.down : tensor<2048x8192xbf16>
  dp.param @b15.n1 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b15.wq : tensor<2048x2048xbf16>
  dp.param @b15.wk : tensor<512x2048xbf16>
  dp.param @b15.wv : tensor<512x2048xbf16>
  dp.param @b15.wo : tensor<2048x2048xbf16>
  dp.param @b15.n2 : tensor<2048xbf16> {init = #dp.ones}
  dp.param @b15.gate : tensor<8192x2048xbf16>
  dp.param @b15.up : tensor<8192x2048xbf16>
  dp.param @b15.down : tensor<2048x8192xbf16>
  dp.param @norm : tensor<2048xbf16> {init = #dp.ones}
  dp.param @head : tensor<32000x2048xbf16>

  dp.forward(%tok: tensor<?x1024xi32>, %tgt: tensor<?x1024xi32>) -> tensor<?xf32> {
    %x0 = dp.embedding @emb(%tok) : tensor<?x1024xi32> -> tensor<?x1024x2048xbf16>
    %h0 = dp.rms_norm @b0.n1(%x0) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q0 = dp.linear @b0.wq(%h0) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k0 = dp.linear @b0.wk(%h0) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v0 = dp.linear @b0.wv(%h0) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a0 = dp.attention %q0, %k0, %v0 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o0 = dp.linear @b0.wo(%a0) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r0 = dp.add %x0, %o0 : tensor<?x1024x2048xbf16>
    %m0 = dp.rms_norm @b0.n2(%r0) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g0 = dp.linear @b0.gate(%m0) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u0 = dp.linear @b0.up(%m0) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s0 = dp.silu %g0 : tensor<?x1024x8192xbf16>
    %p0 = dp.mul %s0, %u0 : tensor<?x1024x8192xbf16>
    %d0 = dp.linear @b0.down(%p0) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x1 = dp.add %r0, %d0 : tensor<?x1024x2048xbf16>
    %h1 = dp.rms_norm @b1.n1(%x1) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q1 = dp.linear @b1.wq(%h1) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k1 = dp.linear @b1.wk(%h1) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v1 = dp.linear @b1.wv(%h1) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a1 = dp.attention %q1, %k1, %v1 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o1 = dp.linear @b1.wo(%a1) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r1 = dp.add %x1, %o1 : tensor<?x1024x2048xbf16>
    %m1 = dp.rms_norm @b1.n2(%r1) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g1 = dp.linear @b1.gate(%m1) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u1 = dp.linear @b1.up(%m1) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s1 = dp.silu %g1 : tensor<?x1024x8192xbf16>
    %p1 = dp.mul %s1, %u1 : tensor<?x1024x8192xbf16>
    %d1 = dp.linear @b1.down(%p1) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x2 = dp.add %r1, %d1 : tensor<?x1024x2048xbf16>
    %h2 = dp.rms_norm @b2.n1(%x2) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q2 = dp.linear @b2.wq(%h2) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k2 = dp.linear @b2.wk(%h2) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v2 = dp.linear @b2.wv(%h2) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a2 = dp.attention %q2, %k2, %v2 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o2 = dp.linear @b2.wo(%a2) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r2 = dp.add %x2, %o2 : tensor<?x1024x2048xbf16>
    %m2 = dp.rms_norm @b2.n2(%r2) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g2 = dp.linear @b2.gate(%m2) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u2 = dp.linear @b2.up(%m2) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s2 = dp.silu %g2 : tensor<?x1024x8192xbf16>
    %p2 = dp.mul %s2, %u2 : tensor<?x1024x8192xbf16>
    %d2 = dp.linear @b2.down(%p2) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x3 = dp.add %r2, %d2 : tensor<?x1024x2048xbf16>
    %h3 = dp.rms_norm @b3.n1(%x3) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q3 = dp.linear @b3.wq(%h3) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k3 = dp.linear @b3.wk(%h3) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v3 = dp.linear @b3.wv(%h3) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a3 = dp.attention %q3, %k3, %v3 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o3 = dp.linear @b3.wo(%a3) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r3 = dp.add %x3, %o3 : tensor<?x1024x2048xbf16>
    %m3 = dp.rms_norm @b3.n2(%r3) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g3 = dp.linear @b3.gate(%m3) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u3 = dp.linear @b3.up(%m3) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s3 = dp.silu %g3 : tensor<?x1024x8192xbf16>
    %p3 = dp.mul %s3, %u3 : tensor<?x1024x8192xbf16>
    %d3 = dp.linear @b3.down(%p3) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x4 = dp.add %r3, %d3 : tensor<?x1024x2048xbf16>
    %h4 = dp.rms_norm @b4.n1(%x4) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q4 = dp.linear @b4.wq(%h4) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k4 = dp.linear @b4.wk(%h4) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v4 = dp.linear @b4.wv(%h4) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a4 = dp.attention %q4, %k4, %v4 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o4 = dp.linear @b4.wo(%a4) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r4 = dp.add %x4, %o4 : tensor<?x1024x2048xbf16>
    %m4 = dp.rms_norm @b4.n2(%r4) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g4 = dp.linear @b4.gate(%m4) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u4 = dp.linear @b4.up(%m4) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s4 = dp.silu %g4 : tensor<?x1024x8192xbf16>
    %p4 = dp.mul %s4, %u4 : tensor<?x1024x8192xbf16>
    %d4 = dp.linear @b4.down(%p4) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x5 = dp.add %r4, %d4 : tensor<?x1024x2048xbf16>
    %h5 = dp.rms_norm @b5.n1(%x5) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q5 = dp.linear @b5.wq(%h5) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k5 = dp.linear @b5.wk(%h5) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v5 = dp.linear @b5.wv(%h5) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a5 = dp.attention %q5, %k5, %v5 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o5 = dp.linear @b5.wo(%a5) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r5 = dp.add %x5, %o5 : tensor<?x1024x2048xbf16>
    %m5 = dp.rms_norm @b5.n2(%r5) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g5 = dp.linear @b5.gate(%m5) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u5 = dp.linear @b5.up(%m5) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s5 = dp.silu %g5 : tensor<?x1024x8192xbf16>
    %p5 = dp.mul %s5, %u5 : tensor<?x1024x8192xbf16>
    %d5 = dp.linear @b5.down(%p5) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x6 = dp.add %r5, %d5 : tensor<?x1024x2048xbf16>
    %h6 = dp.rms_norm @b6.n1(%x6) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q6 = dp.linear @b6.wq(%h6) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k6 = dp.linear @b6.wk(%h6) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v6 = dp.linear @b6.wv(%h6) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a6 = dp.attention %q6, %k6, %v6 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o6 = dp.linear @b6.wo(%a6) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r6 = dp.add %x6, %o6 : tensor<?x1024x2048xbf16>
    %m6 = dp.rms_norm @b6.n2(%r6) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g6 = dp.linear @b6.gate(%m6) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u6 = dp.linear @b6.up(%m6) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s6 = dp.silu %g6 : tensor<?x1024x8192xbf16>
    %p6 = dp.mul %s6, %u6 : tensor<?x1024x8192xbf16>
    %d6 = dp.linear @b6.down(%p6) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x7 = dp.add %r6, %d6 : tensor<?x1024x2048xbf16>
    %h7 = dp.rms_norm @b7.n1(%x7) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q7 = dp.linear @b7.wq(%h7) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k7 = dp.linear @b7.wk(%h7) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v7 = dp.linear @b7.wv(%h7) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a7 = dp.attention %q7, %k7, %v7 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o7 = dp.linear @b7.wo(%a7) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r7 = dp.add %x7, %o7 : tensor<?x1024x2048xbf16>
    %m7 = dp.rms_norm @b7.n2(%r7) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g7 = dp.linear @b7.gate(%m7) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u7 = dp.linear @b7.up(%m7) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s7 = dp.silu %g7 : tensor<?x1024x8192xbf16>
    %p7 = dp.mul %s7, %u7 : tensor<?x1024x8192xbf16>
    %d7 = dp.linear @b7.down(%p7) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x8 = dp.add %r7, %d7 : tensor<?x1024x2048xbf16>
    %h8 = dp.rms_norm @b8.n1(%x8) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q8 = dp.linear @b8.wq(%h8) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k8 = dp.linear @b8.wk(%h8) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v8 = dp.linear @b8.wv(%h8) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a8 = dp.attention %q8, %k8, %v8 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o8 = dp.linear @b8.wo(%a8) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r8 = dp.add %x8, %o8 : tensor<?x1024x2048xbf16>
    %m8 = dp.rms_norm @b8.n2(%r8) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g8 = dp.linear @b8.gate(%m8) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u8 = dp.linear @b8.up(%m8) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s8 = dp.silu %g8 : tensor<?x1024x8192xbf16>
    %p8 = dp.mul %s8, %u8 : tensor<?x1024x8192xbf16>
    %d8 = dp.linear @b8.down(%p8) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x9 = dp.add %r8, %d8 : tensor<?x1024x2048xbf16>
    %h9 = dp.rms_norm @b9.n1(%x9) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q9 = dp.linear @b9.wq(%h9) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k9 = dp.linear @b9.wk(%h9) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v9 = dp.linear @b9.wv(%h9) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a9 = dp.attention %q9, %k9, %v9 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o9 = dp.linear @b9.wo(%a9) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r9 = dp.add %x9, %o9 : tensor<?x1024x2048xbf16>
    %m9 = dp.rms_norm @b9.n2(%r9) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g9 = dp.linear @b9.gate(%m9) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u9 = dp.linear @b9.up(%m9) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s9 = dp.silu %g9 : tensor<?x1024x8192xbf16>
    %p9 = dp.mul %s9, %u9 : tensor<?x1024x8192xbf16>
    %d9 = dp.linear @b9.down(%p9) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x10 = dp.add %r9, %d9 : tensor<?x1024x2048xbf16>
    %h10 = dp.rms_norm @b10.n1(%x10) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q10 = dp.linear @b10.wq(%h10) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k10 = dp.linear @b10.wk(%h10) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v10 = dp.linear @b10.wv(%h10) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a10 = dp.attention %q10, %k10, %v10 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o10 = dp.linear @b10.wo(%a10) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r10 = dp.add %x10, %o10 : tensor<?x1024x2048xbf16>
    %m10 = dp.rms_norm @b10.n2(%r10) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g10 = dp.linear @b10.gate(%m10) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u10 = dp.linear @b10.up(%m10) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s10 = dp.silu %g10 : tensor<?x1024x8192xbf16>
    %p10 = dp.mul %s10, %u10 : tensor<?x1024x8192xbf16>
    %d10 = dp.linear @b10.down(%p10) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x11 = dp.add %r10, %d10 : tensor<?x1024x2048xbf16>
    %h11 = dp.rms_norm @b11.n1(%x11) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q11 = dp.linear @b11.wq(%h11) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k11 = dp.linear @b11.wk(%h11) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v11 = dp.linear @b11.wv(%h11) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a11 = dp.attention %q11, %k11, %v11 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o11 = dp.linear @b11.wo(%a11) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r11 = dp.add %x11, %o11 : tensor<?x1024x2048xbf16>
    %m11 = dp.rms_norm @b11.n2(%r11) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g11 = dp.linear @b11.gate(%m11) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u11 = dp.linear @b11.up(%m11) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s11 = dp.silu %g11 : tensor<?x1024x8192xbf16>
    %p11 = dp.mul %s11, %u11 : tensor<?x1024x8192xbf16>
    %d11 = dp.linear @b11.down(%p11) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x12 = dp.add %r11, %d11 : tensor<?x1024x2048xbf16>
    %h12 = dp.rms_norm @b12.n1(%x12) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q12 = dp.linear @b12.wq(%h12) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k12 = dp.linear @b12.wk(%h12) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v12 = dp.linear @b12.wv(%h12) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a12 = dp.attention %q12, %k12, %v12 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o12 = dp.linear @b12.wo(%a12) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r12 = dp.add %x12, %o12 : tensor<?x1024x2048xbf16>
    %m12 = dp.rms_norm @b12.n2(%r12) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g12 = dp.linear @b12.gate(%m12) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u12 = dp.linear @b12.up(%m12) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s12 = dp.silu %g12 : tensor<?x1024x8192xbf16>
    %p12 = dp.mul %s12, %u12 : tensor<?x1024x8192xbf16>
    %d12 = dp.linear @b12.down(%p12) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x13 = dp.add %r12, %d12 : tensor<?x1024x2048xbf16>
    %h13 = dp.rms_norm @b13.n1(%x13) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q13 = dp.linear @b13.wq(%h13) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k13 = dp.linear @b13.wk(%h13) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v13 = dp.linear @b13.wv(%h13) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a13 = dp.attention %q13, %k13, %v13 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o13 = dp.linear @b13.wo(%a13) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r13 = dp.add %x13, %o13 : tensor<?x1024x2048xbf16>
    %m13 = dp.rms_norm @b13.n2(%r13) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g13 = dp.linear @b13.gate(%m13) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u13 = dp.linear @b13.up(%m13) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s13 = dp.silu %g13 : tensor<?x1024x8192xbf16>
    %p13 = dp.mul %s13, %u13 : tensor<?x1024x8192xbf16>
    %d13 = dp.linear @b13.down(%p13) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x14 = dp.add %r13, %d13 : tensor<?x1024x2048xbf16>
    %h14 = dp.rms_norm @b14.n1(%x14) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q14 = dp.linear @b14.wq(%h14) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k14 = dp.linear @b14.wk(%h14) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v14 = dp.linear @b14.wv(%h14) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a14 = dp.attention %q14, %k14, %v14 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o14 = dp.linear @b14.wo(%a14) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r14 = dp.add %x14, %o14 : tensor<?x1024x2048xbf16>
    %m14 = dp.rms_norm @b14.n2(%r14) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g14 = dp.linear @b14.gate(%m14) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u14 = dp.linear @b14.up(%m14) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s14 = dp.silu %g14 : tensor<?x1024x8192xbf16>
    %p14 = dp.mul %s14, %u14 : tensor<?x1024x8192xbf16>
    %d14 = dp.linear @b14.down(%p14) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x15 = dp.add %r14, %d14 : tensor<?x1024x2048xbf16>
    %h15 = dp.rms_norm @b15.n1(%x15) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %q15 = dp.linear @b15.wq(%h15) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %k15 = dp.linear @b15.wk(%h15) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %v15 = dp.linear @b15.wv(%h15) : tensor<?x1024x2048xbf16> -> tensor<?x1024x512xbf16>
    %a15 = dp.attention %q15, %k15, %v15 {causal, heads = 32, kv_heads = 8, rope, rope_theta = 10000.0} : tensor<?x1024x2048xbf16>, tensor<?x1024x512xbf16>
    %o15 = dp.linear @b15.wo(%a15) : tensor<?x1024x2048xbf16> -> tensor<?x1024x2048xbf16>
    %r15 = dp.add %x15, %o15 : tensor<?x1024x2048xbf16>
    %m15 = dp.rms_norm @b15.n2(%r15) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %g15 = dp.linear @b15.gate(%m15) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %u15 = dp.linear @b15.up(%m15) : tensor<?x1024x2048xbf16> -> tensor<?x1024x8192xbf16>
    %s15 = dp.silu %g15 : tensor<?x1024x8192xbf16>
    %p15 = dp.mul %s15, %u15 : tensor<?x1024x8192xbf16>
    %d15 = dp.linear @b15.down(%p15) : tensor<?x1024x8192xbf16> -> tensor<?x1024x2048xbf16>
    %x16 = dp.add %r15, %d15 : tensor<?x1024x2048xbf16>
    %f = dp.rms_norm @norm(%x16) {eps = 1.0e-5} : tensor<?x1024x2048xbf16>
    %logits = dp.linear @head(%f) : tensor<?x1024x2048xbf16> -> tensor<?x1024x32000xbf16>
    %loss = dp.cross_entropy %logits, %tgt per_sample = mean ignore_index = -1 : tensor<?x1024x32000xbf16>, tensor<?x1024xi32> -> tensor<?xf32>
    dp.return %loss : tensor<?xf32>
  }
}

dp.recipe @train for @llama {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.target<epsilon = 8.0, delta = 1.0e-6>,
  sampling = #dp.poisson<expected_batch = 256, physical_batch = 8>,
  optimizer = #dp.adamw<lr = 3.0e-4, weight_decay = 0.0>,
  steps = 1000,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block, prefetch = 1>,
  grid = @ranks
}
