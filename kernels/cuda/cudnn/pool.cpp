// cuDNN average pooling and LRN (see pool.h). Descriptors are made per call: these calls are
// memory-bound and a descriptor costs well under a microsecond next to them.
// Built with CUDA (the kernels/cuda host rule); compiled empty where cuDNN was not found.
#if defined(KILN_HAVE_CUDNN)

#include "kernels/cuda/cudnn/pool.h"

#include <string>

#include "kernels/cuda/cudnn/handles.h"
#include "kernels/cuda/cudnn/mapping.h"

// The legacy (non-graph) cuDNN API is deprecated in cuDNN 9 but is the one cuDNN 8 has.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kiln::cudnn {

namespace {

const float kOne = 1.0f, kZero = 0.0f;

struct PoolingDesc {
  cudnnPoolingDescriptor_t d = nullptr;
  PoolingDesc() { KILN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d), "cudnn pooling"); }
  ~PoolingDesc() { (void)cudnnDestroyPoolingDescriptor(d); }
  PoolingDesc(const PoolingDesc&) = delete;
  PoolingDesc& operator=(const PoolingDesc&) = delete;
};

struct LrnDescriptor {
  cudnnLRNDescriptor_t d = nullptr;
  LrnDescriptor() { KILN_CUDNN_CHECK(cudnnCreateLRNDescriptor(&d), "cudnn lrn"); }
  ~LrnDescriptor() { (void)cudnnDestroyLRNDescriptor(d); }
  LrnDescriptor(const LrnDescriptor&) = delete;
  LrnDescriptor& operator=(const LrnDescriptor&) = delete;
};

cudnnPoolingMode_t pool_mode(PoolMode m) {
  switch (m) {
    case PoolMode::max: return CUDNN_POOLING_MAX;
    case PoolMode::avg_include_pad: return CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    case PoolMode::avg_exclude_pad: return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  }
  return CUDNN_POOLING_MAX;
}

void setup_pool(const PoolDesc& d, const char* op, PoolingDesc& pd, TensorDesc& x, TensorDesc& y) {
  const char* why = pool_unsupported(d);
  KILN_CHECK(!why, "cudnn ", op, ": ", why, " (", d.str(), ")");
  const PoolShape s = pool_shape(d);
  KILN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(pd.d, pool_mode(s.mode), CUDNN_PROPAGATE_NAN, s.window[0], s.window[1],
                                               s.pad[0], s.pad[1], s.stride[0], s.stride[1]),
                   op, " ", d.str());
  x.set(DType::float32, s.x, s.nhwc);
  y.set(DType::float32, s.y, s.nhwc);
}

void setup_lrn(const LrnDesc& d, const char* op, LrnDescriptor& ld, TensorDesc& x) {
  const char* why = lrn_unsupported(d);
  KILN_CHECK(!why, "cudnn ", op, ": ", why, " (", d.str(), ")");
  const LrnParams p = lrn_params(d);
  KILN_CUDNN_CHECK(cudnnSetLRNDescriptor(ld.d, p.n, p.alpha, p.beta, p.k), op, " ", d.str());
  x.set(DType::float32, p.x, false);
}

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

// scale = k + alpha/size * sum over the channel window of src^2, as [n, c, inner]:
// sq = src * src (cudnnOpTensor), scale = k (cudnnSetTensor), then scale += the convolution of
// sq, seen as [n, 1, c, inner], with a [1, 1, size, 1] filter of alpha/size and padding size/2
// along channels (odd sizes: the window is centred, the output keeps c rows).
void lrn_scale(Context& ctx, const LrnDesc& d, const TensorDesc& x, const void* src, void* scale) {
  const std::string what = "lrn_fwd (scale) " + d.str();
  const int n = int(d.n), c = int(d.c), inner = int(d.inner), size = int(d.size);
  TensorDesc planes, filt_as_tensor;
  planes.set(DType::float32, n, 1, c, inner);
  filt_as_tensor.set(DType::float32, 1, 1, size, 1);
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnOpTensorDescriptor_t mul = nullptr;
  auto cleanup = [&] {
    if (w) (void)cudnnDestroyFilterDescriptor(w);
    if (conv) (void)cudnnDestroyConvolutionDescriptor(conv);
    if (mul) (void)cudnnDestroyOpTensorDescriptor(mul);
  };
  try {
    KILN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w), what);
    KILN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 1, size, 1), what);
    KILN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv), what);
    KILN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, size / 2, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                     CUDNN_DATA_FLOAT),
                     what);
