// The autograd tape: accumulation, shared subexpressions, no_grad, detach, retain_graph,
// retain_grad, leaf hooks, view backward, and errors.
//   ctest --test-dir build -R engine.test_autograd
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

using namespace kiln;

static Tensor leaf(std::vector<double> v, Shape s) {
  return from_vector(v, s, DType::float64).requires_grad_(true);
}

TEST_CASE("gradients flow through a diamond and accumulate across passes") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor a = x * 2.0;
  Tensor b = x * x;
  Tensor y = ops::sum(a + b);  // dy/dx = 2 + 2x
  y.backward();
  CHECK(x.grad().to_vector() == std::vector<double>{4, 6, 8});
  ops::sum(x * 3.0).backward();  // accumulates
  CHECK(x.grad().to_vector() == std::vector<double>{7, 9, 11});
  x.set_grad(Tensor());
  ops::sum(x).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{1, 1, 1});
}

TEST_CASE("NoGradGuard and detach stop recording") {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard ng;
    Tensor y = x * 2.0;
    CHECK(!y.requires_grad());
  }
  Tensor d = x.detach();
  CHECK(!d.requires_grad());
  CHECK(d.data_ptr() == x.data_ptr());
  Tensor y = x * d;  // d is a constant: dy/dx = d
  ops::sum(y).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{1, 2});
}

TEST_CASE("retain_graph allows a second backward; without it the graph is freed") {
  Tensor x = leaf({3}, {1});
  Tensor y = ops::sum(ops::exp(x) * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  double g1 = x.grad().item();
  y.backward();
  CHECK(x.grad().item() == doctest::Approx(2 * g1));
  CHECK_THROWS_KILN(y.backward(), "backward through the graph a second time");
}

TEST_CASE("retain_grad keeps a non-leaf gradient") {
  Tensor x = leaf({1, 2}, {2});
  Tensor h = x * 3.0;
  h.retain_grad();
  ops::sum(h * h).backward();
  CHECK(h.grad().to_vector() == std::vector<double>{6, 12});
  CHECK(x.grad().to_vector() == std::vector<double>{18, 36});
}

TEST_CASE("leaf hooks fire once, when the gradient is final") {
  Tensor w = leaf({1, 1}, {2});
  int calls = 0;
  std::vector<double> seen;
  w.register_post_accumulate_grad_hook([&](Tensor& t) {
    ++calls;
    seen = t.grad().to_vector();
  });
  // w is used three times; the hook must see the sum of all three contributions.
  Tensor y = ops::sum(w * 2.0) + ops::sum(w * 3.0) + ops::sum(w);
  y.backward();
  CHECK(calls == 1);
  CHECK(seen == std::vector<double>{6, 6});
}

TEST_CASE("backward through views") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x.t().slice(0, 1, 3).reshape({4}).unsqueeze(0).expand({2, 4});
  ops::sum(y * 1.0).backward();
  // Columns 1 and 2 of x each appear twice after the expand.
  CHECK(x.grad().to_vector() == std::vector<double>{0, 2, 2, 0, 2, 2});
  Tensor z = leaf({1, 2, 3, 4}, {4});
  ops::sum(z.select(0, 2) * z.narrow(0, 0, 1).squeeze()).backward();
  CHECK(z.grad().to_vector() == std::vector<double>{3, 0, 1, 0});
}

TEST_CASE("a gradient for an unused output of a multi-output op is zero") {
  Tensor x = leaf({1, 5, 2, 7}, {2, 2});
  auto mm = ops::max(x, 1);
  ops::sum(mm.values * 2.0).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{0, 2, 0, 2});
}

TEST_CASE("autograd errors") {
  Tensor x = from_vector(std::vector<double>{1, 2}, {2});
  CHECK_THROWS_KILN(x.backward(), "does not require grad");
  Tensor w = leaf({1, 2}, {2});
  Tensor y = w * 2.0;
  CHECK_THROWS_KILN(y.backward(), "grad can be implicit only for one-element outputs");
  CHECK_THROWS_KILN(y.backward(ones({3}, DType::float64)), "gradient shape [3] != output shape [2]");
  CHECK_THROWS_KILN(w.fill_(0), "in-place write to a leaf that requires grad");
  CHECK_THROWS_KILN(from_vector(std::vector<double>{1}, {1}, DType::int64).requires_grad_(), "only floating-point");
}

TEST_CASE("graphs release saved tensors after backward") {
  Tensor x = leaf({1, 2, 3}, {3});
  std::weak_ptr<TensorImpl> saved;
  {
    Tensor y = ops::exp(x);
    saved = y.impl_ptr();
    ops::sum(y).backward();
  }
  CHECK(saved.expired());  // no cycle between an output and its grad_fn
}
