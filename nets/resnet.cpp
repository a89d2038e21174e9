// ImageNet ResNets as torchvision builds them (v1.5: stride on the bottleneck's 3x3), with the
// BasicBlock and Bottleneck modules they are made of (nets.md §4).
//   ctest --test-dir build -R nets.test_convnets
#include <string>
#include <vector>

#include "engine/ops/elementwise.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "nets/convnets.h"

namespace kiln::nets {

namespace {

ModulePtr conv3x3(int64_t in, int64_t out, int64_t stride) {
  return make<Conv2d>(in, out, 3, stride, 1, 1, 1, /*bias=*/false);
}
ModulePtr conv1x1(int64_t in, int64_t out, int64_t stride) {
  return make<Conv2d>(in, out, 1, stride, 0, 1, 1, /*bias=*/false);
}

Conv2d& conv_of(const ModulePtr& m) { return dynamic_cast<Conv2d&>(*m); }
BatchNorm& bn_of(const ModulePtr& m) { return dynamic_cast<BatchNorm&>(*m); }

std::string block_repr(const char* kind, int64_t in, int64_t planes, int64_t stride, bool downsample) {
  return std::string(kind) + "(" + std::to_string(in) + ", " + std::to_string(planes) +
         ", stride=" + std::to_string(stride) + (downsample ? ", downsample" : "") + ")";
}

// One stage: `blocks` blocks of `planes`, the first with `stride` and, where the shape changes, a
// projection shortcut (1x1 conv + BN). Children "0", "1", ... as torchvision's layerN.
template <class Block>
ModulePtr make_stage(int64_t& in, int64_t planes, int blocks, int64_t stride) {
  auto stage = make<Sequential>();
  const int64_t out = planes * Block::kExpansion;
  ModulePtr downsample;
  if (stride != 1 || in != out) {
    auto ds = make<Sequential>();
    ds->add(conv1x1(in, out, stride)).add(make<BatchNorm2d>(out));
    downsample = ds;
  }
  stage->add(make<Block>(in, planes, stride, downsample));
  in = out;
  for (int i = 1; i < blocks; ++i) stage->add(make<Block>(in, planes));
  return stage;
}

template <class Block>
ModulePtr make_resnet(const ConvnetOptions& o, const std::vector<int>& blocks) {
  auto net = make<Sequential>();
  net->add("conv1", make<Conv2d>(o.in_channels, 64, 7, 2, 3, 1, 1, false))
      .add("bn1", make<BatchNorm2d>(64))
      .add("relu", make<ReLU>())
      .add("maxpool", make<MaxPool2d>(3, 2, 1));
  int64_t in = 64;
  const int64_t planes[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s)
    net->add("layer" + std::to_string(s + 1), make_stage<Block>(in, planes[s], blocks[size_t(s)], s == 0 ? 1 : 2));
  net->add("avgpool", make<AdaptiveAvgPool2d>(1))
      .add("flatten", make<Flatten>())
      .add("fc", make<Linear>(512 * Block::kExpansion, o.classes));
  // torchvision's ResNet.__init__: convolutions kaiming_normal_(fan_out, relu); batch norms start
  // at weight 1, bias 0 (their own default); the fc keeps Linear's default.
  net->apply([](Module& m) {
    if (auto* c = dynamic_cast<Conv2d*>(&m))
      init::kaiming_normal_(c->weight(), 0, init::FanMode::fan_out, init::Nonlinearity::relu);
  });
  return net;
}

}  // namespace

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, ModulePtr downsample)
    : in_planes_(in_planes), planes_(planes), stride_(stride) {
  KILN_CHECK(in_planes > 0 && planes > 0 && stride > 0, "BasicBlock: in_planes, planes and stride must be positive, got ",
             in_planes, ", ", planes, ", ", stride);
  conv1_ = register_module("conv1", conv3x3(in_planes, planes, stride));
  bn1_ = register_module("bn1", make<BatchNorm2d>(planes));
  relu_ = register_module("relu", make<ReLU>());
  conv2_ = register_module("conv2", conv3x3(planes, planes, 1));
  bn2_ = register_module("bn2", make<BatchNorm2d>(planes));
  if (downsample) downsample_ = register_module("downsample", downsample);
}

