// The classic image-classification convnets of the 2016-2019 HPC benchmarks (convnet-benchmarks,
// tf_cnn_benchmarks, torchvision, the Keras examples), layer by layer as their papers and
// reference implementations define them: AlexNet-OWT, OverFeat-fast, VGG-11/16/19, ResNet-18/50/101
// (torchvision v1.5), the CIFAR-10 ResNet-56 (option-A shortcuts) and the Keras CIFAR-10 CNN.
// Module and parameter names follow torchvision ("features.0.weight", "layer1.0.downsample.1.bias")
// so state dicts line up with PyTorch's.
//   ctest --test-dir build -R nets.test_convnets
//   build/tools/kiln bench --model alexnet,resnet50,vgg11 --batch 16
#pragma once

#include "engine/ops/dropout.h"
#include "layers/module.h"
#include "nets/zoo.h"

namespace kiln::nets {

// Every builder reads NetOptions as follows (0 = the net's published default):
//   classes      outputs of the last Linear (default 1000 for ImageNet nets, 10 for CIFAR ones);
//   in_channels  input channels of the first conv (default 3);
//   image_size   square input side. Nets with adaptive/global pooling (alexnet, vgg, resnet,
//                resnet56) accept any size large enough to survive their strides and only check
//                it; overfeat (231) and cifar10-cnn (32) have flatten sizes fixed by their input
//                and accept only the default.
// width, depth, lrn and aux do not apply to these nets; setting them, a negative value, or an
// image size the net cannot take throws kiln::Error naming the net and the option.

// AlexNet "one weird trick" (Krizhevsky 2014; convnet-benchmarks alexnet.lua = torchvision
// alexnet): conv 64-192-384-256-256, max-pools 3x3/2, adaptive avg-pool to 6x6, classifier
// dropout(0.5) fc6 relu dropout(0.5) fc7 relu fc8, as torchvision (convnet-benchmarks timed it
// without dropout). 224x224, 61,100,840 parameters. Children: features, avgpool, flatten,
// classifier. Needs image_size >= 63.
ModulePtr alexnet(const NetOptions& options = {});

// OverFeat "fast" (Sermanet et al. 2013; convnet-benchmarks overfeat.lua): conv 96-256-512-1024-1024,
// max-pools 2x2/2, fc 36864-3072-4096-1000 with dropout(0.5) before fc6 and fc7 (the paper and
// tf_cnn_benchmarks; convnet-benchmarks' Torch version had none). 231x231 only, 145,920,872
// parameters. Children: features, flatten, classifier.
ModulePtr overfeat(const NetOptions& options = {});

// VGG (Simonyan & Zisserman 2014) as torchvision's vgg11/16/19 without batch norm: 3x3 convs,
// 2x2 max-pools, adaptive avg-pool 7x7, fc 25088-4096-4096-classes with ReLU and dropout(0.5)
// after fc6 and fc7. depth 11 (config A), 13 (B), 16 (D) or 19 (E). Needs image_size >= 32.
ModulePtr vgg(int depth, const NetOptions& options = {});

// ResNet (He et al. 2015) as torchvision's resnet18/34/50/101/152, "v1.5": the stride of a
// downsampling bottleneck is on its 3x3 conv. Convs without bias, BatchNorm2d after each,
// projection shortcut (1x1 conv + BN) where the shape changes, global average pool, fc.
// Children: conv1, bn1, relu, maxpool, layer1..layer4, avgpool, flatten, fc.
ModulePtr resnet(int depth, const NetOptions& options = {});

// The CIFAR-10 ResNet of He et al. 2015 §4.2, depth 6n+2 (20, 32, 44, 56, 110, ...): conv 3x3 16
// + BN + ReLU, three stages of n basic blocks (16/32/64 channels, stride 2 at the start of stages
// 2 and 3), option-A shortcuts (identity; where the shape changes, stride-2 subsampling and
// zero channels, no parameters), global average pool, fc. ResNet-56: 853,018 parameters.
ModulePtr cifar_resnet(int depth, const NetOptions& options = {});

// The Keras examples/cifar10_cnn.py net (the PRACE "simple CNN, 12 layers"): conv32 same, conv32
// valid, maxpool 2, dropout 0.25, conv64 same, conv64 valid, maxpool 2, dropout 0.25, flatten,
// dense 512, dropout 0.5, dense 10, ReLU after each conv and the first dense. 32x32 only,
// 1,250,858 parameters.
ModulePtr cifar10_cnn(const NetOptions& options = {});

// NetOptions with the defaults filled in, after the checks above. min_size: the smallest image
// side the net survives; fixed_size: only default_size works (the flatten size depends on it).
struct ConvnetOptions {
  int64_t classes, in_channels, image_size;
};
ConvnetOptions resolve_options(const std::string& net, const NetOptions& options, int64_t default_classes,
                               int64_t default_size, int64_t min_size, bool fixed_size);

// torchvision's BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), 3x3 convs, the
// first with `stride`. `downsample` (may be null: identity) maps x to the block's output shape.
class BasicBlock : public Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride = 1, ModulePtr downsample = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t in_planes_, planes_, stride_;
  ModulePtr conv1_, bn1_, relu_, conv2_, bn2_, downsample_;
};

// torchvision's Bottleneck (v1.5): 1x1 planes, 3x3 planes with `stride`, 1x1 4*planes, BN after
// each, ReLU after the first two and after the residual add. In eval with no gradient wanted,
// both blocks run each conv-bn pair as one convolution with the batch norm folded in, the last
// one taking the shortcut add and ReLU as post-ops (conv_bn, layers/conv.h; KILN_FUSE=0: off).
class Bottleneck : public Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in_planes, int64_t planes, int64_t stride = 1, ModulePtr downsample = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t in_planes_, planes_, stride_;
  ModulePtr conv1_, bn1_, conv2_, bn2_, conv3_, bn3_, relu_, downsample_;
};

// Option-A shortcut (no parameters): x[:, :, ::stride, ::stride] with `extra` zero channels,
// half before and half after the input's channels (as akamaster/pytorch_resnet_cifar10 pads).
class PadShortcut : public Module {
 public:
  PadShortcut(int64_t stride, int64_t extra_channels);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t stride_, extra_;
};

}  // namespace kiln::nets
