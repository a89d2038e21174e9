// Eval-mode batch norm folded into the convolution before it (Conv2d::forward_folded, conv_bn):
// the folded forward equals the modules run one after another for Conv+BN, Conv+BN+ReLU, and
// ResNet's BasicBlock and Bottleneck with and without a downsample (the last conv of a block with
// the residual add and ReLU as post-ops), on the ref, native and oneDNN backends, NCHW and
// channels-last; training runs exactly as with fusion off (no folding, the same outputs,
// gradients and running statistics); the folded weights are cached and recomputed after
// load_state_dict, an optimizer step, a training forward between eval ones, and a dtype change;
// no folding with KILN_FUSE off, while gradients are wanted, or while an op recorder traces.
//   ctest --test-dir build -R layers.test_fold
#include "tests/support/testing.h"

#include <algorithm>
#include <cmath>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/optim.h"
#include "engine/random.h"
#include "engine/graph_op.h"
#include "engine/trace.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "nets/convnets.h"

using namespace kiln;

namespace {

std::vector<std::string> cpu_backends() {
  std::vector<std::string> v = {"ref", "native"};
  if (op_table<kernel_op::conv2d_fwd>().has("onednn", DeviceType::cpu)) v.push_back("onednn");
  return v;
}

// Restores fusion on at scope exit (a failed check must not leave it off for later cases).
struct FusionGuard {
  ~FusionGuard() { Sequential::set_fusion(true); }
};

// Batch norms that are not the identity: gamma, beta and running statistics drawn away from
// their initial values (var in [0.5, 2)), so a wrong fold shows.
void randomize_bn(Module& m, uint64_t seed) {
  NoGradGuard ng;
  Generator gen(seed);
  for (auto& [n, t] : m.named_parameters())
    if (t.dim() == 1) uniform_(t, -1, 1, &gen);
  for (auto& [n, t] : m.named_buffers()) {
    if (n.size() >= 11 && n.compare(n.size() - 11, 11, "running_var") == 0) uniform_(t, 0.5, 2, &gen);
    if (n.size() >= 12 && n.compare(n.size() - 12, 12, "running_mean") == 0) uniform_(t, -1, 1, &gen);
  }
}

Tensor eval_forward(Module& net, const Tensor& x, bool fuse) {
  Sequential::set_fusion(fuse);
  NoGradGuard ng;
  Tensor y = net(x);
  Sequential::set_fusion(true);
  return y;
}

// Every Conv2d of a module tree.
void convs_of(Module& m, std::vector<Conv2d*>& out) {
  if (auto* c = dynamic_cast<Conv2d*>(&m)) out.push_back(c);
  for (auto& [n, c] : m.children()) convs_of(*c, out);
}
int64_t folds(Module& m) {
  std::vector<Conv2d*> cs;
  convs_of(m, cs);
  int64_t n = 0;
  for (Conv2d* c : cs) n += c->fold_count();
  return n;
}

// Tolerance relative to the output's scale: float32 folding rounds the scaled weights once.
double tol_for(DType t, const Tensor& y) {
  const double scale = std::max(1.0, ops::amax(ops::abs(y)).item());
  return (t == DType::float64 ? 1e-11 : 2e-5) * scale;
}

struct Net {
  std::string name;
  std::function<ModulePtr()> make;
  Shape x;
};

std::vector<Net> fold_cases() {
  using nets::BasicBlock;
  using nets::Bottleneck;
  return {
      {"conv+bn", [] { return ModulePtr(make<Sequential>(std::initializer_list<ModulePtr>{
                           make<Conv2d>(3, 6, 3, 1, 1), make<BatchNorm2d>(6)})); },
       {2, 3, 9, 7}},
      {"conv+bn+relu, no conv bias, stride 2",
       [] { return ModulePtr(make<Sequential>(std::initializer_list<ModulePtr>{
                make<Conv2d>(4, 8, 3, 2, 1, 1, 1, false), make<BatchNorm2d>(8), make<ReLU>()})); },
       {2, 4, 11, 10}},
      {"grouped conv+bn+relu then conv+bn",
       [] { return ModulePtr(make<Sequential>(std::initializer_list<ModulePtr>{
                make<Conv2d>(4, 8, 3, 1, 1, 1, 2), make<BatchNorm2d>(8), make<ReLU>(), make<Conv2d>(8, 5, 1),
                make<BatchNorm2d>(5)})); },
       {1, 4, 7, 7}},
      {"BasicBlock", [] { return ModulePtr(make<BasicBlock>(8, 8)); }, {2, 8, 7, 7}},
      {"BasicBlock, downsample",
       [] {
         auto ds = make<Sequential>(std::initializer_list<ModulePtr>{make<Conv2d>(4, 8, 1, 2, 0, 1, 1, false),
                                                                      make<BatchNorm2d>(8)});
         return ModulePtr(make<BasicBlock>(4, 8, 2, ds));
       },
       {2, 4, 9, 9}},
      {"Bottleneck", [] { return ModulePtr(make<Bottleneck>(16, 4)); }, {2, 16, 6, 5}},
      {"Bottleneck, downsample",
       [] {
         auto ds = make<Sequential>(std::initializer_list<ModulePtr>{make<Conv2d>(8, 16, 1, 2, 0, 1, 1, false),
                                                                      make<BatchNorm2d>(16)});
         return ModulePtr(make<Bottleneck>(8, 4, 2, ds));
       },
       {2, 8, 9, 8}},
  };
}

}  // namespace

