// cuDNN batch norm and softmax (see norm.h). Missing optional operands (affine=false weights,
// unwanted gradients, absent running statistics) become per-channel scratch vectors in the
// workspace, because the legacy cuDNN calls take no null pointers for most of them.
// Mixed precision: float16/bfloat16 x, y and their gradients with float32 scale, shift, running
// and saved statistics (cuDNN's derived BN type for half data; BatchNormDesc's contract), so the
// statistics accumulate in float32 inside cuDNN.
// Built with CUDA (the kernels/cuda host rule); compiled empty where cuDNN was not found.
#if defined(KILN_HAVE_CUDNN)

#include "kernels/cuda/cudnn/norm.h"

#include <string>

#include "kernels/cuda/cudnn/handles.h"
#include "kernels/cuda/cudnn/mapping.h"

// The legacy (non-graph) cuDNN API is deprecated in cuDNN 9 but is the one cuDNN 8 has.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kiln::cudnn {

namespace {

const float kOne = 1.0f, kZero = 0.0f;

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

// Per-channel scratch: ones, zeros and four spare vectors of C floats, then (if asked) an
// unwanted diff_src of N*C*S floats.
struct Scratch {
  float* ones = nullptr;
  float* zeros = nullptr;
  float* spare[4] = {};
  float* big = nullptr;
};

Scratch scratch(Context& ctx, const TensorDesc& bn, int64_t C, int64_t big_elems, const std::string& what) {
  const size_t vec = align256(size_t(C) * sizeof(float));
  char* base = static_cast<char*>(workspace(ctx, 6 * vec + size_t(big_elems) * sizeof(float), true));
  Scratch s;
  s.ones = reinterpret_cast<float*>(base);
  s.zeros = reinterpret_cast<float*>(base + vec);
  for (int i = 0; i < 4; ++i) s.spare[i] = reinterpret_cast<float*>(base + (2 + i) * vec);
  if (big_elems) s.big = reinterpret_cast<float*>(base + 6 * vec);
  KILN_CUDNN_CHECK(cudnnSetTensor(ctx.dnn, bn.d, s.ones, &kOne), what);
  KILN_CUDNN_CHECK(cudnnSetTensor(ctx.dnn, bn.d, s.zeros, &kZero), what);
  return s;
}

void check_supported(const char* why, const char* op, const BatchNormDesc& d) {
  KILN_CHECK(!why, "cudnn ", op, ": ", why, " (", d.str(), ")");
}

}  // namespace

// Half data also needs the device to run cuDNN in that type (bfloat16: sm_80, cuDNN >= 8.1).
bool supports_batch_norm_fwd(const BatchNormDesc& d) {
  return batch_norm_fwd_unsupported(d) == nullptr && (d.dtype == DType::float32 || device_supports(d.dtype));
}
bool supports_batch_norm_bwd(const BatchNormDesc& d) {
  return batch_norm_bwd_unsupported(d) == nullptr && (d.dtype == DType::float32 || device_supports(d.dtype));
}

