// Elementwise ops (arithmetic, activations, log/sqrt/rsqrt/reciprocal, comparisons) and
// reductions: native float32 against ref float64, and finite-difference gradients, on odd shapes,
// broadcasting, non-contiguous inputs and batch 1.
//   ctest --test-dir build -R grad.test_elementwise_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include <cmath>

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;

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
  for (auto& entry : fns) {
    const char* name = entry.first;
    auto& f = entry.second;
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
  for (auto& entry : fns) {
    const char* name = entry.first;
    auto& f = entry.second;
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

TEST_CASE("unary ops of positive inputs (log, sqrt, rsqrt, reciprocal): native vs ref, and gradients") {
  using F = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, F>> fns = {
      {"log", [](auto& x) { return ops::log(x); }},
      {"sqrt", [](auto& x) { return ops::sqrt(x); }},
      {"rsqrt", [](auto& x) { return ops::rsqrt(x); }},
      {"reciprocal", [](auto& x) { return ops::reciprocal(x); }},
      {"scalar - x, scalar * x", [](auto& x) { return 2.0 - 0.5 * x; }},
      {"log(sqrt(x) + 1 / x)", [](auto& x) { return ops::log(ops::sqrt(x) + ops::reciprocal(x)); }},
  };
  for (auto& entry : fns) {
    const char* name = entry.first;
    auto& f = entry.second;
    for (Shape s : {Shape{1}, Shape{7}, Shape{2, 3, 5}, Shape{1, 3, 4, 5}}) {
      CAPTURE(name);
      CAPTURE(shape_str(s));
      // (0.2, 3): away from the poles at 0, where finite differences blow up.
      Tensor x = req(make_input(s, 5, DType::float64, 0.2, 3.0));
      auto fn = [f = f](const std::vector<Tensor>& in) { return f(in[0]); };
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
      CHECK_GRAD(fn, (std::vector<Tensor>{x}));
      if (x.dim() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
    }
  }
  // Values at known points, so ref and native cannot agree on a wrong formula.
  Tensor v = from_vector(std::vector<double>{0.25, 1, 4}, {3}, DType::float64);
  CHECK(ops::sqrt(v).to_vector() == std::vector<double>{0.5, 1, 2});
  CHECK(ops::rsqrt(v).to_vector() == std::vector<double>{2, 1, 0.5});
  CHECK(ops::reciprocal(v).to_vector() == std::vector<double>{4, 1, 0.25});
  CHECK(ops::log(v).to_vector()[1] == 0);
  CHECK(ops::log(v).to_vector()[2] == doctest::Approx(std::log(4.0)).epsilon(1e-15));
}

TEST_CASE("comparisons: native vs ref with ties and broadcasting; no gradient flows through them") {
  using F = std::function<Tensor(const Tensor&, const Tensor&)>;
  std::vector<std::pair<const char*, F>> fns = {
      {"eq", [](auto& a, auto& b) { return ops::eq(a, b); }}, {"ne", [](auto& a, auto& b) { return ops::ne(a, b); }},
      {"gt", [](auto& a, auto& b) { return ops::gt(a, b); }}, {"ge", [](auto& a, auto& b) { return ops::ge(a, b); }},
      {"lt", [](auto& a, auto& b) { return ops::lt(a, b); }}, {"le", [](auto& a, auto& b) { return ops::le(a, b); }},
  };
  // Quarters in [-1, 1]: exact in float32, so ties (eq, ge, le) are ties on both backends.
  auto grid = [](const Shape& s, uint64_t seed) {
    Tensor t = make_input(s, seed, DType::float64, -1, 1);
    std::vector<double> v = t.to_vector();
    for (double& x : v) x = std::round(x * 4) / 4;
    return from_vector(v, s, TensorOptions(DType::float64));
  };
  const Tensor a = grid({4, 1, 6}, 6), b = grid({3, 6}, 7), a2 = grid({4, 3, 6}, 8);
  const std::vector<double> av = a.to_vector(), bv = b.to_vector();
  for (auto& entry : fns) {
    const char* name = entry.first;
    auto& f = entry.second;
    CAPTURE(name);
    auto fn = [f = f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
    test::RefCompareOptions o;
    o.grads = false;
    o.rtol = o.atol = 0;  // 0 or 1, exactly
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{a, b}), o);
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{non_contiguous(a2), b}), o);
    Tensor y = f(a, b);
    CHECK(y.sizes() == Shape{4, 3, 6});
    // Against the definition, element by element (a broadcast over dim 1, b over dim 0).
    const std::vector<double> yv = y.to_vector();
    int64_t ones = 0;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 6; ++k) {
          const double x = av[size_t(i * 6 + k)], z = bv[size_t(j * 6 + k)];
          const std::string n = name;
          const bool want = n == "eq" ? x == z : n == "ne" ? x != z : n == "gt" ? x > z : n == "ge" ? x >= z
                                                                      : n == "lt" ? x < z : x <= z;
          CHECK(yv[size_t((i * 3 + j) * 6 + k)] == (want ? 1.0 : 0.0));
          ones += want;
        }
    CHECK(ones > 0);
    CHECK(ones < 72);
    // Not differentiable: the result never requires grad, and as a mask it passes none back.
    Tensor x = req(make_input({4, 3, 6}, 9, DType::float64, 0.1, 2));
    CHECK_FALSE(f(x, b).requires_grad());
    auto masked = [f = f, b](const std::vector<Tensor>& in) { return in[0] * f(in[0], b.to(in[0].dtype())); };
    CHECK_GRAD(masked, (std::vector<Tensor>{x}));
    CHECK_AGAINST_REF(masked, (std::vector<Tensor>{x}));
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
  for (auto& entry : fns) {
    const char* name = entry.first;
    auto& f = entry.second;
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
  CHECK((a * zeros({2, 3}, DType::float64)).dtype() == DType::float64);  // promoted, as PyTorch's
  CHECK_THROWS_KILN(ops::relu(Tensor()), "relu: undefined tensor");
}

TEST_CASE("half types compute in float32") {
  Tensor x = from_vector(std::vector<double>{-1, 0.5, 2}, {3}, DType::bfloat16);
  Tensor y = ops::relu(x) * 2.0;
  CHECK(y.dtype() == DType::bfloat16);
  CHECK(y.to_vector() == std::vector<double>{0, 1, 4});
}