TEST_CASE("folded eval forward equals the unfolded one: Conv+BN(+ReLU), BasicBlock, Bottleneck; every backend") {
  FusionGuard fg;
  for (const Net& spec : fold_cases())
    for (const std::string& be : cpu_backends())
      for (bool cl : {false, true}) {
        CAPTURE(spec.name);
        CAPTURE(be);
        CAPTURE(cl);
        const DType t = be == "ref" ? DType::float64 : DType::float32;
        manual_seed(11);
        ModulePtr net = spec.make();
        randomize_bn(*net, 12);
        net->to(t);
        net->eval();
        Tensor x = test::make_input(spec.x, 13, t);
        if (cl) x = x.contiguous(MemoryFormat::channels_last);
        BackendGuard g(be);
        const Tensor want = eval_forward(*net, x, false);
        CHECK(folds(*net) == 0);
        const Tensor got = eval_forward(*net, x, true);
        std::vector<Conv2d*> cs;
        convs_of(*net, cs);
        CHECK(folds(*net) == int64_t(cs.size()));  // every conv here has a batch norm after it
        const double tol = tol_for(t, want);
        CHECK_CLOSE(got, want, 0, tol);
        CHECK(got.sizes() == want.sizes());
        // A second forward reuses the folded weights.
        CHECK_CLOSE(eval_forward(*net, x, true), got, 0, 0);
        CHECK(folds(*net) == int64_t(cs.size()));
      }
}

TEST_CASE("training is unchanged by the rewrites: no folding; outputs, gradients and running statistics") {
  FusionGuard fg;
  for (const Net& spec : fold_cases())
    for (const std::string& be : {std::string("ref"), std::string("native")}) {
      CAPTURE(spec.name);
      CAPTURE(be);
      const DType t = be == "ref" ? DType::float64 : DType::float32;
      std::vector<Tensor> out, grads, stats;
      for (bool fuse : {false, true}) {
        manual_seed(21);
        ModulePtr net = spec.make();
        randomize_bn(*net, 22);
        net->to(t);
        net->train();
        Tensor x = test::make_input(spec.x, 23, t);
        BackendGuard g(be);
        Sequential::set_fusion(fuse);
        Tensor y = (*net)(x);
        ops::sum(ops::square(y)).backward();
        Sequential::set_fusion(true);
        CHECK(folds(*net) == 0);
        out.push_back(y.detach());
        for (const auto& [n, p] : net->named_parameters()) grads.push_back(p.grad());
        for (const auto& [n, b] : net->named_buffers()) stats.push_back(b);
      }
      // Fusion on in training is today's BatchNorm+ReLU pass: the same values as the separate
      // ops up to the order of float operations.
      const double tol = t == DType::float64 ? 1e-12 : 1e-5;
      CHECK_CLOSE(out[1], out[0], tol, tol);
      const size_t ng = grads.size() / 2, ns = stats.size() / 2;
      for (size_t i = 0; i < ng; ++i) CHECK_CLOSE(grads[ng + i], grads[i], tol, tol);
      for (size_t i = 0; i < ns; ++i) CHECK_CLOSE(stats[ns + i], stats[i], tol, tol);
    }
}

