// The tiny transformer of tinylm-f64.mlir as dpc-import-hf writes it from a
// Hugging Face LlamaForCausalLM config of the same shape (vocabulary 256,
// width 32, 2 layers, 4 heads, 2 KV heads of 8, MLP 64, rms_norm_eps 1e-5,
// rope_theta 1e4, untied): a DP step of an imported model against the f64
// per-sample reference (ProgramStepTest). Written by
//   dpc-import-hf DIR --seq 16 --batch 4 --dtype f64
// with DIR/config.json = test/programs/models/tinylm-llama-config.json; the
// importer's default recipe replaced by the test recipes below.

// Imported by dpc-import-hf from /tmp/tl/config.json (LlamaForCausalLM):
// 2 blocks, width 32, vocabulary 256, 16 tokens a sample, f64.
// Each dp.param names the checkpoint tensor it is loaded from (hf.name;
// hf.transposed and hf.rows: docs/huggingface.md).

shard.grid @ranks(shape = ?)

dp.model @llama attributes {blocks = 2 : i64, hf.architecture = "LlamaForCausalLM", seq = 16 : i64, vocab = 256 : i64, width = 32 : i64} {
  dp.param @emb : tensor<256x32xf64> {hf.name = "model.embed_tokens.weight", init = #dp.normal<0.02>}
  dp.param @b0.n1 : tensor<32xf64> {hf.name = "model.layers.0.input_layernorm.weight", init = #dp.ones}
  dp.param @b0.wq : tensor<32x32xf64> {hf.name = "model.layers.0.self_attn.q_proj.weight", init = #dp.normal<0.02>}
  dp.param @b0.wk : tensor<16x32xf64> {hf.name = "model.layers.0.self_attn.k_proj.weight", init = #dp.normal<0.02>}
  dp.param @b0.wv : tensor<16x32xf64> {hf.name = "model.layers.0.self_attn.v_proj.weight", init = #dp.normal<0.02>}
  dp.param @b0.wo : tensor<32x32xf64> {hf.name = "model.layers.0.self_attn.o_proj.weight", init = #dp.normal<0.02>}
  dp.param @b0.n2 : tensor<32xf64> {hf.name = "model.layers.0.post_attention_layernorm.weight", init = #dp.ones}
  dp.param @b0.gate : tensor<64x32xf64> {hf.name = "model.layers.0.mlp.gate_proj.weight", init = #dp.normal<0.02>}
  dp.param @b0.up : tensor<64x32xf64> {hf.name = "model.layers.0.mlp.up_proj.weight", init = #dp.normal<0.02>}
  dp.param @b0.down : tensor<32x64xf64> {hf.name = "model.layers.0.mlp.down_proj.weight", init = #dp.normal<0.02>}
  dp.param @b1.n1 : tensor<32xf64> {hf.name = "model.layers.1.input_layernorm.weight", init = #dp.ones}
  dp.param @b1.wq : tensor<32x32xf64> {hf.name = "model.layers.1.self_attn.q_proj.weight", init = #dp.normal<0.02>}
  dp.param @b1.wk : tensor<16x32xf64> {hf.name = "model.layers.1.self_attn.k_proj.weight", init = #dp.normal<0.02>}
  dp.param @b1.wv : tensor<16x32xf64> {hf.name = "model.layers.1.self_attn.v_proj.weight", init = #dp.normal<0.02>}
  dp.param @b1.wo : tensor<32x32xf64> {hf.name = "model.layers.1.self_attn.o_proj.weight", init = #dp.normal<0.02>}
  dp.param @b1.n2 : tensor<32xf64> {hf.name = "model.layers.1.post_attention_layernorm.weight", init = #dp.ones}
  dp.param @b1.gate : tensor<64x32xf64> {hf.name = "model.layers.1.mlp.gate_proj.weight", init = #dp.normal<0.02>}
  dp.param @b1.up : tensor<64x32xf64> {hf.name = "model.layers.1.mlp.up_proj.weight", init = #dp.normal<0.02>}
  dp.param @b1.down : tensor<32x64xf64> {hf.name = "model.layers.1.mlp.down_proj.weight", init = #dp.normal<0.02>}
  dp.param @norm : tensor<32xf64> {hf.name = "model.norm.weight", init = #dp.ones}
  dp.param @head : tensor<256x32xf64> {hf.name = "lm_head.weight", init = #dp.normal<0.02>}
  dp.forward(%arg0: tensor<?x16xi32>, %arg1: tensor<?x16xi32>) -> tensor<?xf64> {
    %0 = dp.embedding @emb(%arg0) : tensor<?x16xi32> -> tensor<?x16x32xf64>
    %1 = dp.rms_norm @b0.n1(%0) : tensor<?x16x32xf64>
    %2 = dp.linear @b0.wq(%1) : tensor<?x16x32xf64> -> tensor<?x16x32xf64>
    %3 = dp.linear @b0.wk(%1) : tensor<?x16x32xf64> -> tensor<?x16x16xf64>
    %4 = dp.linear @b0.wv(%1) : tensor<?x16x32xf64> -> tensor<?x16x16xf64>
    %5 = dp.attention %2, %3, %4 {causal, heads = 4 : i64, kv_heads = 2 : i64, rope} : tensor<?x16x32xf64>, tensor<?x16x16xf64>
    %6 = dp.linear @b0.wo(%5) : tensor<?x16x32xf64> -> tensor<?x16x32xf64>
    %7 = dp.add %0, %6 : tensor<?x16x32xf64>
    %8 = dp.rms_norm @b0.n2(%7) : tensor<?x16x32xf64>
    %9 = dp.linear @b0.gate(%8) : tensor<?x16x32xf64> -> tensor<?x16x64xf64>
    %10 = dp.linear @b0.up(%8) : tensor<?x16x32xf64> -> tensor<?x16x64xf64>
    %11 = dp.silu %9 : tensor<?x16x64xf64>
    %12 = dp.mul %11, %10 : tensor<?x16x64xf64>
    %13 = dp.linear @b0.down(%12) : tensor<?x16x64xf64> -> tensor<?x16x32xf64>
    %14 = dp.add %7, %13 : tensor<?x16x32xf64>
    %15 = dp.rms_norm @b1.n1(%14) : tensor<?x16x32xf64>
    %16 = dp.linear @b1.wq(%15) : tensor<?x16x32xf64> -> tensor<?x16x32xf64>
    %17 = dp.linear @b1.wk(%15) : tensor<?x16x32xf64> -> tensor<?x16x16xf64>
    %18 = dp.linear @b1.wv(%15) : tensor<?x16x32xf64> -> tensor<?x16x16xf64>
    %19 = dp.attention %16, %17, %18 {causal, heads = 4 : i64, kv_heads = 2 : i64, rope} : tensor<?x16x32xf64>, tensor<?x16x16xf64>
    %20 = dp.linear @b1.wo(%19) : tensor<?x16x32xf64> -> tensor<?x16x32xf64>
    %21 = dp.add %14, %20 : tensor<?x16x32xf64>
    %22 = dp.rms_norm @b1.n2(%21) : tensor<?x16x32xf64>
    %23 = dp.linear @b1.gate(%22) : tensor<?x16x32xf64> -> tensor<?x16x64xf64>
    %24 = dp.linear @b1.up(%22) : tensor<?x16x32xf64> -> tensor<?x16x64xf64>
    %25 = dp.silu %23 : tensor<?x16x64xf64>
    %26 = dp.mul %25, %24 : tensor<?x16x64xf64>
    %27 = dp.linear @b1.down(%26) : tensor<?x16x64xf64> -> tensor<?x16x32xf64>
    %28 = dp.add %21, %27 : tensor<?x16x32xf64>
    %29 = dp.rms_norm @norm(%28) : tensor<?x16x32xf64>
    %30 = dp.linear @head(%29) : tensor<?x16x32xf64> -> tensor<?x16x256xf64>
    %31 = dp.cross_entropy %30, %arg1 ignore_index = -1 : tensor<?x16x256xf64>, tensor<?x16xi32> -> tensor<?xf64>
    dp.return %31 : tensor<?xf64>
  }
}

// A default recipe to edit before training. delta = 1e-06 is a placeholder:
// set it below 1/N for a dataset of N records (it suits fewer than 1e+06).
// epsilon, the clip bound, the expected batch, the optimizer and the steps
// are starting points too.
dp.recipe @flat_sgd for @llama {
  clip = #dp.clip<flat, max_norm = 2.5>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

dp.recipe @per_layer_sgd for @llama {
  clip = #dp.clip<per_layer, max_norm = 10.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}
