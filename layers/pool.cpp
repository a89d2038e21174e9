// Pooling and LRN layers: thin wrappers over engine/ops/pool.h.
//   tests: ctest --test-dir build -R pool_layers
#include "engine/ops/norm.h"
#include "layers/pool.h"

#include <sstream>

#include "engine/ops/pool.h"

namespace kiln {
namespace {

std::string pair_str(std::array<int64_t, 2> p) {
  std::ostringstream os;
  if (p[0] == p[1]) os << p[0];
  else os << "(" << p[0] << ", " << p[1] << ")";
  return os.str();
}

}  // namespace

MaxPool2d::MaxPool2d(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                     std::array<int64_t, 2> dilation, bool ceil_mode)
    : kernel_(kernel), stride_(stride[0] == 0 && stride[1] == 0 ? kernel : stride), padding_(padding),
      dilation_(dilation), ceil_mode_(ceil_mode) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::max_pool2d(x, kernel_, stride_, padding_, dilation_, ceil_mode_);
}

std::string MaxPool2d::repr() const {
  std::ostringstream os;
  os << "MaxPool2d(kernel_size=" << pair_str(kernel_) << ", stride=" << pair_str(stride_)
     << ", padding=" << pair_str(padding_) << ", dilation=" << pair_str(dilation_)
     << ", ceil_mode=" << (ceil_mode_ ? "True" : "False") << ")";
  return os.str();
}

AvgPool2d::AvgPool2d(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                     bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override)
    : kernel_(kernel), stride_(stride[0] == 0 && stride[1] == 0 ? kernel : stride), padding_(padding),
      ceil_mode_(ceil_mode), count_include_pad_(count_include_pad), divisor_override_(divisor_override) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::avg_pool2d(x, kernel_, stride_, padding_, ceil_mode_, count_include_pad_, divisor_override_);
}

std::string AvgPool2d::repr() const {
  std::ostringstream os;
  os << "AvgPool2d(kernel_size=" << pair_str(kernel_) << ", stride=" << pair_str(stride_)
     << ", padding=" << pair_str(padding_);
  if (ceil_mode_) os << ", ceil_mode=True";
  if (!count_include_pad_) os << ", count_include_pad=False";
  if (divisor_override_) os << ", divisor_override=" << *divisor_override_;
  os << ")";
  return os.str();
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::adaptive_avg_pool2d(x, size_);
}
std::string AdaptiveAvgPool2d::repr() const { return "AdaptiveAvgPool2d(output_size=" + pair_str(size_) + ")"; }

Tensor AdaptiveMaxPool2d::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::adaptive_max_pool2d(x, size_);
}
std::string AdaptiveMaxPool2d::repr() const { return "AdaptiveMaxPool2d(output_size=" + pair_str(size_) + ")"; }

Tensor LocalResponseNorm::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::local_response_norm(x, size_, alpha_, beta_, k_);
}

std::string LocalResponseNorm::repr() const {
  std::ostringstream os;
  os << "LocalResponseNorm(" << size_ << ", alpha=" << alpha_ << ", beta=" << beta_ << ", k=" << k_ << ")";
  return os.str();
}

}  // namespace kiln
