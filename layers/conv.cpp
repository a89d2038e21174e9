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
#include "layers/init.h"
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
// (init::kaiming_uniform_(w, sqrt(5)) draws the same, with the bound computed in more steps.)
void init_params(Tensor& w, Tensor* b) {
  const double bound = 1.0 / std::sqrt(double(init::fans(w).first));
  init::uniform_(w, -bound, bound);
  if (b) init::uniform_(*b, -bound, bound);
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

// Mixed precision: a half-type input with float32 master weights convolves with half copies of
// them (half_copy_for, layers/module.h).
Tensor Conv2d::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::conv2d(x, half_copy_for(weight(), x), half_copy_for(bias(), x), stride_, padding_, dilation_, groups_);
}

Tensor Conv2d::forward_relu(const Tensor& x) {
  return ops::conv2d_relu(x, half_copy_for(weight(), x), half_copy_for(bias(), x), stride_, padding_, dilation_,
                          groups_);
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

struct BatchNormFold::State {
  std::vector<Source> sources;  // weight, bias, gamma, beta, mean, var
  double eps = 0;
  Tensor weight, bias;
};

BatchNormFold::BatchNormFold() = default;
BatchNormFold::~BatchNormFold() = default;

std::pair<Tensor, Tensor> BatchNormFold::get(const Tensor& weight, const Tensor& bias, const Tensor& gamma,
                                             const Tensor& beta, const Tensor& mean, const Tensor& var, double eps) {
  const Tensor* in[6] = {&weight, &bias, &gamma, &beta, &mean, &var};
  if (state_ && state_->eps == eps) {
    bool fresh = true;
    for (size_t i = 0; i < 6 && fresh; ++i) fresh = state_->sources[i].same(*in[i]);
    if (fresh) return {state_->weight, state_->bias};
  }
  state_.reset();  // the old copies go before the new ones are made
  KILN_CHECK(weight.defined() && weight.dim() >= 2 && mean.defined() && var.defined(),
             "BatchNormFold: needs a weight [K, ...] and running statistics");
  const int64_t K = weight.size(0);
  for (const Tensor* t : {&bias, &gamma, &beta, &mean, &var})
    KILN_CHECK(!t->defined() || (t->dim() == 1 && t->size(0) == K), "BatchNormFold: per-channel tensor ",
               shape_str(t->sizes()), " does not match the ", K, " output channels of weight ",
               shape_str(weight.sizes()));
  NoGradGuard ng;
  // Per-channel factors on the host in double (K values each; a device's float64 support does
  // not matter), rounded once into the weights' dtype; the weights are scaled where they live.
  auto host = [](const Tensor& t) { return t.defined() ? t.detach().to_vector() : std::vector<double>(); };
  const std::vector<double> b = host(bias), g = host(gamma), be = host(beta), m = host(mean), v = host(var);
  std::vector<double> scale(static_cast<size_t>(K)), shift(static_cast<size_t>(K));
  for (size_t k = 0; k < scale.size(); ++k) {
    scale[k] = (g.empty() ? 1.0 : g[k]) / std::sqrt(v[k] + eps);
    shift[k] = (be.empty() ? 0.0 : be[k]) + ((b.empty() ? 0.0 : b[k]) - m[k]) * scale[k];
  }
  const TensorOptions opts = TensorOptions(weight.dtype()).with_device(weight.device());
  Shape sshape(size_t(weight.dim()), 1);
  sshape[0] = K;
  auto st = std::make_shared<State>();
  for (const Tensor* t : in) st->sources.emplace_back(*t);
  st->eps = eps;
  st->weight = ops::mul(weight.detach(), from_vector(scale, sshape, opts)).contiguous();
  st->bias = from_vector(shift, {K}, opts);
  state_ = std::move(st);
  ++count_;
  return {state_->weight, state_->bias};
}

void BatchNormFold::reset() { state_.reset(); }

bool Conv2d::can_fold(BatchNorm& bn, const Tensor& x) {
  if (!Sequential::fusion() || trace::active() || is_training() || bn.is_training()) return false;
  if (!dynamic_cast<BatchNorm2d*>(&bn) || !bn.tracks_running_stats() || bn.num_features() != out_) return false;
  const Tensor w = weight(), b = bias(), g = bn.weight(), beta = bn.bias();
  if (autograd::needs_grad({&w, &b, &g, &beta})) return false;
  const DType t = w.dtype();
  return x.defined() && x.dtype() == t && (t == DType::float32 || t == DType::float64);
}

Tensor Conv2d::forward_folded(const Tensor& x, BatchNorm& bn, bool relu, const Tensor& residual) {
  // A Conv2d folds one batch norm at a time: another one (rare) recomputes.
  if (folded_bn_ != &bn) fold_.reset();
  folded_bn_ = &bn;
  const auto [w, b] = fold_.get(weight(), bias(), bn.weight(), bn.bias(), bn.running_mean(), bn.running_var(), bn.eps());
  if (residual.defined()) return ops::conv2d_sum(x, w, b, residual, stride_, padding_, dilation_, groups_, relu);
  return relu ? ops::conv2d_relu(x, w, b, stride_, padding_, dilation_, groups_)
              : ops::conv2d(x, w, b, stride_, padding_, dilation_, groups_);
}

void Conv2d::train_changed(bool training) {
  if (training) fold_.reset();  // eval-only copies of the weights: not kept while training
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
  const CallScope scope(*this);
  return ops::conv_transpose2d(x, weight(), bias(), stride_, padding_, output_padding_, dilation_, groups_);
}

std::string ConvTranspose2d::repr() const {
  std::string s = "ConvTranspose2d(" + std::to_string(in_) + ", " + std::to_string(out_) +
                  common_repr(kernel_, stride_, padding_, dilation_, groups_, has_bias_);
  if (!(output_padding_ == ConvHW(0))) s += ", output_padding=" + output_padding_.str();
  return s + ")";
}

}  // namespace kiln
