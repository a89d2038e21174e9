// UNet (Ronneberger, Fischer, Brox 2015; nets.md section 6.1) with same-padded convs: the
// paper's channels, up-convolutions and skip concatenations, but no centre crop, so the output
// map is the input's size. The paper's 572 -> 388 valid-conv tiling is not reproduced; the
// parameter count is the same (padding adds none).
//   Test: ctest --test-dir build -R nets.test_inception
#include "engine/ops/shape.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/pool.h"
#include "nets/inception.h"

namespace kiln::nets {
namespace {

// 2 x (conv 3x3 pad 1, with bias + ReLU): one UNet level.
ModulePtr double_conv(int64_t in, int64_t out) {
  auto s = make<Sequential>();
  s->add("conv1", make<Conv2d>(in, out, 3, 1, 1))
      .add("relu1", make<ReLU>())
      .add("conv2", make<Conv2d>(out, out, 3, 1, 1))
      .add("relu2", make<ReLU>());
  return s;
}

}  // namespace

UNet::UNet(int64_t in_channels, int64_t classes, int64_t width, int64_t depth)
    : in_(in_channels), classes_(classes), width_(width), depth_(depth) {
  KILN_CHECK(in_channels > 0 && classes > 0 && width > 0, "unet: in_channels (", in_channels, "), classes (", classes,
             ") and width (", width, ") must be positive");
  KILN_CHECK(depth >= 1 && depth <= 10, "unet: depth must be 1..10 (down-sampling levels), got ", depth);
  // Level i has width * 2^i channels; the bottom (i = depth) the most.
  int64_t c = in_channels;
  for (int64_t i = 0; i < depth; ++i) {
    down_.push_back(register_module("down" + std::to_string(i + 1), double_conv(c, width << i)));
    c = width << i;
  }
  pool_ = register_module("pool", ModulePtr(make<MaxPool2d>(2)));
  bottom_ = register_module("bottom", double_conv(c, width << depth));
  up_.resize(depth);
  dec_.resize(depth);
  for (int64_t i = depth - 1; i >= 0; --i) {
    // The 2x2 stride-2 "up-convolution" halves the channels; the skip then restores them.
    up_[i] = register_module("up" + std::to_string(i + 1),
                             ModulePtr(make<ConvTranspose2d>(width << (i + 1), width << i, 2, 2)));
    dec_[i] = register_module("dec" + std::to_string(i + 1), double_conv(width << (i + 1), width << i));
  }
  head_ = register_module("head", ModulePtr(make<Conv2d>(width, classes, 1)));
}

Tensor UNet::forward(const Tensor& x) {
  const CallScope scope(*this);
  KILN_CHECK(x.dim() == 4 && x.size(1) == in_, "unet: expected input [N, ", in_, ", H, W], got ", shape_str(x.sizes()));
  int64_t f = int64_t(1) << depth_;
  KILN_CHECK(x.size(2) % f == 0 && x.size(3) % f == 0,
             "unet: input height and width must be divisible by 2^depth = ", f, " (depth ", depth_, "), got ",
             x.size(2), "x", x.size(3));
  std::vector<Tensor> skips;
  Tensor h = x;
  for (ModulePtr& d : down_) {
    h = (*d)(h);
    skips.push_back(h);
    h = (*pool_)(h);
  }
  h = (*bottom_)(h);
  for (int64_t i = depth_ - 1; i >= 0; --i) {
    h = (*up_[i])(h);
    h = (*dec_[i])(ops::cat({skips[i], h}, 1));  // skip first, as the paper's figure and most ports
  }
  return (*head_)(h);
}

std::string UNet::repr() const {
  return "UNet(in=" + std::to_string(in_) + ", classes=" + std::to_string(classes_) +
         ", width=" + std::to_string(width_) + ", depth=" + std::to_string(depth_) + ")";
}

}  // namespace kiln::nets
