// Descriptor -> cuBLAS/cuDNN parameter mapping and the exactness checks (see mapping.h).
// CPU-only logic: tests/kernels/test_cudnn_mapping.cpp.
#include "kernels/cuda/cudnn/mapping.h"

#include <algorithm>

namespace kiln::cudnn {

namespace {
}  // namespace

BlasGemm to_column_major(const GemmDesc& d) {
  BlasGemm g;
  g.trans_a = d.trans_b;
  g.trans_b = d.trans_a;
  g.m = d.n;
  g.n = d.m;
  g.k = d.k;
  g.lda = d.ldb;
  g.ldb = d.lda;
  g.ldc = d.ldc;
  g.stride_a = d.stride_b;
  g.stride_b = d.stride_a;
  g.stride_c = d.stride_c;
  g.batch = d.batch;
  return g;
}

const char* gemm_unsupported(const GemmDesc& d) {
  if (d.dtype != DType::float32 && !is_half(d.dtype)) return "dtype not float32/float16/bfloat16";
  if (d.m < 0 || d.n < 0 || d.k < 0 || d.batch < 0) return "negative extent";
  const BlasGemm g = to_column_major(d);
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch})
    if (!fits_int32(v)) return "extent or leading dimension beyond int32";
  // cuBLAS rejects leading dimensions below the stored rows (column-major) even where they
  // would never be used; kiln's own kernels take those.
  const int64_t rows_a = g.trans_a ? g.k : g.m, rows_b = g.trans_b ? g.n : g.k;
  if (g.lda < std::max<int64_t>(1, rows_a) || g.ldb < std::max<int64_t>(1, rows_b) ||
      g.ldc < std::max<int64_t>(1, g.m))
    return "leading dimension smaller than cuBLAS allows";
  if (d.batch > 1 && d.stride_c == 0) return "batched output with stride 0";
  if (d.stride_a < 0 || d.stride_b < 0 || d.stride_c < 0) return "negative batch stride";
  return nullptr;
}

ConvShape conv_shape(const ConvDesc& d) {
  ConvShape s;
  const int64_t x[4] = {d.N, d.C, d.H, d.W}, w[4] = {d.K, d.C / std::max<int64_t>(d.groups, 1), d.R, d.S},
                y[4] = {d.N, d.K, d.P, d.Q};
  for (int i = 0; i < 4; ++i) {
    s.x[i] = int(x[i]);
    s.w[i] = int(w[i]);
    s.y[i] = int(y[i]);
  }
  s.pad[0] = int(d.pad_h);
  s.pad[1] = int(d.pad_w);
  s.stride[0] = int(d.stride_h);
  s.stride[1] = int(d.stride_w);
  s.dilation[0] = int(d.dilation_h);
  s.dilation[1] = int(d.dilation_w);
  s.groups = int(d.groups);
  s.nhwc = d.nhwc;
  return s;
}

const char* conv_unsupported(const ConvDesc& d) {
  if (d.dtype != DType::float32 && !is_half(d.dtype)) return "dtype not float32/float16/bfloat16";
  if (d.N <= 0 || d.C <= 0 || d.H <= 0 || d.W <= 0 || d.K <= 0 || d.R <= 0 || d.S <= 0 || d.P <= 0 || d.Q <= 0)
    return "empty extent";
  if (d.groups <= 0 || d.C % d.groups || d.K % d.groups) return "channels not divisible by groups";
  if (d.stride_h <= 0 || d.stride_w <= 0 || d.dilation_h <= 0 || d.dilation_w <= 0) return "stride or dilation < 1";
  if (d.pad_h < 0 || d.pad_w < 0) return "negative padding";
  // The residual post-op (ConvDesc::sum) is not mapped to cuDNN's alpha2/z operand yet: the op
  // layer runs conv, add and ReLU separately.
  if (d.sum) return "sum post-op (residual add) not implemented";
  // cuDNN derives the output size from symmetric padding and rejects any other; kiln's
  // descriptor may imply a different bottom/right padding.
  if (d.P != conv_output_size(d.H, d.R, d.stride_h, d.pad_h, d.dilation_h) ||
      d.Q != conv_output_size(d.W, d.S, d.stride_w, d.pad_w, d.dilation_w))
    return "output size not the symmetric-padding one";
  // Legacy cuDNN tensors address with int32.
  for (int64_t v : {d.src_elems(), d.dst_elems(), d.wei_elems(), d.pad_h, d.pad_w, d.stride_h, d.stride_w,
                    d.dilation_h, d.dilation_w})
    if (!fits_int32(v)) return "tensor beyond int32 elements";
  return nullptr;
}

ConvTypes conv_types(DType data, bool allow_tf32) {
  ConvTypes t;
  t.data = data;
  // Half data accumulates in float32 (cuDNN's PSEUDO_HALF configuration, not TRUE_HALF): the
  // products of two halves are exact in float32 and long sums keep their low bits.
  t.compute = data == DType::float64 ? DType::float64 : DType::float32;
  t.bias = data == DType::float64 ? DType::float64 : DType::float32;
  t.bias_compute = is_half(data) ? data : t.bias;
  t.tensor_ops = is_half(data) || (data == DType::float32 && allow_tf32);
  return t;
}

const char* math_type_name(int math) {
  switch (math) {
    case 0: return "CUDNN_DEFAULT_MATH";
    case 1: return "CUDNN_TENSOR_OP_MATH";
    case 2: return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case 3: return "CUDNN_FMA_MATH";
    default: return "unknown math type";
  }
}

DType bn_param_dtype(DType data) { return data == DType::float64 ? DType::float64 : DType::float32; }

