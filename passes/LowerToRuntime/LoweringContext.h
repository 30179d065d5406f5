//===- LoweringContext.h - What the runtime lowerings share -----*- C++ -*-===//
//
// dp-lower-to-runtime builds one dprt.program from a model and its recipe.
// Its lowerings, one file per runtime kernel file, share this context: the
// program's globals, the FSDP units and parameters, the buffer of each
// tensor of the function being built, the arithmetic of buffer sizes, and
// CallArgs, which builds the arguments of one dprt.call.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_PASSES_LOWERTORUNTIME_LOWERINGCONTEXT_H
#define DPC_PASSES_LOWERTORUNTIME_LOWERINGCONTEXT_H

#include "DP/DPOps.h"
#include "DPRT/DPRTDialect.h"
#include "dprt/types.h"
#include "passes/CompiledRecipe.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>

#include <string>

namespace dpc::lowering {

/// The dprt enumerator of a runtime element type (the same value: see the
/// static assertions in DPRTDialect.cpp).
rt::DType toRuntime(::dprt::DType type);

/// The runtime element type of an element type (f64, bf16, f8E4M3FN: the
/// MXFP8 rows of dp.linear_per_sample_grad, else f32), or of a tensor's
/// elements.
::dprt::DType toDType(mlir::Type type);

/// The arguments of one dprt.call, in the order of the runtime function's
/// parameters: buffers by their position among the call's operands,
/// everything else as typed attributes (kernels.def says which kind each
/// parameter takes; the dprt.call verifier checks it).
class CallArgs {
public:
  explicit CallArgs(mlir::MLIRContext *context) : context(context) {}

  CallArgs &buffer(mlir::Value b);
  /// A buffer, or #dprt.null without one.
  CallArgs &bufferOrNull(mlir::Value b);
  CallArgs &i64(int64_t v);
  CallArgs &i32(int32_t v);
  CallArgs &f64(double v);
  CallArgs &flag(bool v);
  CallArgs &dtype(::dprt::DType type);
  CallArgs &string(llvm::StringRef text);
  /// A number only the memory plan knows (convert-dprt-to-emitc fills it).
  CallArgs &planned(rt::PlannedValue which);
  /// Any other attribute: one of the #dprt enums.
  CallArgs &attr(mlir::Attribute value);

  llvm::SmallVector<mlir::Value> buffers;
  llvm::SmallVector<mlir::Attribute> args;

private:
  mlir::MLIRContext *context;
};

/// An FSDP unit (dp.unit) and the globals that hold its shards.
struct UnitInfo {
  mutable dp::UnitOp op; // accessors of ops are non-const
  int64_t index;
  int64_t shard, numel, ranks;
  int64_t globalBase; ///< global index of the unit's position 0
  /// Names of the globals: compute-type parameter shard, acc-type master
  /// shard (the parameter shard itself when the types agree), gradient shard
  /// and the optimizer's state buffers (empty when it keeps fewer).
  std::string paramShard, master, grad, state1, state2;
  /// Every parameter frozen (dp-freeze): only the compute-type shard exists
  /// (master names it too); grad and the states are empty.
  bool frozen = false;
  /// Unsplit, yet gathered (dp-shard gathers trainable 16-bit units on one
  /// shard): no compute-type copy is kept (paramShard is empty); each
  /// gather casts the master into a buffer that lives while layers read it.
  bool castFromMaster = false;
  /// Trainable, and every trainable parameter's clipped sum formed by
  /// dp_apply from the per-sample gradients (sum-in-update): no gradient
  /// shard (grad is empty).
  bool sumsFromRows = false;
};

/// Where a parameter lies: its unit and element offset in the unit.
struct ParamInfo {
  dp::ParamOp op;
  int64_t unit;
  int64_t offset;
};

/// A parameter whose clipped gradient sum dp_apply's update forms from the
/// per-sample gradients dp_microstep left (sum-in-update): the carried
/// buffers (dprt.alloc's `carried` keys) and the shape of the rows.
struct RowsUpdate {
  std::string rows, factors; ///< carried keys
  int64_t rowsOffset = 0;    ///< bytes into the carried rows buffer
  ::dprt::DType rowsType = ::dprt::DType::F32;
  int64_t n = 0; ///< elements a row (the parameter's)
};

/// The recipe's optimizer as the runtime sees it (getOptimizerSpec in
/// Optimizers.cpp reads the optimizer attribute; nothing else does).
struct OptimizerSpec {
  rt::OptimizerKind kind = rt::OptimizerKind::SGD;
  /// Acc-type state buffers per unit (momentum; Adam's m and v).
  int64_t numStates = 0;
  /// The unit-range update kernel, and its arguments after the range (the
  /// compiled ones: the learning rate and the weight decay come from the
  /// StepState).
  llvm::StringRef updateKernel;
  /// The update that reads per-sample gradients and clip factors instead
  /// of a gradient (same hyperparameters).
  llvm::StringRef rowsUpdateKernel;
  llvm::SmallVector<mlir::Attribute> updateHyperparameters;
  /// What dp_describe records (0 where the optimizer has no such value).
  double lr = 0, momentum = 0, beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0;
  bool nesterov = false;
};

class LoweringContext {
public:
  LoweringContext(const CompiledRecipe &compiled, llvm::StringRef backend);

