// VGG-11/13/16/19 without batch norm, as torchvision builds them (nets.md §1.4, §3).
//   ctest --test-dir build -R nets.test_convnets
#include <vector>

#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "nets/convnets.h"

namespace kiln::nets {

namespace {

// Output channels of the 3x3 convs in order; 0 marks a 2x2 max-pool (torchvision's "M").
std::vector<int64_t> vgg_config(int depth) {
  switch (depth) {
    case 11: return {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
    case 13: return {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
    case 16: return {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
    case 19:
      return {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0};
    default: KILN_THROW("vgg: depth must be 11, 13, 16 or 19, got ", depth);
  }
}

}  // namespace

ModulePtr vgg(int depth, const NetOptions& options) {
  std::vector<int64_t> cfg = vgg_config(depth);
  // Five 2x2 pools: 32 is the smallest side that leaves a 1x1 map.
  ConvnetOptions o = resolve_options("vgg" + std::to_string(depth), options, 1000, 224, 32, false);
  auto features = make<Sequential>();
  int64_t in = o.in_channels;
  for (int64_t c : cfg) {
    if (c == 0) {
      features->add(make<MaxPool2d>(2, 2));
    } else {
      features->add(make<Conv2d>(in, c, 3, 1, 1)).add(make<ReLU>());
      in = c;
    }
  }
  auto classifier = make<Sequential>();
  classifier->add(make<Linear>(512 * 7 * 7, 4096))
      .add(make<ReLU>())
      .add(make<Dropout>(0.5))
      .add(make<Linear>(4096, 4096))
      .add(make<ReLU>())
      .add(make<Dropout>(0.5))
      .add(make<Linear>(4096, o.classes));
  auto net = make<Sequential>();
  net->add("features", features)
      .add("avgpool", make<AdaptiveAvgPool2d>(7))
      .add("flatten", make<Flatten>())
      .add("classifier", classifier);
  // torchvision's VGG._initialize_weights: convolutions kaiming_normal_(fan_out, relu) with zero
  // bias, linear layers N(0, 0.01) with zero bias.
  net->apply([](Module& m) {
    if (auto* c = dynamic_cast<Conv2d*>(&m)) {
      init::kaiming_normal_(c->weight(), 0, init::FanMode::fan_out, init::Nonlinearity::relu);
      init::zeros_(c->bias());
    } else if (auto* l = dynamic_cast<Linear*>(&m)) {
      init::normal_(l->weight(), 0, 0.01);
      init::zeros_(l->bias());
    }
  });
  return net;
}

}  // namespace kiln::nets
