// The LibTorch-style module API: ModuleHolder (calls with any arguments, `->` to members),
// CallScope (a direct forward() gets the module's backend and profiler row), named_modules,
// apply, the init:: initialisers, custom autograd Functions and the public gradcheck.
//   ctest --test-dir build -R layers.test_module_api
#include "tests/support/testing.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend_preference.h"
#include "engine/function.h"
#include "engine/gradcheck.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/module.h"

using namespace kiln;

namespace {

// A module whose forward takes two tensors (no one-tensor forward).
class Blend : public Module {
 public:
  explicit Blend(double w) : w_(w) {}
  Tensor forward(const Tensor& a, const Tensor& b) {
    seen_backend = backend_preference();
    return a * w_ + b * (1.0 - w_);
  }
  using Module::forward;
  std::string repr() const override { return "Blend"; }
  std::string seen_backend;

 private:
  double w_;
};

struct Cube : autograd::Function<Cube> {
  static const char* name() { return "Cube"; }
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double scale) {
    ctx->save_for_backward({x});
    ctx->saved_data["scale"] = scale;
    return x * x * x * scale;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    const Tensor x = ctx->get_saved_variables()[0];
    // LibTorch's convention: one entry per argument, the number's undefined.
    return {g[0] * x * x * (3.0 * ctx->saved_data["scale"]), Tensor()};
  }
};

struct WrongGrad : autograd::Function<WrongGrad> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * x; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) { return {g[0]}; }  // not 2x
};

struct BadShape : autograd::Function<BadShape> {
  static const char* name() { return "BadShape"; }
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return ops::sum(x); }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) { return {g[0]}; }
};

struct SplitHalves : autograd::Function<SplitHalves> {
  static std::vector<Tensor> forward(autograd::AutogradContext*, const Tensor& x) {
    return {x.slice(0, 0, 2).clone(), x.slice(0, 2, 4).clone()};
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    Tensor gx = zeros({4}, TensorOptions(g[0].dtype()));
    gx.slice(0, 0, 2).copy_(g[0]);
    gx.slice(0, 2, 4).copy_(g[1]);
    return {gx};
  }
};

}  // namespace

TEST_CASE("ModuleHolder calls through the module's scope, with any arguments") {
  ModuleHolder<Linear> fc(4, 3);
  Tensor x = randn({2, 4});
  CHECK(fc(x).sizes() == Shape{2, 3});
  CHECK(fc->weight().sizes() == Shape{3, 4});
  CHECK((*fc).repr() == "Linear(in_features=4, out_features=3, bias=True)");
  std::shared_ptr<Module> as_module = fc;  // a holder is a module pointer (Sequential::add takes it)
  CHECK(as_module.get() == fc.ptr().get());

  ModuleHolder<Blend> blend(0.25);
  blend->set_backend("ref");
  Tensor y = blend(ones({2}), zeros({2}));
  CHECK(y.to_vector() == std::vector<double>{0.25, 0.25});
  CHECK(blend->seen_backend == "ref");
  CHECK_THROWS_KILN((*blend)(ones({2})), "Blend: forward(x) is not defined for one tensor");

  ModuleHolder<Linear> empty;
  CHECK(empty.is_empty());
  CHECK_THROWS_KILN(empty(x), "ModuleHolder: the holder is empty");
}

TEST_CASE("a direct forward() call gets the module's profiler row and backend") {
  auto net = make<Sequential>();
  net->add("fc", make<Linear>(4, 4)).add("act", make<ReLU>());
  net->assign_paths();
  profiler::reset();
  profiler::enable(true);
  auto* fc = dynamic_cast<Linear*>((*net)[0].get());
  REQUIRE(fc);
  fc->forward(randn({2, 4}));  // not (*fc)(x)
  profiler::enable(false);
  bool found = false;
  for (const auto& r : profiler::rows()) found |= r.name == "fc" && r.forward_calls == 1;
  CHECK(found);
  profiler::reset();
}

TEST_CASE("named_modules and apply walk the tree as PyTorch's do") {
  auto inner = make<Sequential>();
  inner->add(make<Linear>(2, 2)).add(make<ReLU>());
  auto net = make<Sequential>();
  net->add("body", inner).add("head", make<Linear>(2, 1));
  std::vector<std::string> names;
  for (auto& [n, m] : net->named_modules()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"", "body", "body.0", "body.1", "head"});
  std::vector<std::string> order;
  net->apply([&](Module& m) { order.push_back(m.repr().substr(0, 6)); });
  CHECK(order == std::vector<std::string>{"Linear", "ReLU", "Sequen", "Linear", "Sequen"});
  // apply with init: every Linear weight to ones.
  net->apply([](Module& m) {
    if (auto* l = dynamic_cast<Linear*>(&m)) init::ones_(l->weight());
  });
  for (auto& [n, p] : net->named_parameters())
    if (n.find("weight") != std::string::npos)
      for (double v : p.to_vector()) CHECK(v == 1);
  CHECK(net->parameters(/*recurse=*/false).empty());
  CHECK(net->named_modules()[4].second->parameters(false).size() == 2);
}

