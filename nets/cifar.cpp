// The CIFAR-10 nets: He et al.'s ResNet-(6n+2) with option-A shortcuts (nets.md §4) and the
// Keras cifar10_cnn.py example (nets.md §7.1).
//   ctest --test-dir build -R nets.test_convnets
#include <string>

#include "engine/ops/shape.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "nets/convnets.h"

namespace kiln::nets {

PadShortcut::PadShortcut(int64_t stride, int64_t extra_channels) : stride_(stride), extra_(extra_channels) {
  KILN_CHECK(stride > 0 && extra_channels >= 0, "PadShortcut: stride must be positive and extra channels >= 0, got ",
             stride, " and ", extra_channels);
}

Tensor PadShortcut::forward(const Tensor& x) {
  const CallScope scope(*this);
  KILN_CHECK(x.dim() == 4, "PadShortcut: expected an NCHW input, got ", shape_str(x.sizes()));
  // A strided view: the 1x1 stride-2 subsampling of the paper, ceil(H/2) rows as the 3x3/2 conv
  // of the residual branch gives.
  Tensor y = stride_ == 1 ? x : x.slice(2, 0, x.size(2), stride_).slice(3, 0, x.size(3), stride_);
  if (extra_ == 0) return y;
  // ops::pad pads only the last two dims, so the zero channels are concatenated instead.
  const int64_t before = extra_ / 2;
  Shape s = y.sizes();
  TensorOptions opts = TensorOptions(x.dtype()).with_device(x.device());
  s[1] = before;
  Tensor z0 = zeros(s, opts);
  s[1] = extra_ - before;
  Tensor z1 = zeros(s, opts);
  return ops::cat({z0, y, z1}, 1);
}

std::string PadShortcut::repr() const {
  return "PadShortcut(stride=" + std::to_string(stride_) + ", extra=" + std::to_string(extra_) + ")";
}

ModulePtr cifar_resnet(int depth, const NetOptions& options) {
  KILN_CHECK(depth >= 8 && (depth - 2) % 6 == 0, "cifar_resnet: depth must be 6n+2 with n >= 1 (20, 32, 44, 56, 110), got ",
             depth);
  const int n = (depth - 2) / 6;
  ConvnetOptions o = resolve_options("resnet" + std::to_string(depth), options, 10, 32, 1, false);
  auto net = make<Sequential>();
  net->add("conv1", make<Conv2d>(o.in_channels, 16, 3, 1, 1, 1, 1, false))
      .add("bn1", make<BatchNorm2d>(16))
      .add("relu", make<ReLU>());
  int64_t in = 16;
  const int64_t planes[3] = {16, 32, 64};
  for (int s = 0; s < 3; ++s) {
    auto stage = make<Sequential>();
    const int64_t stride = s == 0 ? 1 : 2;
    ModulePtr shortcut;
    if (stride != 1 || in != planes[s]) shortcut = make<PadShortcut>(stride, planes[s] - in);
    stage->add(make<BasicBlock>(in, planes[s], stride, shortcut));
    in = planes[s];
    for (int i = 1; i < n; ++i) stage->add(make<BasicBlock>(in, planes[s]));
    net->add("layer" + std::to_string(s + 1), stage);
  }
  net->add("avgpool", make<AdaptiveAvgPool2d>(1)).add("flatten", make<Flatten>()).add("fc", make<Linear>(64, o.classes));
  return net;
}

ModulePtr cifar10_cnn(const NetOptions& options) {
  // The flatten size (64 x 6 x 6) is fixed by the 32x32 input.
  ConvnetOptions o = resolve_options("cifar10-cnn", options, 10, 32, 32, true);
  auto net = make<Sequential>();
  net->add("conv1", make<Conv2d>(o.in_channels, 32, 3, 1, 1))  // Keras 'same': 32x32
      .add("relu1", make<ReLU>())
      .add("conv2", make<Conv2d>(32, 32, 3))                    // 'valid': 30x30
      .add("relu2", make<ReLU>())
      .add("pool1", make<MaxPool2d>(2))                         // 15x15
      .add("drop1", make<Dropout>(0.25))
      .add("conv3", make<Conv2d>(32, 64, 3, 1, 1))
      .add("relu3", make<ReLU>())
      .add("conv4", make<Conv2d>(64, 64, 3))                    // 13x13
      .add("relu4", make<ReLU>())
      .add("pool2", make<MaxPool2d>(2))                         // 6x6
      .add("drop2", make<Dropout>(0.25))
      .add("flatten", make<Flatten>())
      .add("fc1", make<Linear>(64 * 6 * 6, 512))
      .add("relu5", make<ReLU>())
      .add("drop3", make<Dropout>(0.5))
      .add("fc2", make<Linear>(512, o.classes));
  return net;
}

}  // namespace kiln::nets
