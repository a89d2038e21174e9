// Every tolerance of the oracle, one row per (op, dtype, backend) with the reason. A comparison
// passes when |got - oracle| <= atol + rtol * |oracle| for every element (a NaN never passes);
// integer outputs (indices, masks) must match exactly. The row used is the most specific match
// (op over dtype over backend; "*" matches anything). The oracle is ref in float64 on inputs
// already rounded through the dtype under test, so a row accounts only for the arithmetic of
// the candidate: its rounding, its summation order, its approximations.
//
// Each reason says where its bound comes from: "exact" (data movement), a rounding model (one or
// two roundings of the result: half an ulp is 2^-24 in float32, 2^-9 in bfloat16, 2^-12 in
// float16, relative), or "measured": the worst |got - oracle| / (1 + |oracle|) over every problem,
// element and backend of 30 draws of the inputs (tests/oracle/measure_tolerances.sh 30 with
// build/tests/kiln_tests_oracle and kiln_tests_oracle_emu: ref, native, onednn on the CPU and
// kiln's CUDA kernels under the emulator), then a margin of 3x or more. cuDNN's and cuBLAS's errors
// are measured on a GPU (tools/gpu-check runs oracle_cuda with these rows); where they may differ
// from the CPU's (their own algorithms and split sums) the margin is 5-10x. A backend-specific
// reason is a row of that backend only.
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
      {"*", "float64", "*", 1e-12, 1e-12, "float64 against float64: only the order of operations differs; measured worst 3.7e-14 (reduce, native)"},
      {"*", "float32", "*", 2e-6, 2e-6, "float32 elementwise math and short weighted sums (upsampling's taps, pooling windows, padding's gradient): measured worst 6.0e-7 (upsample_fwd), 3x"},
      {"*", "bfloat16", "*", 4e-3, 4e-3, "a bfloat16 result after float32 math: half an ulp is 2^-9 = 2.0e-3 relative, measured worst 1.6e-3 (pool_bwd's sums); one ulp allowed"},
      {"*", "float16", "*", 2e-3, 2e-3, "a float16 result after float32 math: half an ulp is 2^-12 = 2.4e-4 relative; measured worst 8.6e-4 (softmax_fwd, emu), 2.3x"},
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
      {"scatter", "float32", "*", 1e-6, 1e-6, "copies, or sums of <= 7 values in index order: measured worst 1.3e-7, 7x"},
      {"scatter", "bfloat16", "*", 3e-2, 3e-2, "scatter_add rounds every partial sum to bfloat16 (<= 7 adds in index order): half-ulps of the partial sums, which cancellation can make large against the result; measured worst 1.0e-2, 3x"},
      {"scatter", "float16", "*", 3e-3, 3e-3, "scatter_add rounds every partial sum to float16 (<= 7 adds): measured worst 9.0e-4, 3.3x"},
      {"cumsum", "float32", "*", 5e-6, 5e-6, "running float32 sums, a rounding per step: measured worst 8.9e-7, 5.6x"},
      {"dropout_fwd", "float32", "*", 2e-7, 0, "x * 1/(1-p): one float32 rounding of the scale and one of the product (2 x 2^-24); measured worst 6.0e-8"},
      // Random fills: the same Philox bits as ref (counter-based: element i uses counter offset + i/4).
      {"random", "float32", "*", 2e-7, 2e-7, "a + (b - a) u and Box-Muller (double, rounded once to float: kernels/common/philox.h) on the same draws; one float32 rounding of the result"},
      {"random", "bfloat16", "*", 0, 0, "the same draw rounded once to bfloat16"},
      {"random", "float64", "native", 6e-8, 1e-12, "native (CPU and CUDA) narrows every draw through float, ref keeps a + b * draw in double: one float rounding (2^-24)"},
      {"random", "float64", "emu", 6e-8, 1e-12, "the CUDA kernel under the emulator: native's float draws (one float rounding, 2^-24)"},
      // Sums of K products of inputs in [-1, 1): float32 accumulation in the kernel's blocking order
      // (native GEMM's 6x16 tiles, oneDNN's, cuBLAS's split-K).
      {"gemm", "float32", "*", 1e-5, 1e-5, "float32 accumulation in the kernel's blocking order: measured worst 1.6e-6 (oneDNN, native), 6x for cuBLAS's"},
      {"linear_fwd", "float32", "*", 1e-5, 1e-5, "float32 accumulation over ic <= 129 terms (GEMM blocking order): measured worst 1.0e-6 (ref), 10x for cuBLAS's"},
      {"linear_bwd_data", "float32", "*", 5e-6, 5e-6, "float32 accumulation over oc terms: measured worst 3.6e-7 (ref), 14x for cuBLAS's"},
      {"linear_bwd_weights", "float32", "*", 5e-6, 5e-6, "float32 accumulation over the batch and the bias sum: measured worst 3.3e-7 (ref), 15x for cuBLAS's"},
      {"conv2d_fwd", "float32", "*", 2e-5, 2e-5, "float32 accumulation over C/g * R * S <= 144 products (im2col + GEMM order): measured worst 2.8e-6 (ref; native and oneDNN 2.6e-6), 7x for cuDNN's algorithms"},
      {"conv2d_bwd_data", "float32", "*", 2e-5, 2e-5, "float32 accumulation over K/g * R * S products: measured worst 3.4e-6 (oneDNN), 6x for cuDNN's algorithms"},
      {"conv2d_bwd_weights", "float32", "*", 2e-5, 2e-5, "float32 accumulation over N * P * Q <= 242 products per weight: measured worst 3.0e-6 (oneDNN), 7x for cuDNN's algorithms"},
      {"conv2d_fwd", "bfloat16", "*", 2e-2, 2e-2, "bfloat16 products accumulated in float32, the result rounded to bfloat16: measured worst 2.9e-3 (native, oneDNN), 7x for cuDNN's"},
      {"conv2d_bwd_data", "bfloat16", "*", 5e-3, 5e-3, "bfloat16 products accumulated in float32, the result rounded to bfloat16: measured worst 8.5e-4 (oneDNN), 6x"},
      {"conv2d_bwd_weights", "bfloat16", "*", 4e-3, 4e-3, "float32 sums of bfloat16 products, the weight gradient rounded once (the bias's float32): measured worst 2.4e-7; one bfloat16 ulp allowed"},
      {"reduce", "float32", "*", 5e-5, 5e-5, "float32 sums of up to 4,097 terms in [-1, 1): the partial sums grow to ~sqrt(n) and round there, far above a cancelled result; measured worst 1.4e-5 (native's lanes; ref's running sum 1.2e-5), 3.5x"},
      {"sum", "float32", "*", 2e-6, 2e-6, "float32 sum of <= 4 inputs: measured worst 4.0e-7, 5x"},
      {"sum_squares", "float32", "*", 1e-12, 1e-12, "squares accumulated in double from float32 inputs (exact products): measured worst 2.2e-15"},
      {"multi_tensor_sum_squares", "float32", "*", 1e-12, 1e-12, "squares accumulated in double from float32 inputs: measured worst 1.4e-15"},
      // Normalisations: a mean and a variance over the batch, an exp and a log-sum-exp.
      {"batch_norm_fwd", "float32", "*", 5e-6, 5e-6, "float32 mean and variance over N * S elements, then 1/sqrt: measured worst 4.0e-7, 12x for cuDNN's"},
      {"batch_norm_bwd", "float32", "*", 1e-5, 1e-5, "two float32 reductions over N * S and their combination: measured worst 2.4e-6 (ref), 4x"},
      {"batch_norm_fwd", "bfloat16", "*", 4e-3, 4e-3, "bfloat16 activations, float32 statistics, the result rounded once: measured worst 4.5e-4 (oneDNN); one bfloat16 ulp"},
      {"batch_norm_bwd", "bfloat16", "*", 4e-3, 4e-3, "bfloat16 activations and gradients, float32 reductions, rounded once: measured worst 1.5e-6 (oneDNN); one bfloat16 ulp"},
      {"softmax_fwd", "float32", "*", 2e-6, 2e-6, "float32 exp and a sum over dim <= 1,000 terms: measured worst 2.6e-7, 8x for cuDNN's"},
      {"softmax_bwd", "float32", "*", 2e-6, 2e-6, "a float32 dot product over dim, then products: measured worst 2.6e-7 (ref), 8x"},
      {"softmax_fwd", "float32", "onednn", 1e-5, 1e-5,
       "oneDNN's vector exp and log (polynomials) and its summation order: log_softmax values near 0; measured "
       "worst 3.3e-6 (-0.0651709 vs -0.0651738 at [3,5,7] on oneDNN 3.7), 3x"},
      {"lrn_fwd", "float32", "*", 1e-6, 1e-6, "float32 window sums of squares and pow(scale, -beta): measured worst 1.1e-7 (native), 9x"},
      {"lrn_bwd", "float32", "*", 1e-6, 1e-6, "float32 window sums of products and pow: measured worst 1.1e-7 (native; oneDNN 1.0e-7), 9x"},
      {"cross_entropy_fwd", "float32", "*", 2e-6, 2e-6, "float32 log-sum-exp over C and the mean over N * S: measured worst 3.1e-7 (ref), 6.5x"},
      {"cross_entropy_bwd", "float32", "*", 1e-6, 1e-6, "float32 exp(x - lse) times the gradient: measured worst 7.2e-8, 14x"},
      {"nll_fwd", "float32", "*", 1e-6, 1e-6, "a float32 sum over <= 30 targets: measured worst 1.2e-7, 8x"},
      {"point_loss_fwd", "float32", "*", 2e-6, 2e-6, "float32 log1p/exp per element and a sum over n <= 40: measured worst 2.4e-7, 8x"},
      {"point_loss_bwd", "float32", "*", 1e-6, 1e-6, "float32 sigmoid per element: measured worst 1.2e-7, 8x"},
      {"unary", "float32", "onednn", 1e-6, 1e-6, "oneDNN's vectorised tanh, logistic and erf are polynomial approximations: measured worst 1.6e-7, 6x"},
      {"binary", "float32", "onednn", 1e-6, 1e-6, "oneDNN's vectorised activation backward (polynomial approximations): measured worst 2.3e-7, 4x"},
      {"unary", "float32", "*", 1e-6, 1e-6, "float32 libm or vector math: a few ulps; measured worst 7.9e-8, 12x"},
      {"adam_step", "float32", "*", 5e-7, 5e-7, "float32 m / (sqrt(v) / sqrt(1 - b2^t) + eps): measured worst 6.0e-8, 8x (a division by a small number amplifies ulps)"},
      {"multi_tensor_step", "float32", "*", 5e-7, 5e-7, "the single-tensor formulas in float32: measured worst 6.0e-8, 8x"},
      {"upsample_bwd", "float32", "*", 3e-6, 3e-6, "float32 sums of <= 9 weighted gradients per input: measured worst 8.5e-7 (native), 3.5x"},
      {"adaptive_pool_fwd", "float32", "*", 1e-6, 1e-6, "a float32 mean of <= 25 inputs: measured worst 6.4e-8, 15x"},
      {"pool_fwd", "float32", "*", 1e-6, 1e-6, "a float32 mean of <= 9 inputs (max: exact): measured worst 7.8e-8, 13x"},
      // Recurrent layers in half types: the hidden state is stored in the half type after every
      // step (and read back by the next), so roundings accumulate over the sequence.
      {"rnn_fwd", "bfloat16", "*", 1.6e-2, 1.6e-2, "oneDNN: bfloat16 hidden state rounded every step, float32 gates and cell state: measured worst 5.2e-3 (one ulp of 2.1), 3x"},
      {"rnn_bwd", "bfloat16", "*", 6.5e-2, 6.5e-2, "oneDNN: float32 gradients from bfloat16 gates, states and weights (its bfloat16 GEMMs), sums of T * N such terms: measured worst 2.1e-2 (rnn_tanh weight gradients), 3x"},
      {"rnn_fwd", "float16", "cudnn", 5e-3, 5e-3, "cuDNN: float16 states rounded every step, float32 math: estimated from oneDNN's bfloat16 (8x its ulp, 3x its error for the float16 cell state), to be measured by oracle_cuda on a GPU"},
      {"rnn_bwd", "float16", "cudnn", 2e-2, 2e-2, "cuDNN: float16 gradients, states and weights, float32 math: estimated from oneDNN's bfloat16 (8x its ulp, 8x its error for gradients kept in float16), to be measured by oracle_cuda on a GPU"},
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
