// Conv2d and ConvTranspose2d modules over ops::conv2d / ops::conv_transpose2d, and the eval-mode
// folding of a following batch norm into Conv2d.
//   Test: ctest --test-dir build -R 'layers.test_conv_layers|layers.test_fold'
#include "layers/conv.h"

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/random.h"
#include "engine/trace.h"
#include "layers/norm.h"

namespace kiln {
namespace {

void check_layer(const char* layer, int64_t in, int64_t out, ConvHW kernel, int64_t groups) {
  KILN_CHECK(in > 0 && out > 0, layer, ": channels must be positive, got in ", in, ", out ", out);
  KILN_CHECK(kernel.h > 0 && kernel.w > 0, layer, ": kernel_size ", kernel.str(), " must be positive");
  KILN_CHECK(groups > 0, layer, ": groups ", groups, " must be positive");
  KILN_CHECK(in % groups == 0, layer, ": in_channels ", in, " not divisible by groups ", groups);
  KILN_CHECK(out % groups == 0, layer, ": out_channels ", out, " not divisible by groups ", groups);
}

// PyTorch's reset_parameters: kaiming_uniform_(a=sqrt(5)) has bound gain*sqrt(3/fan_in) with
// gain = sqrt(2/(1+5)), i.e. 1/sqrt(fan_in); the bias uses the same bound. fan_in is
// weight.size(1) * kernel area for both layers (for the transposed one that is out/groups).
void init_params(Tensor& w, Tensor* b) {
  const double fan_in = double(w.size(1) * w.size(2) * w.size(3));
  const double bound = 1.0 / std::sqrt(fan_in);
  NoGradGuard ng;
  uniform_(w, -bound, bound);
  if (b) uniform_(*b, -bound, bound);
}

std::string common_repr(ConvHW kernel, ConvHW stride, ConvHW padding, ConvHW dilation, int64_t groups, bool bias) {
  std::string s = ", kernel_size=" + kernel.str() + ", stride=" + stride.str();
  if (!(padding == ConvHW(0))) s += ", padding=" + padding.str();
  if (!(dilation == ConvHW(1))) s += ", dilation=" + dilation.str();
  if (groups != 1) s += ", groups=" + std::to_string(groups);
  if (!bias) s += ", bias=False";
  return s;
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, ConvHW kernel, ConvHW stride, ConvHW padding, ConvHW dilation, int64_t groups,
               bool bias)
    : in_(in), out_(out), groups_(groups), kernel_(kernel), stride_(stride), padding_(padding), dilation_(dilation),
      has_bias_(bias) {
  check_layer("Conv2d", in, out, kernel, groups);
  Tensor w = empty({out, in / groups, kernel.h, kernel.w});
  Tensor b = bias ? empty({out}) : Tensor();
  init_params(w, bias ? &b : nullptr);
  register_parameter("weight", w);
  if (bias) register_parameter("bias", b);
}

Tensor Conv2d::bias() { return has_bias_ ? param("bias") : Tensor(); }

namespace {
// Mixed precision: a half-type input with float32 master weights convolves with half copies of
// them (their gradients flow back to the float32 masters through the conversion).
Tensor cast_like(const Tensor& t, const Tensor& x) {
  const bool mixed = t.defined() && x.dtype() != t.dtype() &&
                     (x.dtype() == DType::bfloat16 || x.dtype() == DType::float16) && t.dtype() == DType::float32;
  return mixed ? t.to(x.dtype()) : t;
}
}  // namespace

Tensor Conv2d::forward(const Tensor& x) {
  return ops::conv2d(x, cast_like(weight(), x), cast_like(bias(), x), stride_, padding_, dilation_, groups_);
}

Tensor Conv2d::forward_relu(const Tensor& x) {
  return ops::conv2d_relu(x, cast_like(weight(), x), cast_like(bias(), x), stride_, padding_, dilation_, groups_);
}

// --- batch norm folded into the convolution

namespace {

// What a folded weight was computed from: the storage (weakly: the cache must not keep replaced
// tensors alive), the element the tensor starts at and the storage's write counter.
struct Source {
  std::weak_ptr<StorageImpl> storage;
  const void* data = nullptr;
  uint64_t version = 0;
  bool defined = false;

