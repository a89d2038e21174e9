// Registers the classic convnets (alexnet, overfeat, vgg11/16/19, resnet18/50/101, resnet56,
// cifar10-cnn) in the zoo, and the option checks their builders share.
//   ctest --test-dir build -R nets.test_convnets
//   build/tools/kiln info     (lists the models)
#include "nets/convnets.h"

namespace kiln::nets {

ConvnetOptions resolve_options(const std::string& net, const NetOptions& o, int64_t default_classes,
                               int64_t default_size, int64_t min_size, bool fixed_size) {
  KILN_CHECK(o.width == 0, net, ": option width (", o.width, ") does not apply to this net");
  KILN_CHECK(o.depth == 0, net, ": option depth (", o.depth, ") does not apply to this net");
  KILN_CHECK(!o.lrn, net, ": option lrn does not apply to this net (no LRN layers)");
  KILN_CHECK(!o.aux, net, ": option aux does not apply to this net (no auxiliary heads)");
  KILN_CHECK(o.classes >= 0, net, ": classes must be positive, got ", o.classes);
  KILN_CHECK(o.in_channels >= 0, net, ": in_channels must be positive, got ", o.in_channels);
  KILN_CHECK(o.image_size >= 0, net, ": image_size must be positive, got ", o.image_size);
  ConvnetOptions r{o.classes ? o.classes : default_classes, o.in_channels ? o.in_channels : 3,
                   o.image_size ? o.image_size : default_size};
  if (fixed_size)
    KILN_CHECK(r.image_size == default_size, net, ": image_size ", r.image_size, " is not supported: the net has no ",
               "adaptive pooling and its first fully connected layer fixes the input at ", default_size, "x",
               default_size);
  else
    KILN_CHECK(r.image_size >= min_size, net, ": image_size ", r.image_size, " is too small (the strides and pools ",
               "need at least ", min_size, "x", min_size, ")");
  return r;
}

void register_convnets_nets(std::vector<NetInfo>& zoo) {
  zoo.push_back({"alexnet",
                 "AlexNet one-weird-trick (convnet-benchmarks = torchvision): conv 64-192-384-256-256, adaptive "
                 "avg-pool 6x6, torchvision's classifier dropouts (convnet-benchmarks ran without)",
                 {3, 224, 224}, 1000, 61100840, [](const NetOptions& o) { return alexnet(o); }});
  zoo.push_back({"overfeat",
                 "OverFeat fast (convnet-benchmarks): conv 96-256-512-1024-1024, fc 3072-4096, dropout before fc6/fc7 "
                 "as the paper; 231x231 only",
                 {3, 231, 231}, 1000, 145920872, [](const NetOptions& o) { return overfeat(o); }});
  zoo.push_back({"vgg11", "VGG-11 (model A, convnet-benchmarks vgg_a), torchvision layout, no batch norm",
                 {3, 224, 224}, 1000, 132863336, [](const NetOptions& o) { return vgg(11, o); }});
  zoo.push_back({"vgg16", "VGG-16 (model D), torchvision layout, no batch norm", {3, 224, 224}, 1000, 138357544,
                 [](const NetOptions& o) { return vgg(16, o); }});
  zoo.push_back({"vgg19", "VGG-19 (model E), torchvision layout, no batch norm", {3, 224, 224}, 1000, 143667240,
                 [](const NetOptions& o) { return vgg(19, o); }});
  zoo.push_back({"resnet18", "ResNet-18, torchvision (basic blocks, batch norm)", {3, 224, 224}, 1000, 11689512,
                 [](const NetOptions& o) { return resnet(18, o); }});
  zoo.push_back({"resnet50", "ResNet-50 v1.5, torchvision (stride on the bottleneck's 3x3)", {3, 224, 224}, 1000,
                 25557032, [](const NetOptions& o) { return resnet(50, o); }});
  zoo.push_back({"resnet101", "ResNet-101 v1.5, torchvision (stride on the bottleneck's 3x3)", {3, 224, 224}, 1000,
                 44549160, [](const NetOptions& o) { return resnet(101, o); }});
  zoo.push_back({"resnet56", "ResNet-56 for CIFAR-10 (He et al. 2015), option-A shortcuts (zero-padded identity)",
                 {3, 32, 32}, 10, 853018, [](const NetOptions& o) { return cifar_resnet(56, o); }});
  zoo.push_back({"cifar10-cnn", "Keras cifar10_cnn.py example (the PRACE 12-layer simple CNN)", {3, 32, 32}, 10,
                 1250858, [](const NetOptions& o) { return cifar10_cnn(o); }});
}

}  // namespace kiln::nets
