// AlexNet-OWT and OverFeat-fast, the two "ImageNet winners" of convnet-benchmarks with large
// fully connected heads (nets.md §1.2, §1.3). Shapes per layer are checked by
//   ctest --test-dir build -R nets.test_convnets
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "nets/convnets.h"

namespace kiln::nets {

ModulePtr alexnet(const NetOptions& options) {
  // 63 is the smallest side whose feature maps survive the three 3x3/2 max-pools (15, 7, 3, 1).
  ConvnetOptions o = resolve_options("alexnet", options, 1000, 224, 63, false);
  auto features = make<Sequential>();
  features->add(make<Conv2d>(o.in_channels, 64, 11, 4, 2))  // 224 -> 55
      .add(make<ReLU>())
      .add(make<MaxPool2d>(3, 2))                            // -> 27
      .add(make<Conv2d>(64, 192, 5, 1, 2))
      .add(make<ReLU>())
      .add(make<MaxPool2d>(3, 2))                            // -> 13
      .add(make<Conv2d>(192, 384, 3, 1, 1))
      .add(make<ReLU>())
      .add(make<Conv2d>(384, 256, 3, 1, 1))
      .add(make<ReLU>())
      .add(make<Conv2d>(256, 256, 3, 1, 1))
      .add(make<ReLU>())
      .add(make<MaxPool2d>(3, 2));                           // -> 6
  auto classifier = make<Sequential>();
  classifier->add(make<Dropout>(0.5))
      .add(make<Linear>(256 * 6 * 6, 4096))
      .add(make<ReLU>())
      .add(make<Dropout>(0.5))
      .add(make<Linear>(4096, 4096))
      .add(make<ReLU>())
      .add(make<Linear>(4096, o.classes));
  auto net = make<Sequential>();
  // The 6x6 adaptive pool is the identity at 224 and lets other input sizes reach fc6 (torchvision).
  net->add("features", features)
      .add("avgpool", make<AdaptiveAvgPool2d>(6))
      .add("flatten", make<Flatten>())
      .add("classifier", classifier);
  return net;
}

ModulePtr overfeat(const NetOptions& options) {
  // No adaptive pool in OverFeat: fc6 takes exactly the 1024x6x6 maps of a 231x231 input.
  ConvnetOptions o = resolve_options("overfeat", options, 1000, 231, 231, true);
  auto features = make<Sequential>();
  features->add(make<Conv2d>(o.in_channels, 96, 11, 4))  // 231 -> 56
      .add(make<ReLU>())
      .add(make<MaxPool2d>(2, 2))                         // -> 28
      .add(make<Conv2d>(96, 256, 5))                      // -> 24
      .add(make<ReLU>())
      .add(make<MaxPool2d>(2, 2))                         // -> 12
      .add(make<Conv2d>(256, 512, 3, 1, 1))
      .add(make<ReLU>())
      .add(make<Conv2d>(512, 1024, 3, 1, 1))
      .add(make<ReLU>())
      .add(make<Conv2d>(1024, 1024, 3, 1, 1))
      .add(make<ReLU>())
      .add(make<MaxPool2d>(2, 2));                        // -> 6
  auto classifier = make<Sequential>();
  classifier->add(make<Dropout>(0.5))
      .add(make<Linear>(1024 * 6 * 6, 3072))
      .add(make<ReLU>())
      .add(make<Dropout>(0.5))
      .add(make<Linear>(3072, 4096))
      .add(make<ReLU>())
      .add(make<Linear>(4096, o.classes));
  auto net = make<Sequential>();
  net->add("features", features).add("flatten", make<Flatten>()).add("classifier", classifier);
  return net;
}

}  // namespace kiln::nets