void batch_norm_fwd(const BatchNormDesc& d, const void* src, const void* wei, const void* bias, void* running_mean,
                    void* running_var, void* dst, void* save_mean, void* save_invstd) {
  check_supported(batch_norm_fwd_unsupported(d), "batch_norm_fwd", d);
  const std::string what = "batch_norm_fwd " + d.str();
  Context& ctx = context();
  TensorDesc x, bn;
  x.set(d.dtype, int(d.N), int(d.C), int(d.S), 1, d.nhwc);
  bn.set(bn_param_dtype(d.dtype), 1, int(d.C), 1, 1);
  const Scratch s = scratch(ctx, bn, d.C, 0, what);
  const void* w = wei ? wei : s.ones;
  const void* b = bias ? bias : s.zeros;
  if (d.training) {
    // Running statistics: both or neither for cuDNN; a lone one gets a throw-away partner.
    void* rm = running_mean;
    void* rv = running_var;
    if (rm && !rv) rv = s.spare[0];
    if (rv && !rm) rm = s.spare[1];
    void* sm = save_mean ? save_mean : s.spare[2];
    void* si = save_invstd ? save_invstd : s.spare[3];
    KILN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(ctx.dnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x.d, src,
                                                            x.d, dst, bn.d, w, b, d.momentum, rm, rv, d.eps, sm, si),
                     what);
  } else {
    KILN_CHECK(running_mean && running_var, "cudnn batch_norm_fwd: eval mode needs running_mean and running_var (",
               d.str(), ")");
    KILN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(ctx.dnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x.d, src,
                                                             x.d, dst, bn.d, w, b, running_mean, running_var, d.eps),
                     what);
    if (save_mean)
      KILN_CUDNN_CUDA_CHECK(cudaMemcpyAsync(save_mean, running_mean, size_t(d.C) * sizeof(float),
                                            cudaMemcpyDeviceToDevice, ctx.stream),
                            what);
    if (save_invstd) {
      // invstd = 1/sqrt(running_var + eps) without a kernel of our own: batch norm inference of a
      // [1, C, 1, 1] input of ones with mean 0, scale 1, shift 0 is exactly that.
      KILN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(ctx.dnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, bn.d,
                                                               s.ones, bn.d, save_invstd, bn.d, s.ones, s.zeros,
                                                               s.zeros, running_var, d.eps),
                       what, " (save_invstd)");
    }
  }
  if (d.relu) {
    cudnnActivationDescriptor_t act = nullptr;
    KILN_CUDNN_CHECK(cudnnCreateActivationDescriptor(&act), what);
    cudnnStatus_t st = cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnActivationForward(ctx.dnn, act, &kOne, x.d, dst, &kZero, x.d, dst);
    (void)cudnnDestroyActivationDescriptor(act);
    KILN_CUDNN_CHECK(st, what, " (relu)");
  }
}

void batch_norm_bwd(const BatchNormDesc& d, const void* src, const void* diff_dst, const void* wei,
                    const void* save_mean, const void* save_invstd, void* diff_src, void* diff_wei, void* diff_bias) {
  check_supported(batch_norm_bwd_unsupported(d), "batch_norm_bwd", d);
  if (!diff_src && !diff_wei && !diff_bias) return;
  const std::string what = "batch_norm_bwd " + d.str();
  Context& ctx = context();
  TensorDesc x, bn;
  x.set(d.dtype, int(d.N), int(d.C), int(d.S), 1, d.nhwc);
  bn.set(bn_param_dtype(d.dtype), 1, int(d.C), 1, 1);
  const Scratch s = scratch(ctx, bn, d.C, diff_src ? 0 : d.N * d.C * d.S, what);
  const void* w = wei ? wei : s.ones;
  void* dx = diff_src ? diff_src : s.big;
  void* dw = diff_wei ? diff_wei : s.spare[0];
  void* db = diff_bias ? diff_bias : s.spare[1];
  KILN_CUDNN_CHECK(cudnnBatchNormalizationBackward(ctx.dnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x.d,
                                                   src, x.d, diff_dst, x.d, dx, bn.d, w, dw, db, d.eps, save_mean,
                                                   save_invstd),
                   what);
}

bool supports_softmax(const SoftmaxDesc& d) { return softmax_unsupported(d) == nullptr; }

void softmax_fwd(const SoftmaxDesc& d, const void* src, void* dst) {
  const char* why = softmax_unsupported(d);
  KILN_CHECK(!why, "cudnn softmax_fwd: ", why, " (", d.str(), ")");
  Context& ctx = context();
  TensorDesc x;
  x.set(DType::float32, int(d.outer), int(d.dim), int(d.inner), 1);
  KILN_CUDNN_CHECK(cudnnSoftmaxForward(ctx.dnn, d.log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                       CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, x.d, src, &kZero, x.d, dst),
                   "softmax_fwd ", d.str());
}

void softmax_bwd(const SoftmaxDesc& d, const void* dst, const void* diff_dst, void* diff_src) {
  const char* why = softmax_unsupported(d);
  KILN_CHECK(!why, "cudnn softmax_bwd: ", why, " (", d.str(), ")");
  Context& ctx = context();
  TensorDesc x;
  x.set(DType::float32, int(d.outer), int(d.dim), int(d.inner), 1);
  KILN_CUDNN_CHECK(cudnnSoftmaxBackward(ctx.dnn, d.log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                        CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, x.d, dst, x.d, diff_dst, &kZero, x.d,
                                        diff_src),
                   "softmax_bwd ", d.str());
}

}  // namespace kiln::cudnn

#endif  // KILN_HAVE_CUDNN
