// Inception v3 (nets.md section 5) with torchvision's layer names, so state-dict keys match
// torchvision's inception_v3 ("Mixed_5b.branch5x5_2.conv.weight", ...). Blocks A to E are the
// 35x35, 35->17 reduction, 17x17, 17->8 reduction and 8x8 modules.
//   Test: ctest --test-dir build -R nets.test_inception
#include "engine/ops/shape.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "nets/inception.h"

namespace kiln::nets {
namespace {

// conv (no bias: BN's beta replaces it) + BatchNorm(eps 1e-3, as TF's and torchvision's) + ReLU.
ModulePtr basic_conv(int64_t in, int64_t out, ConvHW k, ConvHW stride = 1, ConvHW pad = 0) {
  auto s = make<Sequential>();
  s->add("conv", make<Conv2d>(in, out, k, stride, pad, 1, 1, false))
      .add("bn", make<BatchNorm2d>(out, 1e-3))
      .add("relu", make<ReLU>());
  return s;
}

// A module of parallel branches (each a chain of children) whose outputs are concatenated on
// channels; a branch may fork at its end into two convs whose outputs are both kept (block E).
class Mixed : public Module {
 public:
  Mixed(std::string kind, int64_t in) : kind_(std::move(kind)), in_(in) {}
  Tensor forward(const Tensor& x) override {
    KILN_CHECK(x.dim() == 4 && x.size(1) == in_, repr(), ": expected input [N, ", in_, ", H, W], got ",
               shape_str(x.sizes()));
    std::vector<Tensor> outs;
    for (Branch& b : branches_) {
      Tensor h = x;
      for (ModulePtr& m : b.chain) h = (*m)(h);
      if (b.fork.empty()) {
        outs.push_back(h);
      } else {
        for (ModulePtr& m : b.fork) outs.push_back((*m)(h));
      }
    }
    return ops::cat(outs, 1);
  }
  std::string repr() const override { return kind_ + "(" + std::to_string(in_) + ")"; }

 protected:
  struct Branch {
    std::vector<ModulePtr> chain, fork;
  };
  // Registers `m` under `name` and appends it to branch `b` (its chain, or its fork).
  void add(size_t b, const std::string& name, ModulePtr m, bool fork = false) {
    if (branches_.size() <= b) branches_.resize(b + 1);
    (fork ? branches_[b].fork : branches_[b].chain).push_back(register_module(name, m));
  }

