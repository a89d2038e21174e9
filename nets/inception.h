// The Inception family and the UNet of the model zoo: GoogLeNet (Inception v1), Inception v3 and
// Ronneberger's UNet, layer by layer as their papers define them (Szegedy et al., "Going deeper
// with convolutions", 2015; "Rethinking the Inception architecture", 2016; Ronneberger et al.,
// "U-Net", 2015), with torchvision's layout where it has the net.
// Registered in the zoo as "googlenet", "inception3", "unet" (nets/inception_zoo.cpp).
//   Test: ctest --test-dir build -R nets.test_inception
//   Bench: build/tools/kiln bench --model googlenet,inception3 --batch 8
#pragma once

#include <array>
#include <vector>

#include "layers/module.h"
#include "nets/zoo.h"

namespace kiln::nets {

// One Inception (v1) module: four branches on the same input, concatenated on channels —
// [1x1] | [1x1 reduce -> 3x3 pad 1] | [1x1 reduce -> 5x5 pad 2] | [maxpool 3x3 s1 p1 -> 1x1 proj],
// every convolution (with bias) followed by ReLU. Output channels c1 + c3 + c5 + pool_proj.
struct InceptionConfig {
  int64_t in, c1, c3_reduce, c3, c5_reduce, c5, pool_proj;
  int64_t out() const { return c1 + c3 + c5 + pool_proj; }
};

class InceptionModule : public Module {
 public:
  explicit InceptionModule(const InceptionConfig& cfg);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;
  const InceptionConfig& config() const { return cfg_; }

 private:
  InceptionConfig cfg_;
  std::array<ModulePtr, 4> branches_;
};

// GoogLeNet (Szegedy et al. 2014) as convnet-benchmarks / tf_cnn_benchmarks time it: no LRN, no
// auxiliary heads, no dropout, a linear 1024 -> classes head after global average pooling (7x7 at
// 224; global so smaller inputs work). 6,998,552 parameters at 1000 classes.
//   lrn: the paper's LocalResponseNorm(5, 1e-4, 0.75) after pool1 and after conv2 (no parameters).
//   aux: the paper's two auxiliary heads after 4a and 4d (avgpool 5x5/3 -> 1x1 conv 128 + ReLU ->
//        FC 128*s*s -> 1024 + ReLU -> dropout 0.7 -> FC 1024 -> classes; s = 4 at 224). In training
//        mode forward() keeps their logits in aux_outputs() (aux1, aux2) for the loss; in eval they
//        are not computed and aux_outputs() is empty. forward() returns the main logits.
class GoogLeNet : public Module {
 public:
  GoogLeNet(int64_t in_channels, int64_t classes, int64_t image_size, bool lrn, bool aux);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "GoogLeNet"; }
  // Logits of the auxiliary heads from the last training-mode forward (empty otherwise).
  const std::vector<Tensor>& aux_outputs() const { return aux_outputs_; }

 private:
  int64_t aux_map_ = 0;  // side of the 4a / 4d feature map the aux heads were sized for
  ModulePtr stem_, pool3_, pool4_, head_;
  std::vector<ModulePtr> blocks3_, blocks4_, blocks5_;
  ModulePtr aux1_, aux2_;
  std::vector<Tensor> aux_outputs_;
};

// Inception v3 (Szegedy et al. 2015) as torchvision's inception_v3(aux_logits=False) builds it:
// every conv = conv (no bias) + BatchNorm(eps 1e-3, gamma and beta) + ReLU; 23,834,568
// parameters at 1000 classes (nets.md 3; beta-only BN as in tf_cnn_benchmarks gives 23,819,401
// trainable at 1001 classes, Keras 23,817,352 at 1000). Global average pooling at the end, so
// inputs of 75x75 and up work.
//   aux: torchvision's auxiliary head on Mixed_6e (avgpool 5x5/3 -> conv 1x1 128 -> conv 5x5 768
//        -> global pool -> FC 768 -> classes), 27,161,264 parameters in all; kept in
//        aux_outputs() in training mode, as GoogLeNet does. Its 5x5 conv needs the Mixed_6e map at
//        17x17 or more, i.e. inputs of 299x299 and up.
class Inception3 : public Module {
 public:
  Inception3(int64_t in_channels, int64_t classes, bool aux);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "Inception3"; }
  const std::vector<Tensor>& aux_outputs() const { return aux_outputs_; }

 private:
  std::vector<ModulePtr> stem_, mixed6_, mixed7_, head_;  // run order; registered on this module
  ModulePtr aux_;
  std::vector<Tensor> aux_outputs_;
};

// UNet (Ronneberger et al. 2015) with same-padded 3x3 convs so the output is H x W like the
// input: `depth` levels of [2 x (conv 3x3 + ReLU)] then maxpool 2, a bottom of 2 convs at
// width * 2^depth channels, then per level a 2x2 stride-2 transposed conv halving the channels,
// concatenation with the encoder map (skip first) and 2 convs; a final 1x1 conv to `classes`
// logit maps (no sigmoid / softmax: pair with BCE-with-logits or cross-entropy).
// width 64, depth 4, 1 input channel, 2 classes: 31,030,658 parameters, the paper's count (convs
// with bias, no batch norm; the popular milesial/Pytorch-UNet adds BN and drops conv biases:
// 31,036,546 for 1 -> 2 channels).
// H and W must be divisible by 2^depth.
class UNet : public Module {
 public:
  UNet(int64_t in_channels, int64_t classes, int64_t width, int64_t depth);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t in_, classes_, width_, depth_;
  std::vector<ModulePtr> down_, up_, dec_;
  ModulePtr pool_, bottom_, head_;
};

// Builders from zoo options (0 = default). Options that do not apply to a net (UNet width on
// GoogLeNet, ...) and invalid values throw kiln::Error naming the net and the option.
//   googlenet:  classes 1000, in_channels 3, image_size 224; lrn, aux.
//   inception3: classes 1000, in_channels 3, image_size 299; aux.
//   unet:       classes 2, in_channels 1, image_size 128, width 64, depth 4. The RAMP astro
//               galaxy-deblending task (128x128 single-channel blends, one binary mask) is
//               classes = 1: 31,030,593 parameters, trained with BCE-with-logits.
ModulePtr googlenet(const NetOptions& options = {});
ModulePtr inception3(const NetOptions& options = {});
ModulePtr unet(const NetOptions& options = {});

}  // namespace kiln::nets
