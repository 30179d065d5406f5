//===- Model.cpp - f64 reference DP-SGD on per-sample backprop ------------===//

#include "reference/Model.h"

#include <cmath>
#include <stdexcept>

namespace dpc::reference {

using dprt::ClipMode;
using dprt::OptimizerKind;

namespace {

void addInto(Vec &acc, const Vec &v) {
  if (acc.size() != v.size())
    throw std::logic_error("reference: gradient size mismatch");
  for (size_t i = 0; i < v.size(); ++i)
    acc[i] += v[i];
}

[[noreturn]] void fail(const std::string &what) {
  throw std::invalid_argument("reference model: " + what);
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

void Model::requireOpen() const {
  if (!layers_.empty() &&
      (layers_.back().op == Op::CrossEntropy || layers_.back().op == Op::Mse))
    fail("the loss must be the last record");
}

void Model::addParam(const std::string &name, std::vector<int64_t> shape,
                     double init) {
  if (auto it = params_.find(name); it != params_.end()) {
    if (it->second.shape != shape)
      fail("parameter '" + name + "' read as " + shapeString(it->second.shape) +
           " and as " + shapeString(shape));
    return;
  }
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  Param p;
  p.shape = std::move(shape);
  p.value.assign(n, init);
  params_[name] = std::move(p);
  paramOrder_.push_back(name);
}

void Model::defineValue(const std::string &name, int64_t w) {
  if (widths_.count(name))
    fail("value '" + name + "' defined twice");
  widths_[name] = w;
}

int64_t Model::width(const std::string &value) const {
  auto it = widths_.find(value);
  if (it == widths_.end())
    fail("unknown value '" + value + "'");
  return it->second;
}

void Model::tokenInput(const std::string &name) {
  requireOpen();
  tokenInputs_.push_back(name);
}

void Model::realInput(const std::string &name, int64_t w) {
  requireOpen();
  defineValue(name, w);
  realInputs_.push_back(name);
}

void Model::embedding(const std::string &table, const std::string &tokens,
                      const std::string &out, int64_t vocab, int64_t dim) {
  requireOpen();
  addParam(table, {vocab, dim}, 0.0);
  defineValue(out, dim);
  Layer l{Op::Embedding, {tokens}, out, table, ""};
  l.inDim = vocab;
  l.outDim = dim;
  layers_.push_back(l);
}

void Model::positionEmbedding(const std::string &table, const std::string &x,
                              const std::string &out, int64_t maxPositions,
                              int64_t dim) {
  requireOpen();
  if (width(x) != dim)
    fail("position embedding '" + table + "': width mismatch");
  if (tokens_ > maxPositions)
    fail("position embedding '" + table + "': fewer positions than tokens");
  addParam(table, {maxPositions, dim}, 0.0);
  defineValue(out, dim);
  Layer l{Op::PositionEmbedding, {x}, out, table, ""};
  l.inDim = maxPositions;
  l.outDim = dim;
  layers_.push_back(l);
}

void Model::linear(const std::string &weight, const std::string &bias,
                   const std::string &x, const std::string &out, int64_t in,
                   int64_t outDim) {
  requireOpen();
  if (width(x) != in)
    fail("linear '" + weight + "': input width mismatch");
  addParam(weight, {outDim, in}, 0.0);
  if (!bias.empty())
    addParam(bias, {outDim}, 0.0);
  defineValue(out, outDim);
  Layer l{Op::Linear, {x}, out, weight, bias};
  l.inDim = in;
  l.outDim = outDim;
  layers_.push_back(l);
}

void Model::loraLinear(const std::string &weight, const std::string &bias,
                       const std::string &loraA, const std::string &loraB,
                       const std::string &x, const std::string &out, int64_t in,
                       int64_t outDim, int64_t rank, double scaling) {
  linear(weight, bias, x, out + ".base", in, outDim);
  linear(loraA, "", x, out + ".lora_A", in, rank);
  linear(loraB, "", out + ".lora_A", out + ".lora_B", rank, outDim);
  scale(out + ".lora_B", out + ".lora", scaling);
  add(out + ".base", out + ".lora", out);
  // peft trains the adapter only.
  setTrainable(weight, false);
  if (!bias.empty())
    setTrainable(bias, false);
}

void Model::rmsNorm(const std::string &gamma, const std::string &x,
                    const std::string &out, int64_t dim, double eps) {
  requireOpen();
  if (width(x) != dim)
    fail("rms_norm '" + gamma + "': width mismatch");
  addParam(gamma, {dim}, 1.0);
  defineValue(out, dim);
  Layer l{Op::RmsNorm, {x}, out, gamma, ""};
  l.outDim = dim;
  l.eps = eps;
  layers_.push_back(l);
}

void Model::layerNorm(const std::string &gamma, const std::string &beta,
                      const std::string &x, const std::string &out, int64_t dim,
                      double eps) {
  requireOpen();
  if (width(x) != dim)
    fail("layer_norm '" + gamma + "': width mismatch");
  addParam(gamma, {dim}, 1.0);
  if (!beta.empty())
    addParam(beta, {dim}, 0.0);
  defineValue(out, dim);
  Layer l{Op::LayerNorm, {x}, out, gamma, beta};
  l.outDim = dim;
  l.eps = eps;
  layers_.push_back(l);
}

void Model::rope(const std::string &x, const std::string &out, int64_t heads,
                 int64_t headDim, double theta) {
  rope(x, out, heads, headDim, ropeInverseFrequencies(theta, headDim));
}

void Model::rope(const std::string &x, const std::string &out, int64_t heads,
                 int64_t headDim, const Vec &invFreq) {
  requireOpen();
  if (width(x) != heads * headDim || headDim % 2)
    fail("rope: width must be heads * headDim, headDim even");
  if (int64_t(invFreq.size()) != headDim / 2)
    fail("rope: the frequency table needs headDim/2 entries");
  defineValue(out, heads * headDim);
  Layer l{Op::Rope, {x}, out, "", ""};
  l.heads = heads;
  l.headDim = headDim;
  l.invFreq = invFreq;
  layers_.push_back(l);
}

void Model::attention(const std::string &q, const std::string &k,
                      const std::string &v, const std::string &out,
                      int64_t heads, int64_t kvHeads, int64_t headDim,
                      bool causal) {
  requireOpen();
  if (width(q) != heads * headDim || width(k) != kvHeads * headDim ||
      width(v) != kvHeads * headDim || heads % kvHeads)
    fail("attention: widths must be heads/kvHeads * headDim");
  defineValue(out, heads * headDim);
  Layer l{Op::Attention, {q, k, v}, out, "", ""};
  l.heads = heads;
  l.kvHeads = kvHeads;
  l.headDim = headDim;
  l.causal = causal;
  layers_.push_back(l);
}

void Model::activation(dprt::Activation act, const std::string &x,
                       const std::string &out) {
  requireOpen();
  defineValue(out, width(x));
  Layer l{Op::Activation, {x}, out, "", ""};
  l.act = act;
  layers_.push_back(l);
}

void Model::scale(const std::string &x, const std::string &out, double factor) {
  requireOpen();
  defineValue(out, width(x));
  Layer l{Op::Scale, {x}, out, "", ""};
  l.factor = factor;
  layers_.push_back(l);
}

void Model::mul(const std::string &a, const std::string &b,
                const std::string &out) {
  requireOpen();
  if (width(a) != width(b))
    fail("mul: width mismatch");
  defineValue(out, width(a));
  layers_.push_back(Layer{Op::Mul, {a, b}, out, "", ""});
}

void Model::add(const std::string &a, const std::string &b,
                const std::string &out) {
  requireOpen();
  if (width(a) != width(b))
    fail("add: width mismatch");
  defineValue(out, width(a));
  layers_.push_back(Layer{Op::Add, {a, b}, out, "", ""});
}

void Model::crossEntropy(const std::string &logits, const std::string &targets,
                         int64_t classes, bool hasIgnore, int64_t ignoreIndex,
                         dprt::Reduction reduction) {
  requireOpen();
  if (width(logits) != classes)
    fail("cross_entropy: logits width != classes");
  Layer l{Op::CrossEntropy, {logits, targets}, "", "", ""};
  l.outDim = classes;
  l.hasIgnore = hasIgnore;
  l.ignoreIndex = ignoreIndex;
  l.reduction = reduction;
  layers_.push_back(l);
}

void Model::mse(const std::string &prediction, const std::string &target,
                dprt::Reduction reduction) {
  requireOpen();
  if (width(prediction) != width(target))
    fail("mse: width mismatch");
  Layer l{Op::Mse, {prediction, target}, "", "", ""};
  l.reduction = reduction;
  layers_.push_back(l);
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

Vec &Model::param(const std::string &name) {
  auto it = params_.find(name);
  if (it == params_.end())
    fail("unknown parameter '" + name + "'");
  return it->second.value;
}

const Vec &Model::param(const std::string &name) const {
  return const_cast<Model *>(this)->param(name);
}

const std::vector<int64_t> &Model::paramShape(const std::string &name) const {
  auto it = params_.find(name);
  if (it == params_.end())
    fail("unknown parameter '" + name + "'");
  return it->second.shape;
}

void Model::setTrainable(const std::string &name, bool trainable) {
  param(name);
  params_[name].trainable = trainable;
}

std::vector<std::string> Model::trainableParams() const {
  std::vector<std::string> names;
  for (const std::string &n : paramOrder_)
    if (params_.at(n).trainable)
      names.push_back(n);
  return names;
}

//===----------------------------------------------------------------------===//
// One sample: forward and reverse sweep
//===----------------------------------------------------------------------===//

Model::Sample Model::forwardSample(const Batch &batch, int64_t b) const {
  if (layers_.empty() ||
      (layers_.back().op != Op::CrossEntropy && layers_.back().op != Op::Mse))
    fail("the model has no loss");
  const int64_t T = tokens_;
  Sample s;
  for (const std::string &name : tokenInputs_) {
    const Tokens &all = batch.tokens.at(name);
    s.tokens[name] = Tokens(all.begin() + b * T, all.begin() + (b + 1) * T);
  }
  for (const std::string &name : realInputs_) {
    const Vec &all = batch.reals.at(name);
    int64_t n = T * width(name);
    s.values[name] = Vec(all.begin() + b * n, all.begin() + (b + 1) * n);
  }
  auto val = [&](const std::string &n) -> const Vec & {
    return s.values.at(n);
  };
  for (const Layer &l : layers_) {
    const std::string &x = l.in[0];
    switch (l.op) {
    case Op::Embedding:
      s.values[l.out] =
          embeddingForward(s.tokens.at(x), param(l.weight), l.outDim);
      break;
    case Op::PositionEmbedding:
      s.values[l.out] =
          positionEmbeddingForward(val(x), param(l.weight), 1, T, l.outDim);
      break;
    case Op::Linear:
      s.values[l.out] = linearForward(val(x), param(l.weight),
                                      l.bias.empty() ? nullptr : &param(l.bias),
                                      T, l.inDim, l.outDim);
      break;
    case Op::RmsNorm:
      s.values[l.out] =
          rmsNormForward(val(x), param(l.weight), T, l.outDim, l.eps);
      break;
    case Op::LayerNorm:
      s.values[l.out] = layerNormForward(
          val(x), param(l.weight), l.bias.empty() ? nullptr : &param(l.bias), T,
          l.outDim, l.eps);
      break;
    case Op::Rope:
      s.values[l.out] =
          ropeForward(val(x), 1, T, l.heads, l.headDim, l.invFreq);
      break;
    case Op::Attention:
      s.values[l.out] =
          attentionForward(val(x), val(l.in[1]), val(l.in[2]),
                           {1, T, l.heads, l.kvHeads, l.headDim, l.causal});
      break;
    case Op::Activation:
      s.values[l.out] = activationForward(l.act, val(x));
      break;
    case Op::Scale:
      s.values[l.out] = scaleForward(val(x), l.factor);
      break;
    case Op::Mul:
      s.values[l.out] = mulForward(val(x), val(l.in[1]));
      break;
    case Op::Add:
      s.values[l.out] = addForward(val(x), val(l.in[1]));
      break;
    case Op::CrossEntropy:
      s.loss = crossEntropyForward(val(x), s.tokens.at(l.in[1]), 1, T, l.outDim,
                                   l.hasIgnore, l.ignoreIndex, l.reduction)[0];
      break;
    case Op::Mse:
      s.loss =
          mseForward(val(x), val(l.in[1]), 1, T * width(x), l.reduction)[0];
      break;
    }
  }
  return s;
}

std::map<std::string, Vec> Model::backwardSample(const Sample &s) const {
  const int64_t T = tokens_;
  std::map<std::string, Vec> dv; // d loss / d value
  auto grad = [&](const std::string &n) -> Vec & {
    auto it = dv.find(n);
    if (it == dv.end())
      it = dv.emplace(n, Vec(s.values.at(n).size(), 0.0)).first;
    return it->second;
  };
  auto val = [&](const std::string &n) -> const Vec & {
    return s.values.at(n);
  };
  // d loss / d parameter (trainable only); a parameter read by several
  // layers (tied) collects the sum of its uses' gradients.
  std::map<std::string, Vec> dp;
  auto paramGrad = [&](const std::string &p, const Vec &g) {
    if (p.empty() || !params_.at(p).trainable)
      return;
    auto it = dp.find(p);
    if (it == dp.end())
      dp.emplace(p, g);
    else
      addInto(it->second, g);
  };
  const Vec seed{1.0};

  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    const Layer &l = *it;
    const std::string &x = l.in[0];
    if (l.op == Op::CrossEntropy) {
      addInto(grad(x), crossEntropyBackward(val(x), s.tokens.at(l.in[1]), seed,
                                            1, T, l.outDim, l.hasIgnore,
                                            l.ignoreIndex, l.reduction));
      continue;
    }
    if (l.op == Op::Mse) {
      addInto(grad(x), mseBackward(val(x), val(l.in[1]), seed, 1, T * width(x),
                                   l.reduction));
      continue;
    }
    auto dyIt = dv.find(l.out);
    if (dyIt == dv.end())
      continue; // the loss does not depend on this value
    const Vec dy = dyIt->second;
    switch (l.op) {
    case Op::Embedding:
      paramGrad(l.weight, embeddingGradPerSample(s.tokens.at(x), dy, 1, T,
                                                 l.inDim, l.outDim)[0]);
      break;
    case Op::PositionEmbedding:
      addInto(grad(x), dy);
      paramGrad(l.weight,
                positionEmbeddingGradPerSample(dy, 1, T, l.inDim, l.outDim)[0]);
      break;
    case Op::Linear:
      addInto(grad(x),
              linearBackwardInput(dy, param(l.weight), T, l.inDim, l.outDim));
      paramGrad(l.weight, linearWeightGradPerSample(val(x), dy, 1, T, l.inDim,
                                                    l.outDim)[0]);
      paramGrad(l.bias, biasGradPerSample(dy, 1, T, l.outDim)[0]);
      break;
    case Op::RmsNorm:
      addInto(grad(x),
              rmsNormBackward(val(x), param(l.weight), dy, T, l.outDim, l.eps));
      paramGrad(l.weight, rmsNormGammaGradPerSample(val(x), dy, 1, T, l.outDim,
                                                    l.eps)[0]);
      break;
    case Op::LayerNorm:
      addInto(grad(x), layerNormBackward(val(x), param(l.weight), dy, T,
                                         l.outDim, l.eps));
      paramGrad(l.weight, layerNormGammaGradPerSample(val(x), dy, 1, T,
                                                      l.outDim, l.eps)[0]);
      paramGrad(l.bias, biasGradPerSample(dy, 1, T, l.outDim)[0]);
      break;
    case Op::Rope:
      addInto(grad(x), ropeBackward(dy, 1, T, l.heads, l.headDim, l.invFreq));
      break;
    case Op::Attention: {
      AttentionGrads g =
          attentionBackward(val(x), val(l.in[1]), val(l.in[2]), dy,
                            {1, T, l.heads, l.kvHeads, l.headDim, l.causal});
      addInto(grad(x), g.dq);
      addInto(grad(l.in[1]), g.dk);
      addInto(grad(l.in[2]), g.dv);
      break;
    }
    case Op::Activation:
      addInto(grad(x), activationBackward(l.act, val(x), dy));
      break;
    case Op::Scale:
      addInto(grad(x), scaleForward(dy, l.factor));
      break;
    case Op::Mul:
      addInto(grad(x), mulForward(dy, val(l.in[1])));
      addInto(grad(l.in[1]), mulForward(dy, val(x)));
      break;
    case Op::Add:
      addInto(grad(x), dy);
      addInto(grad(l.in[1]), dy);
      break;
    case Op::CrossEntropy:
    case Op::Mse:
      break;
    }
  }
  // A trainable parameter the loss does not reach has a zero gradient.
  for (const std::string &p : trainableParams())
    if (!dp.count(p))
      dp[p] = Vec(params_.at(p).value.size(), 0.0);
  return dp;
}

//===----------------------------------------------------------------------===//
// Batches and DP-SGD
//===----------------------------------------------------------------------===//

Vec Model::losses(const Batch &batch) const {
  Vec loss(batch.size);
  for (int64_t b = 0; b < batch.size; ++b)
    loss[b] = forwardSample(batch, b).loss;
  return loss;
}

StepResult Model::perSampleGradients(const Batch &batch) const {
  StepResult r;
  const int64_t B = batch.size;
  r.loss.assign(B, 0.0);
  r.norm.assign(B, 0.0);
  for (const std::string &p : trainableParams()) {
    r.grads[p] = PerSample(B);
    r.norm2[p] = Vec(B, 0.0);
  }
  for (int64_t b = 0; b < B; ++b) {
    Sample s = forwardSample(batch, b);
    r.loss[b] = s.loss;
    for (auto &[p, g] : backwardSample(s)) {
      r.norm2[p][b] = sumSquares(g);
      r.norm[b] += r.norm2[p][b];
      r.grads[p][b] = std::move(g);
    }
  }
  for (double &n : r.norm)
    n = std::sqrt(n);
  return r;
}

namespace {

/// The clip factor of one unit (a sample or a user) whose gradient has norm
/// `norm` (over all parameters, or over one under per-layer clipping).
double unitClipFactor(const Recipe &recipe, double norm, double bound) {
  if (!recipe.clipping)
    return 1.0;
  return clipFactor(recipe.clip, norm * (1.0 + recipe.normRelErr), bound,
                    recipe.gamma);
}

/// C, or C_l = C / sqrt(L) per parameter under per-layer clipping.
double clipBound(const Recipe &recipe, size_t trainable) {
  return recipe.clip == ClipMode::PerLayer
             ? recipe.maxNorm / std::sqrt(double(trainable))
             : recipe.maxNorm;
}

} // namespace

Vec StepResult::gradMatrix(const std::string &param) const {
  auto it = grads.find(param);
  if (it == grads.end())
    fail("no per-sample gradient of '" + param + "'");
  Vec m;
  for (const Vec &row : it->second)
    m.insert(m.end(), row.begin(), row.end());
  return m;
}

void Model::clipSamples(StepResult &r, const Vec &mask,
                        const Recipe &recipe) const {
  const int64_t B = int64_t(mask.size());
  std::vector<std::string> trainable = trainableParams();
  const double bound = clipBound(recipe, trainable.size());
  for (const std::string &p : trainable) {
    Vec c(B, 0.0);
    for (int64_t b = 0; b < B; ++b) {
      if (mask[b] == 0)
        continue;
      c[b] = recipe.clip == ClipMode::PerLayer
                 ? unitClipFactor(recipe, std::sqrt(r.norm2[p][b]), bound)
                 : unitClipFactor(recipe, r.norm[b], bound);
      c[b] *= mask[b];
    }
    r.clippedSum[p] = weightedSum(r.grads[p], c);
    // An empty batch has no per-sample gradient to give the sum its size.
    if (B == 0)
      r.clippedSum[p].assign(params_.at(p).value.size(), 0.0);
    r.clip[p] = std::move(c);
  }
}

void Model::clipUsers(StepResult &r, const Batch &batch, const Vec &mask,
                      const Recipe &recipe) const {
  const int64_t B = batch.size;
  if (int64_t(batch.users.size()) != B)
    fail("privacy unit user: Batch::users needs one user per sample");
  std::map<int64_t, int64_t> index; // user id -> u
  for (int64_t id : batch.users)
    index[id] = 0;
  for (auto &[id, u] : index) {
    u = int64_t(r.users.size());
    r.users.push_back(id);
  }
  const int64_t U = int64_t(r.users.size());
  std::vector<int64_t> userOf(B);
  std::vector<bool> counted(U, false); // has an unmasked sample
  for (int64_t b = 0; b < B; ++b) {
    userOf[b] = index.at(batch.users[b]);
    if (mask[b] != 0)
      counted[userOf[b]] = true;
  }

  std::vector<std::string> trainable = trainableParams();
  r.userNorm.assign(U, 0.0);
  for (const std::string &p : trainable) {
    // G_{p,u} = sum over u's samples b of mask_b grad_{p,b}.
    PerSample g(U, Vec(params_.at(p).value.size(), 0.0));
    for (int64_t b = 0; b < B; ++b)
      if (mask[b] != 0)
        for (size_t i = 0; i < g[userOf[b]].size(); ++i)
          g[userOf[b]][i] += mask[b] * r.grads[p][b][i];
    Vec n2(U);
    for (int64_t u = 0; u < U; ++u) {
      n2[u] = sumSquares(g[u]);
      r.userNorm[u] += n2[u];
    }
    r.userGrads[p] = std::move(g);
    r.userNorm2[p] = std::move(n2);
  }
  for (double &n : r.userNorm)
    n = std::sqrt(n);

  const double bound = clipBound(recipe, trainable.size());
  for (const std::string &p : trainable) {
    Vec c(U, 0.0);
    for (int64_t u = 0; u < U; ++u)
      if (counted[u])
        c[u] = recipe.clip == ClipMode::PerLayer
                   ? unitClipFactor(recipe, std::sqrt(r.userNorm2[p][u]), bound)
                   : unitClipFactor(recipe, r.userNorm[u], bound);
    r.clippedSum[p] = weightedSum(r.userGrads[p], c);
    if (U == 0)
      r.clippedSum[p].assign(params_.at(p).value.size(), 0.0);
    Vec perSample(B);
    for (int64_t b = 0; b < B; ++b)
      perSample[b] = mask[b] * c[userOf[b]];
    r.clip[p] = std::move(perSample);
    r.userClip[p] = std::move(c);
  }
}

StepResult Model::dpStep(const Batch &batch, const Vec &mask,
                         const Recipe &recipe) {
  if (int64_t(mask.size()) != batch.size)
    fail("mask size != batch size");
  StepResult r = perSampleGradients(batch);
  if (recipe.unit == PrivacyUnit::User)
    clipUsers(r, batch, mask, recipe);
  else
    clipSamples(r, mask, recipe);

  std::vector<std::string> trainable = trainableParams();
  ++steps_;
  for (const std::string &p : trainable) {
    Param &prm = params_.at(p);
    Vec g = r.clippedSum[p];
    for (double &e : g)
      e /= recipe.expectedBatch;
    switch (recipe.optimizer) {
    case OptimizerKind::SGD:
      sgdStep(prm.value, g, recipe.lr, recipe.weightDecay);
      break;
    case OptimizerKind::Momentum:
      prm.state1.resize(g.size(), 0.0);
      momentumStep(prm.value, prm.state1, g, recipe.lr, recipe.momentum,
                   recipe.nesterov, recipe.weightDecay);
      break;
    case OptimizerKind::AdamW:
      prm.state1.resize(g.size(), 0.0);
      prm.state2.resize(g.size(), 0.0);
      adamwStep(prm.value, prm.state1, prm.state2, g, steps_, recipe.lr,
                recipe.beta1, recipe.beta2, recipe.eps, recipe.weightDecay);
      break;
    }
  }
  return r;
}

} // namespace dpc::reference