// In eval mode (conv_bn, layers/conv.h) each conv-bn pair is one convolution with the batch norm
// folded in, and the last one takes the shortcut add and the ReLU as post-ops; in training the
// modules run one after another.
Tensor BasicBlock::forward(const Tensor& x) {
  const CallScope scope(*this);
  const Tensor out = conv_bn(conv_of(conv1_), bn_of(bn1_), relu_.get(), x);
  const Tensor identity = downsample_ ? (*downsample_)(x) : x;
  // conv2 (3x3, stride 1, pad 1) keeps the size of `out`.
  const Shape residual = {out.size(0), planes_, out.size(2), out.size(3)};
  KILN_CHECK(identity.sizes() == residual, "BasicBlock(", in_planes_, ", ", planes_, ", stride=", stride_,
             "): the shortcut gives ", shape_str(identity.sizes()), " but the residual ", shape_str(residual),
             " (input ", shape_str(x.sizes()), "; a block that changes the shape needs a downsample)");
  return conv_bn(conv_of(conv2_), bn_of(bn2_), relu_.get(), out, identity);
}

std::string BasicBlock::repr() const { return block_repr("BasicBlock", in_planes_, planes_, stride_, bool(downsample_)); }

Bottleneck::Bottleneck(int64_t in_planes, int64_t planes, int64_t stride, ModulePtr downsample)
    : in_planes_(in_planes), planes_(planes), stride_(stride) {
  KILN_CHECK(in_planes > 0 && planes > 0 && stride > 0, "Bottleneck: in_planes, planes and stride must be positive, got ",
             in_planes, ", ", planes, ", ", stride);
  conv1_ = register_module("conv1", conv1x1(in_planes, planes, 1));
  bn1_ = register_module("bn1", make<BatchNorm2d>(planes));
  conv2_ = register_module("conv2", conv3x3(planes, planes, stride));  // v1.5: the stride is here
  bn2_ = register_module("bn2", make<BatchNorm2d>(planes));
  conv3_ = register_module("conv3", conv1x1(planes, planes * kExpansion, 1));
  bn3_ = register_module("bn3", make<BatchNorm2d>(planes * kExpansion));
  relu_ = register_module("relu", make<ReLU>());
  if (downsample) downsample_ = register_module("downsample", downsample);
}

Tensor Bottleneck::forward(const Tensor& x) {
  const CallScope scope(*this);
  Tensor out = conv_bn(conv_of(conv1_), bn_of(bn1_), relu_.get(), x);
  out = conv_bn(conv_of(conv2_), bn_of(bn2_), relu_.get(), out);
  const Tensor identity = downsample_ ? (*downsample_)(x) : x;
  // conv3 (1x1, stride 1) keeps the spatial size of `out`.
  const Shape residual = {out.size(0), planes_ * kExpansion, out.size(2), out.size(3)};
  KILN_CHECK(identity.sizes() == residual, "Bottleneck(", in_planes_, ", ", planes_, ", stride=", stride_,
             "): the shortcut gives ", shape_str(identity.sizes()), " but the residual ", shape_str(residual),
             " (input ", shape_str(x.sizes()), "; a block that changes the shape needs a downsample)");
  return conv_bn(conv_of(conv3_), bn_of(bn3_), relu_.get(), out, identity);
}

std::string Bottleneck::repr() const { return block_repr("Bottleneck", in_planes_, planes_, stride_, bool(downsample_)); }

ModulePtr resnet(int depth, const NetOptions& options) {
  // Global average pooling takes any size; every stride-2 stage keeps at least one pixel.
  const std::string name = "resnet" + std::to_string(depth);
  switch (depth) {
    case 18: return make_resnet<BasicBlock>(resolve_options(name, options, 1000, 224, 1, false), {2, 2, 2, 2});
    case 34: return make_resnet<BasicBlock>(resolve_options(name, options, 1000, 224, 1, false), {3, 4, 6, 3});
    case 50: return make_resnet<Bottleneck>(resolve_options(name, options, 1000, 224, 1, false), {3, 4, 6, 3});
    case 101: return make_resnet<Bottleneck>(resolve_options(name, options, 1000, 224, 1, false), {3, 4, 23, 3});
    case 152: return make_resnet<Bottleneck>(resolve_options(name, options, 1000, 224, 1, false), {3, 8, 36, 3});
    default: KILN_THROW("resnet: depth must be 18, 34, 50, 101 or 152, got ", depth);
  }
}

}  // namespace kiln::nets
