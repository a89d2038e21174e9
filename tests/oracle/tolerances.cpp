// Every tolerance of the oracle, one row per (op, dtype, backend) with the reason. A comparison
// passes when |got - oracle| <= atol + rtol * |oracle| for every element (a NaN never passes);
// integer outputs (indices, masks) must match exactly. The row used is the most specific match
// (op over dtype over backend; "*" matches anything). The oracle is ref in float64 on inputs
// already rounded through the dtype under test, so a row accounts only for the arithmetic of
// the candidate: its rounding, its summation order, its approximations.
#include <cstring>
#include <string>
#include <vector>

#include "tests/oracle/oracle.h"

namespace kiln::oracle {
namespace {

struct Row {
  const char* op;
  const char* dtype;
  const char* backend;
  double rtol, atol;
  const char* why;
};

const std::vector<Row>& rows() {
  static const std::vector<Row> r = {
      // Defaults by dtype.
      {"*", "float64", "*", 1e-12, 1e-12, "float64 against float64: only the order of operations differs"},
      {"*", "float32", "*", 2e-6, 1e-6, "float32 elementwise math: a few ulps of the result (2^-23 each)"},
      {"*", "bfloat16", "*", 1e-2, 1e-2, "a bfloat16 result: 8 significant bits, half an ulp is 2^-9 relative"},
      {"*", "float16", "*", 2e-3, 1e-3, "a float16 result: 11 significant bits, half an ulp is 2^-12 relative"},
      // Data movement: every element is copied, never computed.
      {"copy", "*", "*", 0, 0, "a copy or conversion is exact (the oracle converts the same rounded inputs)"},
      {"copy", "bfloat16", "*", 0, 0, "float32 -> bfloat16 rounds to nearest even in every backend and in the oracle's conversion"},
      {"copy", "float16", "*", 0, 0, "float32 -> float16 rounds to nearest even in every backend and in the oracle's conversion"},
      {"fill", "*", "*", 0, 0, "one value written everywhere"},
      {"concat", "*", "*", 0, 0, "a copy of blocks"},
      {"concat", "bfloat16", "*", 0, 0, "a copy of blocks"},
      {"pad_fwd", "*", "*", 0, 0, "a gather of input elements (constant: the value)"},
      {"index_scatter", "*", "*", 0, 0, "a scatter of distinct elements, nothing added"},
      {"gather", "*", "*", 0, 0, "a gather: every element copied, never computed"},
      {"where", "*", "*", 0, 0, "one of two elements copied"},
      {"sort", "*", "*", 0, 0, "values copied in an order both sides define (stable, NaN last)"},
      {"scatter", "float32", "*", 2e-6, 2e-6, "copies, or sums of <= 7 values in index order: a float32 rounding per add"},
      {"cumsum", "float32", "*", 1e-5, 2e-5, "running float32 sums of <= 40 terms in [-1, 1): a rounding per step"},
      {"dropout_fwd", "float32", "*", 2e-7, 0, "x * 1/(1-p): one float32 rounding of the scale and one of the product"},
      // Random fills: the same Philox bits as ref (counter-based: element i uses counter offset + i/4).
      {"random", "float32", "*", 2e-7, 2e-7, "a + (b - a) u and Box-Muller on the same float draws; one float32 rounding of the result"},
      {"random", "bfloat16", "*", 0, 0, "the same draw rounded once to bfloat16"},
      {"random", "float64", "native", 6e-8, 1e-12, "native (CPU and CUDA) narrows every draw through float, ref keeps a + b * draw in double: one float rounding (2^-24)"},
      {"random", "float64", "emu", 6e-8, 1e-12, "the CUDA kernel under the emulator: native's float draws (one float rounding, 2^-24)"},
      // Sums of K products of inputs in [-1, 1): float32 accumulation grows like sqrt(K) ulps of
      // the sum's magnitude; blocked kernels (native GEMM's 6x16 tiles, oneDNN's) reorder it.
      {"gemm", "float32", "*", 1e-5, 1e-5, "float32 accumulation over K <= 70 terms, in the kernel's blocking order"},
      {"linear_fwd", "float32", "*", 1e-5, 1e-5, "float32 accumulation over ic <= 70 terms (GEMM blocking order)"},
      {"linear_bwd_data", "float32", "*", 1e-5, 1e-5, "float32 accumulation over oc <= 70 terms"},
      {"linear_bwd_weights", "float32", "*", 1e-5, 1e-5, "float32 accumulation over the batch and the bias sum"},
      {"conv2d_fwd", "float32", "*", 2e-5, 2e-5, "float32 accumulation over C/g * R * S <= 75 products (im2col + GEMM order)"},
      {"conv2d_bwd_data", "float32", "*", 2e-5, 2e-5, "float32 accumulation over K/g * R * S products"},
      {"conv2d_bwd_weights", "float32", "*", 5e-5, 5e-5, "float32 accumulation over N * P * Q <= 200 products per weight"},
      {"conv2d_fwd", "float32", "onednn", 1e-4, 1e-4, "oneDNN may pick a Winograd or FFT-free blocked algorithm; its transforms lose ~10 ulps"},
      {"conv2d_fwd", "bfloat16", "*", 2e-2, 2e-2, "bfloat16 products accumulated in float32, the result rounded to bfloat16"},
      {"conv2d_bwd_data", "bfloat16", "*", 2e-2, 2e-2, "bfloat16 products accumulated in float32, the result rounded to bfloat16"},
      {"conv2d_bwd_weights", "bfloat16", "*", 4e-2, 4e-2, "bfloat16 gradients of up to 200 products rounded to bfloat16; the bias gradient float32"},
      {"reduce", "float32", "*", 1e-5, 1e-6, "float32 sum or mean of <= 40 terms in the kernel's order (vector lanes)"},
      {"sum", "float32", "*", 2e-6, 1e-6, "float32 sum of <= 4 inputs"},
      {"sum_squares", "float32", "*", 1e-12, 1e-12, "squares accumulated in double from float32 inputs (exact products)"},
      {"multi_tensor_sum_squares", "float32", "*", 1e-12, 1e-12, "squares accumulated in double from float32 inputs"},
      // Normalisations: a mean and a variance over the batch, an exp and a log-sum-exp.
      {"batch_norm_fwd", "float32", "*", 2e-5, 2e-5, "float32 mean and variance over N * S <= 70 elements, then 1/sqrt"},
      {"batch_norm_bwd", "float32", "*", 5e-5, 5e-5, "two float32 reductions over N * S and their combination"},
      {"batch_norm_fwd", "bfloat16", "*", 2e-2, 2e-2, "bfloat16 activations; statistics in float32"},
      {"batch_norm_bwd", "bfloat16", "*", 3e-2, 3e-2, "bfloat16 activations and gradients; reductions in float32"},
      {"softmax_fwd", "float32", "*", 1e-5, 1e-6, "float32 exp and sum over dim <= 33 terms"},
      {"softmax_bwd", "float32", "*", 1e-5, 1e-5, "a float32 dot product over dim, then products"},
      {"softmax_fwd", "float32", "onednn", 1e-5, 1e-5,
       "oneDNN's vector exp and log (polynomials) and its summation order: log_softmax values near 0 "
       "are off by up to 3e-6 absolute on oneDNN 3.7 (-0.0651709 vs -0.0651738 at [3,5,7])"},
      {"lrn_fwd", "float32", "*", 1e-5, 1e-6, "float32 window sums of squares and pow(scale, -beta)"},
      {"lrn_bwd", "float32", "*", 1e-4, 1e-5, "float32 window sums of products; oneDNN's pow approximation"},
      {"cross_entropy_fwd", "float32", "*", 1e-5, 1e-5, "float32 log-sum-exp over C and the mean over N * S"},
      {"cross_entropy_bwd", "float32", "*", 1e-5, 1e-6, "float32 exp(x - lse) times the gradient"},
      {"nll_fwd", "float32", "*", 1e-5, 1e-6, "a float32 sum over <= 30 targets"},
      {"point_loss_fwd", "float32", "*", 1e-5, 1e-5, "float32 log1p/exp per element and a sum over n <= 40"},
      {"point_loss_bwd", "float32", "*", 1e-5, 1e-6, "float32 sigmoid per element"},
      {"unary", "float32", "onednn", 1e-5, 1e-6, "oneDNN's vectorised tanh, logistic and erf are polynomial approximations (~10 ulps)"},
      {"binary", "float32", "onednn", 1e-5, 1e-6, "oneDNN's vectorised activation backward: polynomial approximations (~10 ulps)"},
      {"unary", "float32", "*", 2e-6, 1e-6, "float32 libm or vector math: a few ulps"},
      {"adam_step", "float32", "*", 1e-5, 1e-6, "float32 m / (sqrt(v) / sqrt(1 - b2^t) + eps): a division by a small number amplifies ulps"},
      {"multi_tensor_step", "float32", "*", 1e-5, 1e-6, "the single-tensor formulas in float32 (Adam's division amplifies ulps)"},
      {"upsample_bwd", "float32", "*", 2e-6, 1e-6, "float32 sums of <= 9 weighted gradients per input"},
      {"adaptive_pool_fwd", "float32", "*", 2e-6, 1e-6, "a float32 mean of <= 25 inputs"},
      {"pool_fwd", "float32", "*", 2e-6, 1e-6, "a float32 mean of <= 9 inputs (max: exact)"},
  };
  return r;
}

bool match(const char* pattern, const std::string& value) { return std::strcmp(pattern, "*") == 0 || value == pattern; }

}  // namespace

Tolerance tolerance(const std::string& op, DType dtype, const std::string& backend) {
  const Row* best = nullptr;
  int best_score = -1;
  for (const Row& r : rows()) {
    if (!match(r.op, op) || !match(r.dtype, dtype_name(dtype)) || !match(r.backend, backend)) continue;
    const int score = (std::strcmp(r.op, "*") ? 4 : 0) + (std::strcmp(r.dtype, "*") ? 2 : 0) +
                      (std::strcmp(r.backend, "*") ? 1 : 0);
    if (score > best_score) best = &r, best_score = score;
  }
  if (!best) return {0, 0, "no row: exact"};
  return {best->rtol, best->atol, best->why};
}

}  // namespace kiln::oracle