  mlir::MLIRContext *getContext() { return context; }
  CallArgs args() { return CallArgs(context); }

  //===--------------------------------------------------------------------===//
  // What is lowered
  //===--------------------------------------------------------------------===//

  dp::RecipeOp recipe;
  dp::ModelOp model;
  dp::StepOp step;
  dp::ForwardOp forward;
  std::string backend; ///< "cpu" or "cuda", what dp_describe records
  int64_t ranks = 1;   ///< of the whole grid
  /// The grid as replicas x shards: units are split over `shards` ranks
  /// (the collectives of the step run among them) and kept by `replicas`
  /// replicas, whose gradient shards dp_apply sums (hybrid sharding).
  int64_t shards = 1, replicas = 1;
  ::dprt::DType dt = ::dprt::DType::F32;  ///< compute type
  ::dprt::DType acc = ::dprt::DType::F32; ///< accumulation type
  int64_t batch = 0; ///< samples per rank and physical batch
  OptimizerSpec optimizer;
  llvm::SmallVector<UnitInfo> units;
  llvm::StringMap<ParamInfo> params;
  /// Parameters whose dp.vector_grad may leave its sum to dp_apply: every
  /// step is one micro-step on one rank and it is the parameter's only
  /// gradient op (chooseGradientWrites decides).
  llvm::StringSet<> rowsUpdateCandidates;
  /// Those whose sum dp_apply forms (lowerVectorGrad decides), by name.
  llvm::StringMap<RowsUpdate> rowsUpdates;
  /// Parameters whose one dp.linear_grad_weight writes their gradient
  /// instead of adding to it (every step is one micro-step on one rank and
  /// it is the parameter's only gradient op): dp_apply leaves their
  /// gradients as they are instead of zeroing them for the next step.
  llvm::StringSet<> overwrittenGradients;

  //===--------------------------------------------------------------------===//
  // The program
  //===--------------------------------------------------------------------===//

  rt::ProgramOp program;
  llvm::SmallVector<std::string> inputGlobals; ///< one per forward input
  std::string stateGlobal, maskGlobal, lossGlobal;

  mlir::OpBuilder builder;
  /// Where the ops being built come from: the dp op being lowered.
  mlir::Location loc;

  /// Declares a global of `count` elements of `type` (the product of
  /// `count`); returns its name.
  std::string addGlobal(llvm::StringRef name, ::dprt::DType type,
                        llvm::ArrayRef<int64_t> count);
  /// Declares a global of `bytes` bytes.
  std::string addGlobalBytes(llvm::StringRef name, int64_t bytes);
  mlir::Value global(llvm::StringRef name);

  /// Starts function `name` of the program; its buffers are new.
  rt::FuncOp beginFunc(llvm::StringRef name, bool describe = false);
  void endFunc(mlir::ValueRange keep = {});

  void call(llvm::StringRef callee, CallArgs &args);

  //===--------------------------------------------------------------------===//
  // Buffer sizes
  //
  // Every byte count goes through checkedBytes. A size that does not fit in
  // int64_t is an error at `loc` naming the buffer; the lowering then goes
  // on with an empty buffer, so that callers need not check, and the pass
  // fails after the op (sizeOverflowed()).
  //===--------------------------------------------------------------------===//

  /// The product of `factors`, or 0 after reporting that `buffer` does not
  /// fit.
  int64_t checkedBytes(llvm::StringRef buffer, llvm::ArrayRef<int64_t> factors);
  /// Bytes of `count` (the product) elements of `type`, MXFP8 scales
  /// included (dprt::storageBytes), or 0 after reporting that `buffer` does
  /// not fit.
  int64_t storageBytes(llvm::StringRef buffer, ::dprt::DType type,
                       llvm::ArrayRef<int64_t> count);
  /// A temporary of `count` elements of `type` (storageBytes).
  mlir::Value alloc(llvm::StringRef name, ::dprt::DType type,
                    llvm::ArrayRef<int64_t> count);
  /// A temporary the runtime computes the size of (a kernel's workspace):
  /// `bytes` is called only once `bound`, the product it computes, is known
  /// to fit.
  mlir::Value allocWorkspace(llvm::StringRef name,
                             llvm::ArrayRef<int64_t> bound,
                             llvm::function_ref<int64_t()> bytes);
  /// alloc, then a call of `zero` on it: norm kernels add into their target.
  mlir::Value allocZeroed(llvm::StringRef name, ::dprt::DType type,
                          llvm::ArrayRef<int64_t> count);
  mlir::Value view(mlir::Value base, int64_t offset);
  bool sizeOverflowed() const { return overflowed; }

