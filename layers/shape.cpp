// Upsample and padding layers: thin wrappers over engine/ops/shape.h.
//   tests: ctest --test-dir build -R pool_layers
#include "layers/shape.h"

#include <sstream>

namespace kiln {
namespace {

std::string pads_str(const std::array<int64_t, 4>& p) {
  std::ostringstream os;
  os << "(" << p[0] << ", " << p[1] << ", " << p[2] << ", " << p[3] << ")";
  return os.str();
}

std::vector<int64_t> to_vec(const std::array<int64_t, 4>& p) { return {p[0], p[1], p[2], p[3]}; }

}  // namespace

Upsample::Upsample(double scale_factor, UpsampleMode mode, bool align_corners)
    : scale_(scale_factor), mode_(mode), align_corners_(align_corners) {
  KILN_CHECK(scale_factor > 0, "Upsample: scale_factor must be positive, got ", scale_factor);
  KILN_CHECK(!align_corners || mode == UpsampleMode::bilinear,
             "Upsample: align_corners can only be set with mode bilinear");
}

Upsample::Upsample(std::array<int64_t, 2> size, UpsampleMode mode, bool align_corners)
    : size_(size), mode_(mode), align_corners_(align_corners) {
  KILN_CHECK(size[0] > 0 && size[1] > 0, "Upsample: size [", size[0], ", ", size[1], "] must be positive");
  KILN_CHECK(!align_corners || mode == UpsampleMode::bilinear,
             "Upsample: align_corners can only be set with mode bilinear");
}

Tensor Upsample::forward(const Tensor& x) {
  const CallScope scope(*this);
  if (mode_ == UpsampleMode::nearest)
    return scale_ > 0 ? ops::upsample_nearest2d(x, scale_, scale_) : ops::upsample_nearest2d(x, size_);
  return scale_ > 0 ? ops::upsample_bilinear2d(x, scale_, scale_, align_corners_)
                    : ops::upsample_bilinear2d(x, size_, align_corners_);
}

std::string Upsample::repr() const {
  std::ostringstream os;
  os << "Upsample(";
  if (scale_ > 0) os << "scale_factor=" << scale_;
  else os << "size=(" << size_[0] << ", " << size_[1] << ")";
  os << ", mode='" << (mode_ == UpsampleMode::nearest ? "nearest" : "bilinear") << "'";
  if (align_corners_) os << ", align_corners=True";
  os << ")";
  return os.str();
}

Tensor ConstantPad2d::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::pad(x, to_vec(pads_), PadMode::constant, value_);
}
std::string ConstantPad2d::repr() const {
  std::ostringstream os;
  os << "ConstantPad2d(padding=" << pads_str(pads_) << ", value=" << value_ << ")";
  return os.str();
}
std::string ZeroPad2d::repr() const { return "ZeroPad2d(padding=" + pads_str(pads_) + ")"; }

Tensor ReflectionPad2d::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::pad(x, to_vec(pads_), PadMode::reflect);
}
std::string ReflectionPad2d::repr() const { return "ReflectionPad2d(" + pads_str(pads_) + ")"; }

Tensor ReplicationPad2d::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::pad(x, to_vec(pads_), PadMode::replicate);
}
std::string ReplicationPad2d::repr() const { return "ReplicationPad2d(" + pads_str(pads_) + ")"; }

}  // namespace kiln