 private:
  std::string kind_;
  int64_t in_;
  std::vector<Branch> branches_;
};

ModulePtr avg_pool_3x3() { return make<AvgPool2d>(3, 1, 1); }  // count_include_pad, as torchvision
ModulePtr max_pool_3x3s2() { return make<MaxPool2d>(3, 2); }

// 35x35: [1x1 64] [1x1 48 -> 5x5 64] [1x1 64 -> 3x3 96 -> 3x3 96] [avgpool -> 1x1 pool_features].
struct InceptionA : Mixed {
  InceptionA(int64_t in, int64_t pool_features) : Mixed("InceptionA", in) {
    add(0, "branch1x1", basic_conv(in, 64, 1));
    add(1, "branch5x5_1", basic_conv(in, 48, 1));
    add(1, "branch5x5_2", basic_conv(48, 64, 5, 1, 2));
    add(2, "branch3x3dbl_1", basic_conv(in, 64, 1));
    add(2, "branch3x3dbl_2", basic_conv(64, 96, 3, 1, 1));
    add(2, "branch3x3dbl_3", basic_conv(96, 96, 3, 1, 1));
    add(3, "pool", avg_pool_3x3());
    add(3, "branch_pool", basic_conv(in, pool_features, 1));
  }
};

// 35 -> 17: [3x3/2 384] [1x1 64 -> 3x3 96 -> 3x3/2 96] [maxpool 3x3/2].
struct InceptionB : Mixed {
  explicit InceptionB(int64_t in) : Mixed("InceptionB", in) {
    add(0, "branch3x3", basic_conv(in, 384, 3, 2));
    add(1, "branch3x3dbl_1", basic_conv(in, 64, 1));
    add(1, "branch3x3dbl_2", basic_conv(64, 96, 3, 1, 1));
    add(1, "branch3x3dbl_3", basic_conv(96, 96, 3, 2));
    add(2, "pool", max_pool_3x3s2());
  }
};

// 17x17 with factorised 7x7s: [1x1 192] [1x1 c7 -> 1x7 c7 -> 7x1 192]
// [1x1 c7 -> 7x1 c7 -> 1x7 c7 -> 7x1 c7 -> 1x7 192] [avgpool -> 1x1 192].
struct InceptionC : Mixed {
  InceptionC(int64_t in, int64_t c7) : Mixed("InceptionC", in) {
    ConvHW k17{1, 7}, p17{0, 3}, k71{7, 1}, p71{3, 0};
    add(0, "branch1x1", basic_conv(in, 192, 1));
    add(1, "branch7x7_1", basic_conv(in, c7, 1));
    add(1, "branch7x7_2", basic_conv(c7, c7, k17, 1, p17));
    add(1, "branch7x7_3", basic_conv(c7, 192, k71, 1, p71));
    add(2, "branch7x7dbl_1", basic_conv(in, c7, 1));
    add(2, "branch7x7dbl_2", basic_conv(c7, c7, k71, 1, p71));
    add(2, "branch7x7dbl_3", basic_conv(c7, c7, k17, 1, p17));
    add(2, "branch7x7dbl_4", basic_conv(c7, c7, k71, 1, p71));
    add(2, "branch7x7dbl_5", basic_conv(c7, 192, k17, 1, p17));
    add(3, "pool", avg_pool_3x3());
    add(3, "branch_pool", basic_conv(in, 192, 1));
  }
};

// 17 -> 8: [1x1 192 -> 3x3/2 320] [1x1 192 -> 1x7 192 -> 7x1 192 -> 3x3/2 192] [maxpool 3x3/2].
struct InceptionD : Mixed {
  explicit InceptionD(int64_t in) : Mixed("InceptionD", in) {
    add(0, "branch3x3_1", basic_conv(in, 192, 1));
    add(0, "branch3x3_2", basic_conv(192, 320, 3, 2));
    add(1, "branch7x7x3_1", basic_conv(in, 192, 1));
    add(1, "branch7x7x3_2", basic_conv(192, 192, ConvHW{1, 7}, 1, ConvHW{0, 3}));
    add(1, "branch7x7x3_3", basic_conv(192, 192, ConvHW{7, 1}, 1, ConvHW{3, 0}));
    add(1, "branch7x7x3_4", basic_conv(192, 192, 3, 2));
    add(2, "pool", max_pool_3x3s2());
  }
};

// 8x8: [1x1 320] [1x1 384 -> (1x3 384 | 3x1 384)] [1x1 448 -> 3x3 384 -> (1x3 384 | 3x1 384)]
// [avgpool -> 1x1 192] = 2048 channels.
struct InceptionE : Mixed {
  explicit InceptionE(int64_t in) : Mixed("InceptionE", in) {
    ConvHW k13{1, 3}, p13{0, 1}, k31{3, 1}, p31{1, 0};
    add(0, "branch1x1", basic_conv(in, 320, 1));
    add(1, "branch3x3_1", basic_conv(in, 384, 1));
    add(1, "branch3x3_2a", basic_conv(384, 384, k13, 1, p13), true);
    add(1, "branch3x3_2b", basic_conv(384, 384, k31, 1, p31), true);
    add(2, "branch3x3dbl_1", basic_conv(in, 448, 1));
    add(2, "branch3x3dbl_2", basic_conv(448, 384, 3, 1, 1));
    add(2, "branch3x3dbl_3a", basic_conv(384, 384, k13, 1, p13), true);
    add(2, "branch3x3dbl_3b", basic_conv(384, 384, k31, 1, p31), true);
    add(3, "pool", avg_pool_3x3());
    add(3, "branch_pool", basic_conv(in, 192, 1));
  }
};

// torchvision's InceptionAux on the 17x17x768 map: avgpool 5x5/3 (-> 5x5) -> 1x1 128 ->
// 5x5 768 (-> 1x1) -> global pool -> FC classes. 3,326,696 parameters at 1000 classes.
ModulePtr inception_aux(int64_t in, int64_t classes) {
  auto s = make<Sequential>();
  s->add("pool", make<AvgPool2d>(5, 3))
      .add("conv0", basic_conv(in, 128, 1))
      .add("conv1", basic_conv(128, 768, 5))
      .add("gap", make<AdaptiveAvgPool2d>(1))
      .add("flatten", make<Flatten>())
      .add("fc", make<Linear>(768, classes));
  return s;
}

}  // namespace

// Children are registered directly on the net (not in stage Sequentials) so the state-dict keys
// are torchvision's; stem_, mixed6_, mixed7_ and head_ list them in run order.
Inception3::Inception3(int64_t in_channels, int64_t classes, bool aux) {
  KILN_CHECK(in_channels > 0 && classes > 0, "inception3: in_channels (", in_channels, ") and classes (", classes,
             ") must be positive");
  auto reg = [&](std::vector<ModulePtr>& stage, const std::string& name, ModulePtr m) {
    stage.push_back(register_module(name, m));
  };
  reg(stem_, "Conv2d_1a_3x3", basic_conv(in_channels, 32, 3, 2));
  reg(stem_, "Conv2d_2a_3x3", basic_conv(32, 32, 3));
  reg(stem_, "Conv2d_2b_3x3", basic_conv(32, 64, 3, 1, 1));
  reg(stem_, "maxpool1", max_pool_3x3s2());
  reg(stem_, "Conv2d_3b_1x1", basic_conv(64, 80, 1));
  reg(stem_, "Conv2d_4a_3x3", basic_conv(80, 192, 3));
  reg(stem_, "maxpool2", max_pool_3x3s2());
  reg(stem_, "Mixed_5b", make<InceptionA>(192, 32));
  reg(stem_, "Mixed_5c", make<InceptionA>(256, 64));
  reg(stem_, "Mixed_5d", make<InceptionA>(288, 64));
  reg(mixed6_, "Mixed_6a", make<InceptionB>(288));
  reg(mixed6_, "Mixed_6b", make<InceptionC>(768, 128));
  reg(mixed6_, "Mixed_6c", make<InceptionC>(768, 160));
  reg(mixed6_, "Mixed_6d", make<InceptionC>(768, 160));
  reg(mixed6_, "Mixed_6e", make<InceptionC>(768, 192));
  if (aux) aux_ = register_module("AuxLogits", inception_aux(768, classes));
  reg(mixed7_, "Mixed_7a", make<InceptionD>(768));
  reg(mixed7_, "Mixed_7b", make<InceptionE>(1280));
  reg(mixed7_, "Mixed_7c", make<InceptionE>(2048));
  reg(head_, "avgpool", make<AdaptiveAvgPool2d>(1));
  reg(head_, "dropout", make<Dropout>(0.5));
  reg(head_, "flatten", make<Flatten>());
  reg(head_, "fc", make<Linear>(2048, classes));
  // torchvision's Inception3 init: convolutions and linear layers trunc_normal_(std 0.1, [-2, 2]),
  // except the auxiliary head's conv1 (std 0.01) and fc (std 0.001); batch norms weight 1, bias 0.
  apply([](Module& m) {
    if (auto* c = dynamic_cast<Conv2d*>(&m)) init::trunc_normal_(c->weight(), 0, 0.1, -2, 2);
    else if (auto* l = dynamic_cast<Linear*>(&m)) init::trunc_normal_(l->weight(), 0, 0.1, -2, 2);
  });
  if (aux_) {
    for (auto& [name, p] : aux_->named_parameters()) {
      if (name == "conv1.conv.weight") init::trunc_normal_(p, 0, 0.01, -2, 2);
      if (name == "fc.weight") init::trunc_normal_(p, 0, 0.001, -2, 2);
    }
  }
}

Tensor Inception3::forward(const Tensor& x) {
  const CallScope scope(*this);
  aux_outputs_.clear();
  // 75x75 is the smallest input whose map survives the three stride-2 reductions (as torchvision).
  KILN_CHECK(x.dim() == 4 && x.size(2) >= 75 && x.size(3) >= 75,
             "inception3: expected input [N, C, H, W] with H, W "
             ">= 75, got ",
             shape_str(x.sizes()));
  auto run = [](std::vector<ModulePtr>& stage, Tensor h) {
    for (ModulePtr& m : stage) h = (*m)(h);
    return h;
  };
  Tensor h = run(mixed6_, run(stem_, x));
  if (aux_ && is_training()) {
    KILN_CHECK(h.size(2) >= 17 && h.size(3) >= 17,
               "inception3: the auxiliary head needs a 17x17 Mixed_6e map "
               "(inputs of 299x299 and up), input ",
               shape_str(x.sizes()), " gives ", h.size(2), "x", h.size(3));
    aux_outputs_.push_back((*aux_)(h));
  }
  return run(head_, run(mixed7_, h));
}

}  // namespace kiln::nets
