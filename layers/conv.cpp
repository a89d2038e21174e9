// Conv2d and ConvTranspose2d modules over ops::conv2d / ops::conv_transpose2d.
//   Test: ctest --test-dir build -R layers.test_conv_layers
#include "layers/conv.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/random.h"

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
