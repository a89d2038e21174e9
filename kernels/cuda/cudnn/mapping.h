// The pure logic of the cudnn backend: how kiln's descriptors become cuBLAS and cuDNN parameters,
// and which descriptors the libraries express exactly. No CUDA header here, so it is unit-tested
// on machines without a GPU: tests/kernels/test_cudnn_mapping.cpp (ctest -R cudnn_mapping).
// Every `*_unsupported` returns nullptr when the backend serves the descriptor, else the reason
// (the dispatcher then falls back to kiln's own CUDA kernels).
#pragma once

#include <cstdint>

#include "kernels/common/conv.h"
#include "kernels/common/elementwise.h"
#include "kernels/common/gemm.h"
#include "kernels/common/norm.h"
#include "kernels/common/pool.h"

namespace kiln::cudnn {

// cuBLAS is column-major: a row-major X with leading dimension ld is the column-major X^T with the
// same ld. kiln's C = op(A) op(B) (row-major) is therefore C^T = op(B)^T op(A)^T in cuBLAS's
// terms: the operands swap, m and n swap, each keeps its own transpose flag and ld.
struct BlasGemm {
  bool trans_a = false, trans_b = false;  // of cuBLAS's first and second operand
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch items
  int64_t batch = 1;
  // cuBLAS's first operand is kiln's B and its second kiln's A (always true; spelled out so the
  // caller passes pointers in the order the mapping means).
  bool first_is_b = true;
};
BlasGemm to_column_major(const GemmDesc& d);
const char* gemm_unsupported(const GemmDesc& d);

// A convolution as cuDNN describes it: 4-d tensors with dims in N, C, H, W order and a layout
// flag (NHWC memory when nhwc), the KCRS filter with C/groups input channels.
struct ConvShape {
  int x[4] = {}, w[4] = {}, y[4] = {};
  int pad[2] = {}, stride[2] = {}, dilation[2] = {};
  int groups = 1;
  bool nhwc = false;
};
ConvShape conv_shape(const ConvDesc& d);
// Dtypes: float32, float16, bfloat16. Output size must be the one cuDNN derives from symmetric
// padding; every extent within int32.
const char* conv_unsupported(const ConvDesc& d);

// The types of one convolution as the cudnn backend runs it. kiln's half convolutions carry a
// float32 bias and want a float32 bias gradient (ConvDesc's contract), while cuDNN's fused and
// add-tensor calls take a bias of the data's own type: the backend converts the bias to the data
// type in workspace (bias_compute) before adding it. The bias gradient is summed in float32
// straight into the float32 gradient (by cuDNN, or kiln's own CUDA reduction where cuDNN
// declines: conv.cpp).
struct ConvTypes {
  DType data = DType::float32;          // x, w, y and their gradients
  DType compute = DType::float32;       // the convolution descriptor's accumulation type
  DType bias = DType::float32;          // kiln's bias and bias gradient
  DType bias_compute = DType::float32;  // the bias as cuDNN adds it
  bool tensor_ops = false;              // tensor-core math requested for this data type
  bool bias_cast() const { return bias != bias_compute; }
};
// allow_tf32: whether float32 may use TF32 tensor cores (the backend's option).
ConvTypes conv_types(DType data, bool allow_tf32);

// cuDNN's cudnnMathType_t values (stable across cuDNN 7..9), named for reports and tests:
// 0 DEFAULT, 1 TENSOR_OP, 2 TENSOR_OP_ALLOW_CONVERSION, 3 FMA.
const char* math_type_name(int math);
// Whether an algorithm reported with this math type may run on tensor cores.
inline bool math_uses_tensor_cores(int math) { return math == 1 || math == 2; }

// Pooling: cuDNN's window, padding, stride and mode.
enum class PoolMode : uint8_t { max, avg_include_pad, avg_exclude_pad };
struct PoolShape {
  PoolMode mode = PoolMode::max;
  int window[2] = {}, pad[2] = {}, stride[2] = {};
  int x[4] = {}, y[4] = {};  // N, C, H, W
  bool nhwc = false;
};
PoolShape pool_shape(const PoolDesc& d);
// Average pooling only: max pooling must write kiln's int64 argmax index, which cuDNN does not
// give (its backward recomputes the argmax from x and y, which kiln's pool_bwd does not receive).
const char* pool_unsupported(const PoolDesc& d);

// LRN across channels: cuDNN's lrnN, alpha, beta, k. cuDNN divides alpha by the window as kiln
// does, and its window is [i - (n-1)/2, i + (n-1)/2]: kiln's [i - size/2, i + (size-1)/2] for odd
// sizes only.
struct LrnParams {
  unsigned n = 5;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
  int x[4] = {};  // N, C, H = inner, W = 1
};
LrnParams lrn_params(const LrnDesc& d);
const char* lrn_unsupported(const LrnDesc& d);

// Softmax over the middle axis of [outer, dim, inner]: cuDNN's CHANNEL mode on N=outer, C=dim,
// H=inner, W=1.
const char* softmax_unsupported(const SoftmaxDesc& d);
// Batch norm, spatial mode on N, C, H = S, W = 1 (NHWC memory with nhwc); float32, or float16 /
// bfloat16 data with float32 scale, shift and statistics (cuDNN's derived BN type for half data:
// bn_param_dtype). Backward in eval mode (no differentiation through the statistics) has no
// cuDNN call.
DType bn_param_dtype(DType data);
const char* batch_norm_fwd_unsupported(const BatchNormDesc& d);
const char* batch_norm_bwd_unsupported(const BatchNormDesc& d);

// Activations: relu, sigmoid, tanh forward; relu backward (from the input); float32, contiguous.
enum class ActMode : uint8_t { none, relu, sigmoid, tanh };
ActMode act_mode(UnaryOp op);
const char* unary_unsupported(const UnaryDesc& d);
const char* binary_unsupported(const BinaryDesc& d);

inline bool fits_int32(int64_t v) { return v >= 0 && v <= int64_t(2147483647); }

}  // namespace kiln::cudnn