  explicit Source(const Tensor& t) : defined(t.defined()) {
    if (!defined) return;
    storage = t.impl()->storage;
    data = t.data_ptr();
    version = t.version();
  }
  bool same(const Tensor& t) const {
    if (!t.defined() || !defined) return t.defined() == defined;
    return t.data_ptr() == data && t.version() == version && storage.lock() == t.impl()->storage;
  }
};

}  // namespace

struct Conv2d::Folded {
  const BatchNorm* bn = nullptr;
  std::vector<Source> sources;  // conv weight, conv bias, bn weight, bn bias, running mean, running var
  Tensor weight, bias;
};

namespace {
std::vector<Tensor> fold_inputs(Conv2d& conv, BatchNorm& bn) {
  return {conv.weight(), conv.bias(), bn.weight(), bn.bias(), bn.running_mean(), bn.running_var()};
}
}  // namespace

bool Conv2d::can_fold(BatchNorm& bn, const Tensor& x) {
  if (!Sequential::fusion() || trace::active() || is_training() || bn.is_training()) return false;
  if (!dynamic_cast<BatchNorm2d*>(&bn) || !bn.tracks_running_stats() || bn.num_features() != out_) return false;
  const Tensor w = weight(), b = bias(), g = bn.weight(), beta = bn.bias();
  if (autograd::needs_grad({&w, &b, &g, &beta})) return false;
  const DType t = w.dtype();
  return x.defined() && x.dtype() == t && (t == DType::float32 || t == DType::float64);
}

const Conv2d::Folded& Conv2d::folded(BatchNorm& bn) {
  const std::vector<Tensor> in = fold_inputs(*this, bn);
  if (folded_ && folded_->bn == &bn) {
    bool fresh = true;
    for (size_t i = 0; i < in.size() && fresh; ++i) fresh = folded_->sources[i].same(in[i]);
    if (fresh) return *folded_;
  }
  folded_.reset();  // the old copies go before the new ones are made
  NoGradGuard ng;
  const Tensor& w = in[0];
  // Per-channel factors on the host in double (K values each; a device's float64 support does
  // not matter), rounded once into the weights' dtype; the weights are scaled where they live.
  auto host = [](const Tensor& t) { return t.defined() ? t.detach().to_vector() : std::vector<double>(); };
  const std::vector<double> b = host(in[1]), gamma = host(in[2]), beta = host(in[3]), mean = host(in[4]),
                            var = host(in[5]);
  std::vector<double> scale(static_cast<size_t>(out_)), shift(static_cast<size_t>(out_));
  for (size_t k = 0; k < scale.size(); ++k) {
    scale[k] = (gamma.empty() ? 1.0 : gamma[k]) / std::sqrt(var[k] + bn.eps());
    shift[k] = (beta.empty() ? 0.0 : beta[k]) + ((b.empty() ? 0.0 : b[k]) - mean[k]) * scale[k];
  }
  const TensorOptions opts = TensorOptions(w.dtype()).with_device(w.device());
  auto f = std::make_shared<Folded>();
  f->bn = &bn;
  for (const Tensor& t : in) f->sources.emplace_back(t);
  f->weight = ops::mul(w.detach(), from_vector(scale, {out_, 1, 1, 1}, opts)).contiguous();
  f->bias = from_vector(shift, {out_}, opts);
  folded_ = std::move(f);
  ++fold_count_;
  return *folded_;
}

Tensor Conv2d::forward_folded(const Tensor& x, BatchNorm& bn, bool relu, const Tensor& residual) {
  const Folded& f = folded(bn);
  if (residual.defined())
    return ops::conv2d_sum(x, f.weight, f.bias, residual, stride_, padding_, dilation_, groups_, relu);
  return relu ? ops::conv2d_relu(x, f.weight, f.bias, stride_, padding_, dilation_, groups_)
              : ops::conv2d(x, f.weight, f.bias, stride_, padding_, dilation_, groups_);
}

void Conv2d::train_changed(bool training) {
  if (training) folded_.reset();  // eval-only copies of the weights: not kept while training
}

Tensor conv_bn(Conv2d& conv, BatchNorm& bn, Module* relu, const Tensor& x, const Tensor& residual) {
  if (conv.can_fold(bn, x)) {
    Tensor y = conv.call_as([&] { return conv.forward_folded(x, bn, relu != nullptr, residual); });
    y = bn.call_as([&] { return y; });  // ran inside the convolution; keeps its profile row
    return relu ? relu->call_as([&] { return y; }) : y;
  }
  if (!residual.defined()) return relu ? bn_relu(bn, *relu, conv(x)) : bn(conv(x));
  Tensor y = ops::add(bn(conv(x)), residual);
  return relu ? (*relu)(y) : y;
}

std::string Conv2d::repr() const {
  return "Conv2d(" + std::to_string(in_) + ", " + std::to_string(out_) +
         common_repr(kernel_, stride_, padding_, dilation_, groups_, has_bias_) + ")";
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, ConvHW kernel, ConvHW stride, ConvHW padding,
                                 ConvHW output_padding, int64_t groups, bool bias, ConvHW dilation)
    : in_(in), out_(out), groups_(groups), kernel_(kernel), stride_(stride), padding_(padding),
      output_padding_(output_padding), dilation_(dilation), has_bias_(bias) {
  check_layer("ConvTranspose2d", in, out, kernel, groups);
  Tensor w = empty({in, out / groups, kernel.h, kernel.w});
  Tensor b = bias ? empty({out}) : Tensor();
  init_params(w, bias ? &b : nullptr);
  register_parameter("weight", w);
  if (bias) register_parameter("bias", b);
}

Tensor ConvTranspose2d::bias() { return has_bias_ ? param("bias") : Tensor(); }

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return ops::conv_transpose2d(x, weight(), bias(), stride_, padding_, output_padding_, dilation_, groups_);
}

std::string ConvTranspose2d::repr() const {
  std::string s = "ConvTranspose2d(" + std::to_string(in_) + ", " + std::to_string(out_) +
                  common_repr(kernel_, stride_, padding_, dilation_, groups_, has_bias_);
  if (!(output_padding_ == ConvHW(0))) s += ", output_padding=" + output_padding_.str();
  return s + ")";
}

}  // namespace kiln
