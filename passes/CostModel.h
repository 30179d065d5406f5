//===- CostModel.h - FLOPs of per-sample norms and weight gradients -*- C++
//-*-===//
//
// The clip planner chooses norm methods with these formulas and the report
// prints them, so both always agree. Counts are floating-point operations
// (a multiply-add is 2) per physical batch of one rank.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_PASSES_COSTMODEL_H
#define DPC_PASSES_COSTMODEL_H

#include "DP/DPOps.h"
#include "passes/OptionValues.h"

#include <cstdint>

namespace dpc {

/// The per-sample norm of a linear layer with T rows of width d (input) and
/// p (output) per sample.
struct LinearNormShape {
  int64_t batch, tokens, in, out;
};

/// The shape of the layer whose input is `x` and output gradient `dy`.
LinearNormShape linearNormShape(mlir::Value x, mlir::Value dy);

/// rank-1 (T = 1): ||a||^2 ||g||^2.
double rank1NormFlops(const LinearNormShape &s);
/// Gram, A side: A A^T, 2 T^2 d per sample (shared by the layers that read A).
double gramInputFlops(const LinearNormShape &s);
/// Gram, one layer's G side and its share of the inner product:
/// 2 T^2 p + 2 T^2 per sample.
double gramOutputFlops(const LinearNormShape &s);
/// Direct: G^T A formed per sample, 2 T d p, and squared, d p.
double directNormFlops(const LinearNormShape &s);

/// The method for a linear weight: rank-1 for one row per sample, Gram iff
/// T (d + p) < d p (the Gram norm's 2T^2(d+p) against the direct norm's
/// 2Tdp), direct otherwise (ties go to direct: it needs no T x T buffers).
dp::NormMethod chooseLinearNormMethod(const LinearNormShape &s);

/// The clipped weight gradient sum_b c_b G_b^T A_b: 2 B T d p (+ B T p for
/// scaling G).
double linearWeightGradFlops(const LinearNormShape &s);

/// The materialized method (`dp.linear_per_sample_grad`): each sample's
/// gradient G_b^T A_b formed (2 B T d p, the FLOPs of the weight-gradient
/// product), its squares summed (norm: 2 B d p) and the clipped sum
/// sum_b c_b g_b formed from the B slices (2 B d p).
double materializedNormFlops(const LinearNormShape &s);
double materializedGradFlops(const LinearNormShape &s);
/// Bytes an element of the per-sample gradients takes, on average:
/// `computeBytes`, or for MXFP8 its e4m3 byte and 1/32 of a scale byte.
double rowElementBytes(PerSampleRows rows, int64_t computeBytes);
/// Bytes of the B per-sample gradients, stored in the compute type or as
/// MXFP8 (dprt::storageBytes: B d p + B d p / 32): what the lowering
/// allocates for them.
int64_t materializedBytes(const LinearNormShape &s, int64_t computeBytes,
                          PerSampleRows rows = PerSampleRows::Compute);

/// Sustained matrix-product rate and memory bandwidth of one rank's device:
/// the time model that ranks norm methods. Not a benchmark: an H100-class
/// GPU for cuda (700 TFLOP/s in bf16 with f32 accumulation, 3 TB/s), a few
/// cores for cpu (100 GFLOP/s, 10 GB/s). The per-sample Gram products
/// (B products of T x T from K = d or p, and their dot) run slower than
/// the weight-gradient products on the GPU: 465 TFLOP/s, fitted to one H100
/// measurement (CostModel.cpp). `fusedNorms`: in bf16 the device sums the
/// norms in the products' epilogues where dprt/fused_norms.h says (an sm_90
/// GPU with the CUTLASS kernels; on other GPUs the cuda model is optimistic
/// by the passes it leaves out).
struct DeviceRates {
  double flopsPerSecond, bytesPerSecond, gramFlopsPerSecond;
  bool fusedNorms;
};
DeviceRates deviceRates(Backend backend);

/// The format of a materialized weight's per-sample gradients when
/// `asked` (dp-clip-plan's per-sample-rows) for a `compute`-type model on a
/// device of `rates`: MXFP8 where asked, the input width is a multiple of
/// the 32 elements of a scale block and the model is bf16 or f32
/// (dp.linear_per_sample_grad's verifier holds the same), else the compute
/// type. Auto asks for MXFP8 where the device would make bf16 rows in the
/// fused product (bf16, `rates.fusedNorms`, dprt/fused_norms.h): there the
/// MXFP8 product, always fused, costs about what the bf16 one does (one
/// H100, b 8 T 1024: q/o 134 against 135 us, gate/up 480/452, down
/// 493/475, the 32000 head 1977/1760) and the update reads half the bytes,
/// so the step ran as fast (+0.2 %) in 7.3 GiB less; where cuBLASLt's two
/// passes make bf16 rows (long K), they were faster than any MXFP8 product
/// (DP 3 % slower at T = 4096 and 8192 with MXFP8 rows everywhere;
/// docs/PERFORMANCE.md).
PerSampleRows rowsFormatFor(const LinearNormShape &s, mlir::Type compute,
                            PerSampleRows asked, const DeviceRates &rates);

/// Predicted seconds, per physical batch, of a linear weight's norm and
/// clipped weight gradient by `method` (rank1, gram, direct or
/// materialized): flops / rate + bytes moved / bandwidth. Bytes moved:
/// Gram (share + 3) B T^2 acc (A A^T written, its share `gramInputShare` in
/// [0, 1], 0 when another layer pays it; per layer G G^T written and both
/// read by gram_dot) or (share + 1) B T^2 acc where the Gram norm is fused
/// (A A^T read by the epilogue), direct 2 B d p acc (each sample's gradient
/// written and read back; nothing where fused), the book-keeping weight
/// gradient 2 B T p c (diag(c) G written and read), materialized
/// 3 B d p r + 2 d p acc (the slices written, read by the norm and by the
/// weighted sum, the gradient read and written; 2 B d p r for the slices
/// where the norm is fused; no gradient with `sumInUpdate`, where the
/// optimizer update reads the slices instead: dpc --sum-in-update), with r
/// the bytes of a slice element in the `rows` format (rowElementBytes: c,
/// or 1 + 1/32 for MXFP8; whether the norm is fused follows the bf16 rule
/// of dprt/fused_norms.h either way).
double linearParamSeconds(const LinearNormShape &s, dp::NormMethod method,
                          int64_t computeBytes, int64_t accBytes,
                          const DeviceRates &rates, double gramInputShare = 1.0,
                          bool sumInUpdate = false,
                          PerSampleRows rows = PerSampleRows::Compute);

/// Bias: per sample, T p additions and p squares: B (T p + 2 p).
double biasNormFlops(int64_t batch, int64_t tokens, int64_t out);
/// Embedding: per sample, segment sums of the T rows by token and their
/// squares, counted as 2 T d.
double embeddingNormFlops(int64_t batch, int64_t tokens, int64_t dim);
/// Normalization scale or bias: the per-sample gradient sum_t dy * xhat
/// (2 T d) and its square (2 d), per sample.
double rowsNormFlops(int64_t batch, int64_t tokens, int64_t dim);
/// Clipped sums of bias, embedding and normalization gradients: 2 per
/// element added (scale and add).
double elementGradFlops(int64_t rows, int64_t width);

/// A table [V, d] read by a dp.embedding of T_e tokens per sample and, as
/// its weight, by a dp.linear head of T_h rows per sample.
struct TiedNormShape {
  int64_t batch, tokensEmb, tokensHead, vocab, dim;
};

/// The cross term 2 <E_b, L_b> through M_b = A_b Ge_b^T (T_h x T_e):
/// 2 T_h T_e d per sample for M_b and 2 T_h T_e for its inner product with
/// the gathered G_b[s, x_t].
double tiedCrossFlops(const TiedNormShape &s);
/// The tied gradient formed per sample: L_b = G_b^T A_b (2 T_h V d, as the
/// direct norm), the embedding's rows added (T_e d) and squared (V d).
double tiedDirectFlops(const TiedNormShape &s);
/// Whether forming the tied gradient is cheaper than the head's own norm
/// (`headNormFlops`, by its method), the embedding norm and the cross term
/// together (ties go to the cross term: it needs no V x d buffer).
bool chooseTiedDirect(const TiedNormShape &s, double headNormFlops);

/// Relative error bound of a computed per-sample norm whose longest chain of
/// accumulated terms is `terms` long, in arithmetic with unit roundoff `u`:
/// lambda sqrt(terms) u with lambda = 8, the probabilistic bound of Higham and
/// Mary (2019) with a wide margin (docs/privacy.md).
double normRelativeError(double terms, double unitRoundoff);

} // namespace dpc

#endif // DPC_PASSES_COSTMODEL_H
