// Elementwise ops and reductions: native float32 against ref float64, and finite-difference
// gradients, on odd shapes, broadcasting, non-contiguous inputs and batch 1.
//   ctest --test-dir build -R grad.test_elementwise_grad
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;

namespace {
Tensor req(Tensor t) { return t.requires_grad_(true); }
}  // namespace

TEST_CASE("binary ops with broadcasting: native vs ref, and gradients") {
  struct Case { Shape a, b; };
  std::vector<Case> cases = {{{3, 5}, {3, 5}}, {{2, 3, 5}, {5}}, {{4, 1, 3}, {1, 7, 3}}, {{1}, {2, 3}}, {{}, {3}}};
  using F = std::function<Tensor(const Tensor&, const Tensor&)>;
  std::vector<std::pair<const char*, F>> fns = {
      {"add", [](auto& a, auto& b) { return a + b; }},
      {"sub", [](auto& a, auto& b) { return a - b; }},
      {"mul", [](auto& a, auto& b) { return a * b; }},
      {"div", [](auto& a, auto& b) { return a / b; }},
      {"maximum", [](auto& a, auto& b) { return ops::maximum(a, b); }},
      {"minimum", [](auto& a, auto& b) { return ops::minimum(a, b); }},
      {"pow", [](auto& a, auto& b) { return ops::pow(a, b); }},
  };
  for (auto& [name, f] : fns) {
    for (auto& c : cases) {
      CAPTURE(name);
      CAPTURE(shape_str(c.a));
      CAPTURE(shape_str(c.b));
      // Positive inputs keep div and pow smooth.
      Tensor a = req(make_input(c.a, 1, DType::float64, 0.5, 2.0));
      Tensor b = req(make_input(c.b, 2, DType::float64, 0.5, 2.0));
      auto fn = [f = f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{a, b}));
      CHECK_GRAD(fn, (std::vector<Tensor>{a, b}));
      if (a.dim() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(a)), b}));
    }
  }
}

TEST_CASE("unary ops and activations: native vs ref, and gradients") {
  using F = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, F>> fns = {
      {"relu", [](auto& x) { return ops::relu(x); }},
      {"leaky_relu", [](auto& x) { return ops::leaky_relu(x, 0.2); }},
      {"sigmoid", [](auto& x) { return ops::sigmoid(x); }},
      {"tanh", [](auto& x) { return ops::tanh(x); }},
      {"gelu", [](auto& x) { return ops::gelu(x); }},
      {"exp", [](auto& x) { return ops::exp(x); }},
      {"abs", [](auto& x) { return ops::abs(x); }},
      {"square", [](auto& x) { return ops::square(x); }},
      {"neg", [](auto& x) { return -x; }},
      {"scalar", [](auto& x) { return (x * 3.0 + 1.0) / 2.0 - 0.5; }},
      {"pow_scalar", [](auto& x) { return ops::pow(ops::abs(x) + 0.5, 1.7); }},
      {"clamp_min", [](auto& x) { return ops::clamp_min(x, 0.1); }},
  };
  for (auto& [name, f] : fns) {
    for (Shape s : {Shape{1}, Shape{7}, Shape{2, 3, 5}, Shape{1, 3, 4, 5}}) {
      CAPTURE(name);
      CAPTURE(shape_str(s));
      // Keep away from kinks (0 for relu/abs, 0.1 for clamp) so finite differences are valid.
      Tensor x = make_input(s, 3, DType::float64, -2, 2);
      Tensor sign = ops::gt(x, zeros({}, DType::float64)) * 2.0 - 1.0;
      x = ops::maximum(ops::abs(x), full({}, 0.3, DType::float64)) * sign;
      x = req(x.detach());
      auto fn = [f = f](const std::vector<Tensor>& in) { return f(in[0]); };
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
      CHECK_GRAD(fn, (std::vector<Tensor>{x}));
      if (x.dim() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
    }
  }
}

TEST_CASE("reductions: native vs ref, and gradients") {
  Tensor x = req(make_input({3, 4, 5}, 4));
  using F = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, F>> fns = {
      {"sum all", [](auto& t) { return ops::sum(t); }},
      {"sum 1", [](auto& t) { return ops::sum(t, {1}); }},
      {"sum 0,2 keep", [](auto& t) { return ops::sum(t, {0, 2}, true); }},
      {"sum -1", [](auto& t) { return ops::sum(t, {-1}); }},
      {"mean 0", [](auto& t) { return ops::mean(t, {0}); }},
      {"mean 1,2", [](auto& t) { return ops::mean(t, {1, 2}); }},
      {"max 1", [](auto& t) { return ops::max(t, 1).values; }},
      {"min 2 keep", [](auto& t) { return ops::min(t, 2, true).values; }},
      {"amax", [](auto& t) { return ops::amax(t); }},
  };
  for (auto& [name, f] : fns) {
    CAPTURE(name);
    auto fn = [f = f](const std::vector<Tensor>& in) { return f(in[0]); };
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
    CHECK_GRAD(fn, (std::vector<Tensor>{x}));
  }
  Tensor v = from_vector(std::vector<double>{1, 5, 5, 2, -1, 0}, {2, 3});
  CHECK(ops::argmax(v, 1).to_vector() == std::vector<double>{1, 0});  // first maximum on ties
  CHECK(ops::argmin(v, 0).to_vector() == std::vector<double>{0, 1, 1});
  CHECK(ops::sum(v).item() == 12);
  CHECK(ops::mean(v, {0}).to_vector() == std::vector<double>{1.5, 2, 2.5});
  CHECK_THROWS_KILN(ops::sum(v, {2}), "sum: dim 2 out of range");
  CHECK_THROWS_KILN(ops::max(v, -3), "max: dim -3 out of range");
}

TEST_CASE("elementwise errors name the op and shapes") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  CHECK_THROWS_KILN(a + b, "add: shapes [2, 3] and [4] cannot be broadcast");
  CHECK_THROWS_KILN(a * zeros({2, 3}, DType::float64), "mul: dtype mismatch, float32 [2, 3] vs float64 [2, 3]");
  CHECK_THROWS_KILN(ops::relu(Tensor()), "relu: undefined tensor");
}

TEST_CASE("half types compute in float32") {
  Tensor x = from_vector(std::vector<double>{-1, 0.5, 2}, {3}, DType::bfloat16);
  Tensor y = ops::relu(x) * 2.0;
  CHECK(y.dtype() == DType::bfloat16);
  CHECK(y.to_vector() == std::vector<double>{0, 1, 4});
}