TEST_CASE("the folded weights follow load_state_dict, optimizer steps, train/eval and dtype changes") {
  FusionGuard fg;
  auto make_net = [] {
    auto ds = make<Sequential>(std::initializer_list<ModulePtr>{make<Conv2d>(8, 16, 1, 2, 0, 1, 1, false),
                                                                 make<BatchNorm2d>(16)});
    return ModulePtr(make<nets::Bottleneck>(8, 4, 2, ds));
  };
  manual_seed(31);
  ModulePtr net = make_net();
  randomize_bn(*net, 32);
  net->eval();
  const Tensor x = test::make_input({2, 8, 9, 8}, 33, DType::float32);
  auto check_fresh = [&](const char* after) {
    CAPTURE(after);
    const Tensor want = eval_forward(*net, x, false);
    const Tensor got = eval_forward(*net, x, true);
    CHECK_CLOSE(got, want, 0, tol_for(DType::float32, want));
  };
  check_fresh("first eval forward");
  const int64_t n_convs = folds(*net);
  CHECK(n_convs == 4);
  check_fresh("a second eval forward");
  CHECK(folds(*net) == n_convs);  // cached

  SUBCASE("load_state_dict") {
    manual_seed(34);
    ModulePtr other = make_net();
    randomize_bn(*other, 35);
    net->load_state_dict(other->state_dict());
    check_fresh("load_state_dict");
    CHECK(folds(*net) == 2 * n_convs);
    other->eval();
    CHECK_CLOSE(eval_forward(*net, x, true), eval_forward(*other, x, false), 0, 1e-4);
  }
  SUBCASE("an optimizer step (gradients taken in eval mode, where nothing folds)") {
    Tensor y = (*net)(x);  // grad mode on, parameters require grad: the unfolded modules
    CHECK(folds(*net) == n_convs);
    ops::sum(ops::square(y)).backward();
    auto opt = optim::sgd(net->named_parameters(), optim::SGDOptions{0.05});
    opt->step();
    check_fresh("sgd step");
    CHECK(folds(*net) == 2 * n_convs);
  }
  SUBCASE("a training forward between eval ones (running statistics move)") {
    net->train();
    {
      NoGradGuard ng;
      (*net)(x);
    }
    net->eval();
    check_fresh("train, forward, eval");
    CHECK(folds(*net) == 2 * n_convs);
  }
  SUBCASE("train() then eval() with no forward between: still right") {
    net->train();
    net->eval();
    check_fresh("train, eval");
  }
  SUBCASE("to(float64)") {
    net->to(DType::float64);
    const Tensor x64 = x.to(DType::float64);
    const Tensor want = eval_forward(*net, x64, false), got = eval_forward(*net, x64, true);
    CHECK(got.dtype() == DType::float64);
    CHECK_CLOSE(got, want, 0, tol_for(DType::float64, want));
    CHECK(folds(*net) == 2 * n_convs);
  }
  SUBCASE("a running statistic written in place") {
    NoGradGuard ng;
    for (auto& [n, b] : net->named_buffers())
      if (n == "bn3.running_var") b.fill_(3.0);
    check_fresh("fill_ of bn3.running_var");
    CHECK(folds(*net) == n_convs + 1);  // only conv3's fold depends on it
  }
}

TEST_CASE("no folding with fusion off, with gradients wanted, or while tracing") {
  FusionGuard fg;
  manual_seed(41);
  auto net = make<Sequential>(std::initializer_list<ModulePtr>{make<Conv2d>(3, 4, 3, 1, 1), make<BatchNorm2d>(4),
                                                               make<ReLU>()});
  randomize_bn(*net, 42);
  net->eval();
  Tensor x = test::make_input({2, 3, 6, 6}, 43, DType::float32);
  eval_forward(*net, x, false);
  CHECK(folds(*net) == 0);
  // Eval with gradients: the parameters get theirs through the unfolded modules.
  Tensor y = (*net)(x);
  CHECK(folds(*net) == 0);
  ops::sum(y).backward();
  auto& conv = dynamic_cast<Conv2d&>(*(*net)[0]);
  CHECK(conv.weight().grad().defined());
  CHECK(dynamic_cast<BatchNorm&>(*(*net)[1]).weight().grad().defined());
  // A recorder installed (ONNX export): the modules as they are.
  struct Sink : trace::Recorder {
    std::vector<std::string> ops;
    void record(trace::Event e) override { ops.push_back(graph::name(e.op)); }
  } sink;
  {
    trace::Scope scope(&sink);
    NoGradGuard ng;
    (*net)(x);
  }
  CHECK(folds(*net) == 0);
  CHECK(std::find(sink.ops.begin(), sink.ops.end(), std::string("batch_norm_relu")) != sink.ops.end());
  eval_forward(*net, x, true);
  CHECK(folds(*net) == 1);
}
