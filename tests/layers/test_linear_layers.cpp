// Linear layer: parameter names, shapes and init bounds as in PyTorch, forward equals the op,
// gradients reach the parameters, state-dict round trip, bias = false.
//   ctest --test-dir build -R layers.test_linear_layers
#include "tests/support/testing.h"

#include <cmath>

#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/reduce.h"
#include "layers/linear.h"

using namespace kiln;

TEST_CASE("Linear: parameters, init and repr") {
  manual_seed(1);
  Linear l(3, 4);
  NamedTensors ps = l.named_parameters();
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].first == "weight");
  CHECK(ps[1].first == "bias");
  CHECK(ps[0].second.sizes() == Shape{4, 3});
  CHECK(ps[1].second.sizes() == Shape{4});
  CHECK(ps[0].second.requires_grad());
  CHECK(l.num_parameters() == 16);
  const double bound = 1.0 / std::sqrt(3.0);
  for (const auto& [name, t] : ps) {
    std::vector<double> v = t.to_vector();
    double lo = 1, hi = -1;
    for (double x : v) {
      CHECK(std::abs(x) <= bound);
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
    CHECK(hi > lo);  // drawn, not constant
  }
  CHECK(l.repr() == "Linear(in_features=3, out_features=4, bias=True)");
  Linear nb(5, 2, false);
  CHECK(nb.named_parameters().size() == 1);
  CHECK(nb.named_parameters()[0].first == "weight");
  CHECK(!nb.bias().defined());
  CHECK(nb.repr() == "Linear(in_features=5, out_features=2, bias=False)");
  CHECK_THROWS_KILN(Linear(-1, 2), "Linear: negative size");
}

TEST_CASE("Linear: forward is x W^T + b, gradients reach the parameters") {
  manual_seed(2);
  auto l = make<Linear>(3, 2);
  Tensor x = test::make_input({4, 3}, 5, DType::float32);
  Tensor y = (*l)(x);
  CHECK(y.sizes() == Shape{4, 2});
  Tensor want = ops::matmul(x, l->weight().t()) + l->bias();
  CHECK_CLOSE(y, want, 1e-6, 1e-6);
  CHECK_CLOSE(y, ops::linear(x, l->weight(), l->bias()), 0, 0);
  // sum(y): dW[o, :] = sum over rows of x, db[o] = number of rows.
  ops::sum(y).backward();
  Tensor colsum = ops::sum(x, {0});
  for (int64_t o = 0; o < 2; ++o) CHECK_CLOSE(l->weight().grad().select(0, o), colsum, 1e-6, 1e-6);
  CHECK(l->bias().grad().to_vector() == std::vector<double>{4, 4});
  // Leading dims are kept.
  CHECK((*l)(test::make_input({2, 5, 3}, 6, DType::float32)).sizes() == Shape{2, 5, 2});
  CHECK_THROWS_KILN((*l)(zeros({4, 5})), "linear: input [4, 5] has 5 features but weight [2, 3] expects 3");
}

TEST_CASE("Linear: state dict round trip") {
  manual_seed(3);
  Linear a(6, 3);
  manual_seed(4);
  Linear b(6, 3);
  Tensor x = test::make_input({2, 6}, 7, DType::float32);
  CHECK(test::compare(a(x), b(x), 0, 0) != "");
  NamedTensors sd = a.state_dict();
  REQUIRE(sd.size() == 2);
  CHECK(sd[0].first == "weight");
  CHECK(sd[1].first == "bias");
  b.load_state_dict(sd);
  CHECK_CLOSE(b(x), a(x), 0, 0);
  Linear c(6, 3, false);
  CHECK_THROWS_KILN(c.load_state_dict(sd), "bias");
}
