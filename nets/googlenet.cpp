// GoogLeNet (Inception v1) and its Inception module, as nets.md section 1.5 defines them (the
// convnet-benchmarks / tf_cnn_benchmarks layer list), with the paper's LRN and auxiliary heads
// as options.
//   Test: ctest --test-dir build -R nets.test_inception
#include "engine/ops/shape.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "nets/inception.h"

namespace kiln::nets {
namespace {

ModulePtr conv_relu(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  auto s = make<Sequential>();
  s->add("conv", make<Conv2d>(in, out, k, stride, pad)).add("relu", make<ReLU>());
  return s;
}

// The 3x3/2 max pools between stages. nets.md gives Torch's pad 1 (112 -> 56, 28 -> 14, ...);
// Caffe's pad 0 + ceil mode gives the same sizes with windows shifted by one pixel.
ModulePtr stage_pool() { return make<MaxPool2d>(3, 2, 1); }
int64_t stage_pool_out(int64_t h) { return (h + 2 - 3) / 2 + 1; }

// Stage layout (nets.md 1.5): the nine modules in order.
const InceptionConfig kModules[9] = {
    {192, 64, 96, 128, 16, 32, 32},      // 3a -> 256
    {256, 128, 128, 192, 32, 96, 64},    // 3b -> 480
    {480, 192, 96, 208, 16, 48, 64},     // 4a -> 512
    {512, 160, 112, 224, 24, 64, 64},    // 4b -> 512
    {512, 128, 128, 256, 24, 64, 64},    // 4c -> 512
    {512, 112, 144, 288, 32, 64, 64},    // 4d -> 528
    {528, 256, 160, 320, 32, 128, 128},  // 4e -> 832
    {832, 256, 160, 320, 32, 128, 128},  // 5a -> 832
    {832, 384, 192, 384, 48, 128, 128},  // 5b -> 1024
};
const char* const kModuleNames[9] = {"inception3a", "inception3b", "inception4a", "inception4b", "inception4c",
                                     "inception4d", "inception4e", "inception5a", "inception5b"};

// The paper's auxiliary classifier: avgpool 5x5/3 -> 1x1 conv 128 + ReLU -> FC 1024 + ReLU ->
// dropout 0.7 -> FC classes. `map` is the side of its input feature map (14 at 224).
ModulePtr aux_head(int64_t in, int64_t map, int64_t classes) {
  int64_t pooled = (map - 5) / 3 + 1;
  auto s = make<Sequential>();
  s->add("pool", make<AvgPool2d>(5, 3))
      .add("conv", conv_relu(in, 128, 1))
      .add("flatten", make<Flatten>())
      .add("fc1", make<Linear>(128 * pooled * pooled, 1024))
      .add("relu", make<ReLU>())
      .add("drop", make<Dropout>(0.7))
      .add("fc2", make<Linear>(1024, classes));
  return s;
}

}  // namespace

InceptionModule::InceptionModule(const InceptionConfig& c) : cfg_(c) {
  KILN_CHECK(c.in > 0 && c.c1 > 0 && c.c3_reduce > 0 && c.c3 > 0 && c.c5_reduce > 0 && c.c5 > 0 && c.pool_proj > 0,
             "InceptionModule: every channel count must be positive, got ", repr());
  auto b2 = make<Sequential>();
  b2->add("reduce", conv_relu(c.in, c.c3_reduce, 1)).add("conv", conv_relu(c.c3_reduce, c.c3, 3, 1, 1));
  auto b3 = make<Sequential>();
  b3->add("reduce", conv_relu(c.in, c.c5_reduce, 1)).add("conv", conv_relu(c.c5_reduce, c.c5, 5, 1, 2));
  auto b4 = make<Sequential>();
  b4->add("pool", make<MaxPool2d>(3, 1, 1)).add("proj", conv_relu(c.in, c.pool_proj, 1));
  branches_ = {register_module("branch1", conv_relu(c.in, c.c1, 1)), register_module("branch2", ModulePtr(b2)),
               register_module("branch3", ModulePtr(b3)), register_module("branch4", ModulePtr(b4))};
}

Tensor InceptionModule::forward(const Tensor& x) {
  const CallScope scope(*this);
  KILN_CHECK(x.dim() == 4 && x.size(1) == cfg_.in, repr(), ": expected input [N, ", cfg_.in, ", H, W], got ",
             shape_str(x.sizes()));
  std::vector<Tensor> outs;
  outs.reserve(4);
  for (ModulePtr& b : branches_) outs.push_back((*b)(x));
  return ops::cat(outs, 1);
}

std::string InceptionModule::repr() const {
  return "InceptionModule(" + std::to_string(cfg_.in) + " -> " + std::to_string(cfg_.c1) + " | " +
         std::to_string(cfg_.c3_reduce) + ">" + std::to_string(cfg_.c3) + " | " + std::to_string(cfg_.c5_reduce) + ">" +
         std::to_string(cfg_.c5) + " | pool>" + std::to_string(cfg_.pool_proj) + " = " + std::to_string(cfg_.out()) +
         ")";
}

GoogLeNet::GoogLeNet(int64_t in_channels, int64_t classes, int64_t image_size, bool lrn, bool aux) {
  KILN_CHECK(in_channels > 0 && classes > 0 && image_size > 0, "googlenet: in_channels (", in_channels, "), classes (",
             classes, ") and image_size (", image_size, ") must be positive");
  auto stem = make<Sequential>();
  stem->add("conv1", conv_relu(in_channels, 64, 7, 2, 3)).add("pool1", stage_pool());
  if (lrn) stem->add("lrn1", make<LocalResponseNorm>(5, 1e-4, 0.75, 1.0));
  stem->add("conv2_reduce", conv_relu(64, 64, 1)).add("conv2", conv_relu(64, 192, 3, 1, 1));
  if (lrn) stem->add("lrn2", make<LocalResponseNorm>(5, 1e-4, 0.75, 1.0));
  stem->add("pool2", stage_pool());
  stem_ = register_module("stem", ModulePtr(stem));

  // The 4a / 4d map side: conv1 and the two stem pools each halve (rounding up), as does pool3.
  int64_t map = image_size;
  for (int i = 0; i < 4; ++i) map = stage_pool_out(map);  // conv1 (7x7/2 pad 3) rounds the same way
  if (aux)
    KILN_CHECK(map >= 5,
               "googlenet: the auxiliary heads need a 4a feature map of at least 5x5 for their 5x5/3 "
               "average pool; image_size ",
               image_size, " gives ", map, "x", map, " (use image_size >= 65)");
  aux_map_ = aux ? map : 0;

  for (int i = 0; i < 9; ++i) {
    ModulePtr m = register_module(kModuleNames[i], ModulePtr(make<InceptionModule>(kModules[i])));
    (i < 2 ? blocks3_ : i < 7 ? blocks4_ : blocks5_).push_back(m);
    if (i == 1) pool3_ = register_module("pool3", stage_pool());
    if (i == 2 && aux) aux1_ = register_module("aux1", aux_head(kModules[2].out(), map, classes));
    if (i == 5 && aux) aux2_ = register_module("aux2", aux_head(kModules[5].out(), map, classes));
    if (i == 6) pool4_ = register_module("pool4", stage_pool());
  }
  // Global average pooling = the benchmark's 7x7/1 average pool at 224, and works at any size.
  // The benchmark's dropout 0.4 is omitted (convnet-benchmarks leaves it out); so is the ReLU that
  // the Torch and TF scripts put after the last FC: the output here are logits for a loss.
  auto head = make<Sequential>();
  head->add("pool", make<AdaptiveAvgPool2d>(1)).add("flatten", make<Flatten>()).add("fc", make<Linear>(1024, classes));
  head_ = register_module("head", ModulePtr(head));
}

Tensor GoogLeNet::forward(const Tensor& x) {
  const CallScope scope(*this);
  aux_outputs_.clear();
  bool keep_aux = aux1_ && is_training();
  Tensor h = (*stem_)(x);
  for (ModulePtr& b : blocks3_) h = (*b)(h);
  h = (*pool3_)(h);
  for (size_t i = 0; i < blocks4_.size(); ++i) {
    h = (*blocks4_[i])(h);
    if (keep_aux && (i == 0 || i == 3)) {
      KILN_CHECK(h.size(2) == aux_map_ && h.size(3) == aux_map_, "googlenet: the auxiliary heads were built for a ",
                 aux_map_, "x", aux_map_, " 4a map, but input ", shape_str(x.sizes()), " gives ", h.size(2), "x",
                 h.size(3), "; build with NetOptions.image_size = the input side");
      aux_outputs_.push_back((*(i == 0 ? aux1_ : aux2_))(h));
    }
  }
  h = (*pool4_)(h);
  for (ModulePtr& b : blocks5_) h = (*b)(h);
  return (*head_)(h);
}

}  // namespace kiln::nets
