// cuDNN activations (see activation.h). The n contiguous elements are one [1, 1, 1, n] tensor.
// Built with CUDA (the kernels/cuda host rule); compiled empty where cuDNN was not found.
#if defined(KILN_HAVE_CUDNN)

#include "kernels/cuda/cudnn/activation.h"

#include "kernels/cuda/cudnn/handles.h"
#include "kernels/cuda/cudnn/mapping.h"

// The legacy (non-graph) cuDNN API is deprecated in cuDNN 9 but is the one cuDNN 8 has.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kiln::cudnn {

namespace {

const float kOne = 1.0f, kZero = 0.0f;

cudnnActivationMode_t mode_of(ActMode m) {
  switch (m) {
    case ActMode::sigmoid: return CUDNN_ACTIVATION_SIGMOID;
    case ActMode::tanh: return CUDNN_ACTIVATION_TANH;
    default: return CUDNN_ACTIVATION_RELU;
  }
}

struct ActivationDesc {
  cudnnActivationDescriptor_t d = nullptr;
  explicit ActivationDesc(ActMode m) {
    KILN_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d), "cudnn activation");
    // NaN propagates as in kiln's functors for sigmoid/tanh; relu(NaN) is 0 there (x > 0 fails)
    // and cuDNN's max(x, 0) under NOT_PROPAGATE gives 0 too.
    const cudnnNanPropagation_t nan = m == ActMode::relu ? CUDNN_NOT_PROPAGATE_NAN : CUDNN_PROPAGATE_NAN;
    KILN_CUDNN_CHECK(cudnnSetActivationDescriptor(d, mode_of(m), nan, 0.0), "cudnn activation");
  }
  ~ActivationDesc() { (void)cudnnDestroyActivationDescriptor(d); }
  ActivationDesc(const ActivationDesc&) = delete;
  ActivationDesc& operator=(const ActivationDesc&) = delete;
};

}  // namespace

bool supports_unary(const UnaryDesc& d) { return unary_unsupported(d) == nullptr; }

void unary(const UnaryDesc& d, const void* src, void* dst) {
  const char* why = unary_unsupported(d);
  KILN_CHECK(!why, "cudnn unary: ", why, " (", d.str(), ")");
  Context& ctx = context();
  TensorDesc x;
  x.set(DType::float32, 1, 1, 1, int(d.loop.numel()));
  ActivationDesc act(act_mode(d.op));
  KILN_CUDNN_CHECK(cudnnActivationForward(ctx.dnn, act.d, &kOne, x.d, src, &kZero, x.d, dst), "unary ", d.str());
}

bool supports_binary(const BinaryDesc& d) { return binary_unsupported(d) == nullptr; }

void binary(const BinaryDesc& d, const void* a, const void* b, void* dst) {
  const char* why = binary_unsupported(d);
  KILN_CHECK(!why, "cudnn binary: ", why, " (", d.str(), ")");
  Context& ctx = context();
  TensorDesc x;
  x.set(DType::float32, 1, 1, 1, int(d.loop.numel()));
  ActivationDesc act(ActMode::relu);
  // relu's gradient mask is x > 0, the same set as relu(x) > 0: x serves as both y and x, so it
  // does not matter which of the two cuDNN reads.
  KILN_CUDNN_CHECK(cudnnActivationBackward(ctx.dnn, act.d, &kOne, x.d, b, x.d, a, x.d, b, &kZero, x.d, dst),
                   "binary ", d.str());
}

}  // namespace kiln::cudnn

#endif  // KILN_HAVE_CUDNN