PoolShape pool_shape(const PoolDesc& d) {
  PoolShape s;
  s.mode = d.alg == PoolAlg::max ? PoolMode::max
                                 : (d.count_include_pad ? PoolMode::avg_include_pad : PoolMode::avg_exclude_pad);
  s.window[0] = int(d.kh);
  s.window[1] = int(d.kw);
  s.pad[0] = int(d.ph);
  s.pad[1] = int(d.pw);
  s.stride[0] = int(d.sh);
  s.stride[1] = int(d.sw);
  const int64_t x[4] = {d.n, d.c, d.ih, d.iw}, y[4] = {d.n, d.c, d.oh, d.ow};
  for (int i = 0; i < 4; ++i) {
    s.x[i] = int(x[i]);
    s.y[i] = int(y[i]);
  }
  s.nhwc = d.nhwc;
  return s;
}

const char* pool_unsupported(const PoolDesc& d) {
  if (d.dtype != DType::float32) return "dtype not float32";
  if (d.alg != PoolAlg::avg) return "max pooling: cuDNN gives no int64 argmax index";
  if (d.divisor_override > 0) return "divisor_override";
  if (d.dh != 1 || d.dw != 1) return "dilated pooling";
  if (d.n <= 0 || d.c <= 0 || d.ih <= 0 || d.iw <= 0 || d.oh <= 0 || d.ow <= 0) return "empty extent";
  if (d.kh <= 0 || d.kw <= 0 || d.sh <= 0 || d.sw <= 0 || d.ph < 0 || d.pw < 0) return "bad window";
  // cuDNN's windows are the floor-mode ones; a ceil-mode extra window (clipped divisor in
  // PyTorch) is not expressible. Padding must stay inside the window.
  if (d.oh != (d.ih + 2 * d.ph - d.kh) / d.sh + 1 || d.ow != (d.iw + 2 * d.pw - d.kw) / d.sw + 1)
    return "output size not cuDNN's floor-mode one";
  if (d.ph >= d.kh || d.pw >= d.kw) return "padding not smaller than the window";
  for (int64_t v : {d.n * d.c * d.ih * d.iw, d.kh, d.kw, d.sh, d.sw})
    if (!fits_int32(v)) return "tensor beyond int32 elements";
  return nullptr;
}

LrnParams lrn_params(const LrnDesc& d) {
  LrnParams p;
  p.n = unsigned(d.size);
  p.alpha = d.alpha;
  p.beta = d.beta;
  p.k = d.k;
  p.x[0] = int(d.n);
  p.x[1] = int(d.c);
  p.x[2] = int(d.inner);
  p.x[3] = 1;
  return p;
}

const char* lrn_unsupported(const LrnDesc& d) {
  if (d.dtype != DType::float32) return "dtype not float32";
  if (d.size < 1 || d.size > 16) return "window outside cuDNN's 1..16";
  if (d.size % 2 == 0) return "even window (cuDNN centres it differently)";
  if (d.k < 1e-5) return "k below cuDNN's minimum 1e-5";
  if (d.beta < 0.01) return "beta below cuDNN's minimum 0.01";
  if (d.n <= 0 || d.c <= 0 || d.inner <= 0) return "empty extent";
  if (!fits_int32(d.n * d.c * d.inner)) return "tensor beyond int32 elements";
  return nullptr;
}

const char* softmax_unsupported(const SoftmaxDesc& d) {
  if (d.dtype != DType::float32) return "dtype not float32";
  if (d.outer <= 0 || d.dim <= 0 || d.inner <= 0) return "empty extent";
  if (!fits_int32(d.outer * d.dim * d.inner)) return "tensor beyond int32 elements";
  return nullptr;
}

const char* batch_norm_fwd_unsupported(const BatchNormDesc& d) {
  if (d.dtype != DType::float32 && !is_half(d.dtype)) return "dtype not float32/float16/bfloat16";
  if (d.N <= 0 || d.C <= 0 || d.S <= 0) return "empty extent";
  if (!fits_int32(d.N * d.C * d.S)) return "tensor beyond int32 elements";
  if (d.eps < 1e-5) return "eps below 1e-5 (cuDNN 8's minimum)";
  if (d.training && d.N * d.S < 2) return "one value per channel";
  return nullptr;
}

const char* batch_norm_bwd_unsupported(const BatchNormDesc& d) {
  if (!d.training) return "eval-mode backward (cuDNN differentiates through batch statistics)";
  return batch_norm_fwd_unsupported(d);
}

ActMode act_mode(UnaryOp op) {
  switch (op) {
    case UnaryOp::relu: return ActMode::relu;
    case UnaryOp::sigmoid: return ActMode::sigmoid;
    case UnaryOp::tanh: return ActMode::tanh;
    default: return ActMode::none;
  }
}

const char* unary_unsupported(const UnaryDesc& d) {
  if (d.dtype != DType::float32) return "dtype not float32";
  if (act_mode(d.op) == ActMode::none) return "not relu/sigmoid/tanh";
  if (!d.loop.contiguous()) return "strided operands";
  if (d.loop.numel() <= 0 || !fits_int32(d.loop.numel())) return "empty or beyond int32 elements";
  return nullptr;
}

const char* binary_unsupported(const BinaryDesc& d) {
  if (d.dtype != DType::float32) return "dtype not float32";
  if (d.op != BinaryOp::relu_bwd) return "not relu_bwd";
  if (!d.loop.contiguous()) return "strided or broadcast operands";
  if (d.loop.numel() <= 0 || !fits_int32(d.loop.numel())) return "empty or beyond int32 elements";
  return nullptr;
}

}  // namespace kiln::cudnn