  /// The temporary under `buffer` (through views) and `buffer`'s byte
  /// offset in it, or nullopt when `buffer` is not a temporary.
  std::optional<std::pair<rt::AllocOp, int64_t>>
  temporaryUnder(mlir::Value buffer);
  /// Makes the temporary `alloc` outlive this function: returns its carried
  /// key.
  std::string carry(rt::AllocOp alloc);
  /// In a later function: the buffer an earlier one carried as `key`.
  mlir::Value carried(llvm::StringRef key);

  //===--------------------------------------------------------------------===//
  // The function being built
  //===--------------------------------------------------------------------===//

  /// The buffer that holds `tensor`, or null.
  mlir::Value buf(mlir::Value tensor) { return buffers.lookup(tensor); }
  void setBuffer(mlir::Value tensor, mlir::Value buffer) {
    buffers[tensor] = buffer;
  }
  /// A new compute-type buffer for `tensor`.
  mlir::Value newActivation(mlir::Value tensor, llvm::StringRef name);
  /// Whether `tensor` is what the function returns: the per-sample loss.
  bool isLoss(mlir::Value tensor);

  /// A parameter as the compute kernels read it: in the rank's parameter
  /// shard when units are not split, in the gathered unit when they are
  /// (dp_forward gathers a unit on first use; the step has explicit
  /// dp.all_gather).
  mlir::Value paramPointer(mlir::FlatSymbolRefAttr ref);
  /// Where a parameter's clipped gradient is added: the gradient shard when
  /// units are not split, the unit's full gradient (reduce-scattered later)
  /// when they are.
  mlir::Value gradPointer(mlir::FlatSymbolRefAttr ref);
  /// The buffer a gradient op writes when it accumulates onto `accValue`:
  /// accValue's own buffer when this is its last use, else a copy of it.
  mlir::Value accTarget(mlir::Value accValue, mlir::Operation *user,
                        mlir::Value result, llvm::StringRef name);
  /// The buffer a norm op adds into: that of the dp.norm_sum consuming it,
  /// or a zeroed buffer of its own.
  mlir::Value normTarget(mlir::Operation *normOp);
  /// The norm buffer a normalization backward kernel adds into when the
  /// dp.norm_rows of its per-sample gradients are fused into it; null if
  /// not.
  mlir::Value fusedNormTarget(llvm::ArrayRef<mlir::Value> perSampleGrads);
  /// The buffer the norms summed by `sum` (a dp.norm_sum) were added into,
  /// or null.
  mlir::Value sumBuffer(mlir::Operation *sum) { return sumBuffers.lookup(sum); }

  /// Statistics a forward op saves for its backward op: rstd, mean, lse,
  /// rotated queries and keys.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Value, 3>> saved;
  /// The gathered unit and the unit's full gradient, by unit index.
  llvm::DenseMap<int64_t, mlir::Value> gathered, fullGrads;
  /// The logits of the last dp.cross_entropy: what dp_forward returns.
  mlir::Value logitsBuffer;
  /// The global holding each table of rotary frequencies that dp_init
  /// fills, by what defines it (Attention.cpp); program-wide.
  llvm::DenseMap<mlir::Attribute, std::string> ropeTables;

private:
  mlir::Value allocBytes(llvm::StringRef name, int64_t bytes);

  mlir::MLIRContext *context;
  bool overflowed = false;
  /// Bytes of each carried buffer, by key.
  llvm::StringMap<int64_t> carriedBytes;
  /// The function being built's alloc of each carried buffer it reads: one
  /// each, as the memory plan places one buffer per key and function.
  llvm::StringMap<mlir::Value> carriedHere;
  llvm::DenseMap<mlir::Value, mlir::Value> buffers;
  /// The n2 buffer of each dp.norm_sum.
  llvm::DenseMap<mlir::Operation *, mlir::Value> sumBuffers;
};

} // namespace dpc::lowering

#endif // DPC_PASSES_LOWERTORUNTIME_LOWERINGCONTEXT_H