#if CUDNN_VERSION >= 8000
    KILN_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH), what);
#endif
    KILN_CUDNN_CHECK(cudnnCreateOpTensorDescriptor(&mul), what);
    KILN_CUDNN_CHECK(cudnnSetOpTensorDescriptor(mul, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN), what);
    const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;  // no workspace on any GPU
    size_t conv_ws = 0;
    KILN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(ctx.dnn, planes.d, w, conv, planes.d, algo, &conv_ws),
                     what);
    const size_t sq_bytes = align256(size_t(d.n * d.c * d.inner) * sizeof(float));
    const size_t w_bytes = align256(size_t(size) * sizeof(float));
    char* base = static_cast<char*>(workspace(ctx, sq_bytes + w_bytes + conv_ws, true));
    void* sq = base;
    void* wei = base + sq_bytes;
    void* ws = conv_ws ? base + sq_bytes + w_bytes : nullptr;
    const float w_value = float(d.alpha / double(d.size)), k = float(d.k);
    KILN_CUDNN_CHECK(cudnnSetTensor(ctx.dnn, filt_as_tensor.d, wei, &w_value), what);
    KILN_CUDNN_CHECK(cudnnOpTensor(ctx.dnn, mul, &kOne, x.d, src, &kOne, x.d, src, &kZero, x.d, sq), what);
    KILN_CUDNN_CHECK(cudnnSetTensor(ctx.dnn, x.d, scale, &k), what);
    KILN_CUDNN_CHECK(cudnnConvolutionForward(ctx.dnn, &kOne, planes.d, sq, w, wei, conv, algo, ws, conv_ws, &kOne,
                                             planes.d, scale),
                     what);
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
}

}  // namespace

bool supports_pool(const PoolDesc& d) { return pool_unsupported(d) == nullptr; }

void pool_fwd(const PoolDesc& d, const void* src, void* dst, int64_t* index) {
  PoolingDesc pd;
  TensorDesc x, y;
  setup_pool(d, "pool_fwd", pd, x, y);
  Context& ctx = context();
  KILN_CUDNN_CHECK(cudnnPoolingForward(ctx.dnn, pd.d, &kOne, x.d, src, &kZero, y.d, dst), "pool_fwd ", d.str());
}

void pool_bwd(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src) {
  PoolingDesc pd;
  TensorDesc x, y;
  setup_pool(d, "pool_bwd", pd, x, y);
  Context& ctx = context();
  // Average pooling's gradient depends on neither x nor y; cuDNN still takes pointers for them,
  // so they name the gradient buffers (never read in the average modes).
  KILN_CUDNN_CHECK(cudnnPoolingBackward(ctx.dnn, pd.d, &kOne, y.d, diff_dst, y.d, diff_dst, x.d, diff_src, &kZero, x.d,
                                        diff_src),
                   "pool_bwd ", d.str());
}

bool supports_lrn(const LrnDesc& d) { return lrn_unsupported(d) == nullptr; }

void lrn_fwd(const LrnDesc& d, const void* src, void* dst, void* scale) {
  LrnDescriptor ld;
  TensorDesc x;
  setup_lrn(d, "lrn_fwd", ld, x);
  Context& ctx = context();
  KILN_CUDNN_CHECK(cudnnLRNCrossChannelForward(ctx.dnn, ld.d, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, x.d, src, &kZero,
                                               x.d, dst),
                   "lrn_fwd ", d.str());
  if (scale) lrn_scale(ctx, d, x, src, scale);
}

void lrn_bwd(const LrnDesc& d, const void* src, const void* dst, const void* scale, const void* diff_dst,
             void* diff_src) {
  LrnDescriptor ld;
  TensorDesc x;
  setup_lrn(d, "lrn_bwd", ld, x);
  Context& ctx = context();
  KILN_CUDNN_CHECK(cudnnLRNCrossChannelBackward(ctx.dnn, ld.d, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, x.d, dst, x.d,
                                                diff_dst, x.d, src, &kZero, x.d, diff_src),
                   "lrn_bwd ", d.str());
}

}  // namespace kiln::cudnn

#endif  // KILN_HAVE_CUDNN