TEST_CASE("init:: initialisers: bounds, spreads and fans as torch.nn.init") {
  manual_seed(3);
  Tensor w = empty({64, 32, 3, 3});
  CHECK(init::fans(w) == std::pair<int64_t, int64_t>{32 * 9, 64 * 9});
  CHECK(init::calculate_gain(init::Nonlinearity::relu) == doctest::Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain(init::Nonlinearity::leaky_relu, std::sqrt(5.0)) == doctest::Approx(std::sqrt(1.0 / 3)));
  CHECK(init::calculate_gain(init::Nonlinearity::tanh) == doctest::Approx(5.0 / 3));
  init::kaiming_uniform_(w, 0, init::FanMode::fan_in, init::Nonlinearity::relu);
  const double bound = std::sqrt(2.0) * std::sqrt(3.0 / (32 * 9));
  // Bounds counted value by value (a NaN is outside every bound; a running max would drop it).
  double hi = 0, sq = 0;
  int outside = 0;
  for (double v : w.to_vector()) outside += !(v >= -bound && v <= bound), hi = std::max(hi, v), sq += v * v;
  CHECK(outside == 0);
  CHECK(hi > 0.95 * bound);  // 18432 draws reach the edge
  init::kaiming_normal_(w, 0, init::FanMode::fan_out, init::Nonlinearity::relu);
  sq = 0;
  for (double v : w.to_vector()) sq += v * v;
  const double std_want = std::sqrt(2.0) / std::sqrt(64.0 * 9), std_got = std::sqrt(sq / double(w.numel()));
  CHECK(std_got == doctest::Approx(std_want).epsilon(0.03));
  Tensor l = empty({100, 300});
  init::xavier_uniform_(l);
  outside = 0;
  for (double v : l.to_vector()) outside += !(std::abs(v) <= std::sqrt(6.0 / 400));
  CHECK(outside == 0);
  init::xavier_normal_(l, 2.0);
  sq = 0;
  for (double v : l.to_vector()) sq += v * v;
  CHECK(std::sqrt(sq / 30000.0) == doctest::Approx(2.0 * std::sqrt(2.0 / 400)).epsilon(0.03));
  init::constant_(l, 0.5);
  CHECK(ops::sum(l).item() == 15000);
  // A parameter that requires grad is written outside autograd.
  Linear fc(3, 2);
  init::zeros_(fc.weight());
  CHECK(ops::sum(ops::abs(fc.weight())).item() == 0);
  CHECK(fc.weight().requires_grad());
  CHECK_THROWS_KILN(init::fans(scalar_tensor(1.0)), "init: fans need a tensor of at least 1 dim");
  CHECK_THROWS_KILN(init::kaiming_uniform_(empty({3, 0})), "kaiming_uniform_: the fan of [3, 0] is 0");
  CHECK_THROWS_KILN(init::uniform_(l, 1, 0), "init::uniform_: a = 1 is greater than b = 0");
  // trunc_normal_: inside [a, b], redrawn (not clamped: no mass piles up at the bounds), and the
  // spread of N(0, 1) cut at +-1 (0.5377^2 = 0.2911 variance).
  init::trunc_normal_(l, 0, 1, -1, 1);
  sq = 0;
  int at_bound = 0;
  for (double v : l.to_vector()) {
    CHECK((v >= -1 && v <= 1));
    sq += v * v;
    at_bound += std::abs(v) == 1.0;
  }
  CHECK(at_bound == 0);
  CHECK(sq / 30000.0 == doctest::Approx(0.2911).epsilon(0.03));
  CHECK_THROWS_KILN(init::trunc_normal_(l, 0, 1, 10, 11), "holds less than 1e-6 of N(0, 1)");
  CHECK_THROWS_KILN(init::trunc_normal_(l, 0, 1, 1, -1), "needs std > 0 and a < b");
}


TEST_CASE("custom autograd Functions: values, gradients, errors") {
  Tensor x = from_vector(std::vector<double>{0.5, -1, 2}, {3}, DType::float64).requires_grad_();
  Tensor y = Cube::apply(x, 2.0);
  CHECK(y.to_vector() == std::vector<double>{0.25, -2, 16});
  CHECK(y.grad_fn()->name() == "Cube");
  ops::sum(y).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{1.5, 6, 24});
  CHECK(autograd::gradcheck([](const std::vector<Tensor>& in) { return Cube::apply(in[0], 0.5); }, {x}) == "");
  CHECK(autograd::gradcheck([](const std::vector<Tensor>& in) { return ops::sum(SplitHalves::apply(in[0])[1] * 3.0); },
                            {randn({4}, DType::float64).requires_grad_()}) == "");
  // gradcheck catches a wrong backward.
  const std::string bad = autograd::gradcheck([](const std::vector<Tensor>& in) { return WrongGrad::apply(in[0]); },
                                              {from_vector(std::vector<double>{1, 2}, {2}, DType::float64).requires_grad_()});
  CHECK(bad.find("gradcheck: input 0 [2] element 0: analytic ") == 0);  // w0 * 1 where w0 * 2 is right
  // A gradient of the wrong shape and a saved tensor written in place are errors naming the Function.
  Tensor z = ones({3}, DType::float64).requires_grad_();
  CHECK_THROWS_KILN(BadShape::apply(z).backward(), "BadShape.backward: gradient 0 is [] but its input is [3]");
  Tensor a = ones({3}, DType::float64).requires_grad_();
  Tensor b = a * 1.0;
  Tensor c = Cube::apply(b, 1.0);
  {
    NoGradGuard ng;
    b.fill_(2.0);
  }
  CHECK_THROWS_KILN(ops::sum(c).backward(), "Cube: saved tensor 0 ");
  // No input requires grad: nothing is recorded.
  CHECK(!Cube::apply(ones({2}), 1.0).requires_grad());
}
