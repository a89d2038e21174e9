// Pool and shape layers: each module gives its op's result, has no parameters (empty state
// dict that loads back), shows PyTorch-like repr, and works inside a Sequential with backward.
//   ctest --test-dir build -R layers.test_pool_layers
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "layers/pool.h"
#include "layers/shape.h"

using namespace kiln;
using kiln::test::make_input;

TEST_CASE("pool layers compute their op") {
  Tensor x = make_input({2, 3, 7, 6}, 1);
  CHECK_CLOSE(MaxPool2d(3, 2, 1, 1, true)(x), ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true), 0, 0);
  CHECK_CLOSE(MaxPool2d(2)(x), ops::max_pool2d(x, {2, 2}, {2, 2}), 0, 0);
  CHECK_CLOSE(MaxPool2d({3, 2}, {1, 2}, {1, 0}, {1, 2})(x), ops::max_pool2d(x, {3, 2}, {1, 2}, {1, 0}, {1, 2}), 0, 0);
  CHECK_CLOSE(AvgPool2d(3, 2, 1, true, false)(x), ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, false), 0, 0);
  CHECK_CLOSE(AvgPool2d(2, 1, 0, false, true, 3)(x), ops::avg_pool2d(x, {2, 2}, {1, 1}, {0, 0}, false, true, 3), 0, 0);
  CHECK_CLOSE(AdaptiveAvgPool2d(1)(x), ops::mean(x, {2, 3}, true), 1e-12, 1e-12);
  CHECK_CLOSE(AdaptiveAvgPool2d({3, 2})(x), ops::adaptive_avg_pool2d(x, {3, 2}), 0, 0);
  CHECK_CLOSE(AdaptiveMaxPool2d({2, 4})(x), ops::adaptive_max_pool2d(x, {2, 4}), 0, 0);
  CHECK_CLOSE(LocalResponseNorm(3, 0.1, 0.75, 2.0)(x), ops::local_response_norm(x, 3, 0.1, 0.75, 2.0), 0, 0);
}

TEST_CASE("shape layers compute their op") {
  Tensor x = make_input({1, 2, 3, 4}, 2);
  CHECK_CLOSE(Upsample(2.0)(x), ops::upsample_nearest2d(x, 2.0, 2.0), 0, 0);
  CHECK(Upsample(2)(x).sizes() == Shape{1, 2, 6, 8});
  CHECK_CLOSE(Upsample({5, 7}, UpsampleMode::bilinear, true)(x), ops::upsample_bilinear2d(x, {5, 7}, true), 0, 0);
  CHECK_CLOSE(Upsample(1.5, UpsampleMode::bilinear)(x), ops::upsample_bilinear2d(x, 1.5, 1.5, false), 0, 0);
  CHECK_CLOSE(ZeroPad2d(1)(x), ops::pad(x, {1, 1, 1, 1}), 0, 0);
  CHECK_CLOSE(ZeroPad2d({1, 0, -1, 2})(x), ops::pad(x, {1, 0, -1, 2}), 0, 0);
  CHECK_CLOSE(ConstantPad2d(2, 3.5)(x), ops::pad(x, {2, 2, 2, 2}, PadMode::constant, 3.5), 0, 0);
  CHECK_CLOSE(ReflectionPad2d({2, 1, 0, 2})(x), ops::pad(x, {2, 1, 0, 2}, PadMode::reflect), 0, 0);
  CHECK_CLOSE(ReplicationPad2d(3)(x), ops::pad(x, {3, 3, 3, 3}, PadMode::replicate), 0, 0);
  CHECK_THROWS_KILN(Upsample(2.0, UpsampleMode::nearest, true), "Upsample: align_corners can only be set with mode bilinear");
  CHECK_THROWS_KILN(ReflectionPad2d(3)(x), "pad: reflect padding 3 must be less than the input size 3");
}

TEST_CASE("layers have no parameters, state dicts round-trip, repr reads like PyTorch") {
  std::vector<std::pair<ModulePtr, std::string>> mods = {
      {make<MaxPool2d>(3, 2), "MaxPool2d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)"},
      {make<AvgPool2d>(2), "AvgPool2d(kernel_size=2, stride=2, padding=0)"},
      {make<AdaptiveAvgPool2d>(std::array<int64_t, 2>{6, 6}), "AdaptiveAvgPool2d(output_size=6)"},
      {make<AdaptiveMaxPool2d>(std::array<int64_t, 2>{2, 3}), "AdaptiveMaxPool2d(output_size=(2, 3))"},
      {make<LocalResponseNorm>(5), "LocalResponseNorm(5, alpha=0.0001, beta=0.75, k=1)"},
      {make<Upsample>(2.0), "Upsample(scale_factor=2, mode='nearest')"},
      {make<ZeroPad2d>(1), "ZeroPad2d(padding=(1, 1, 1, 1))"},
      {make<ReflectionPad2d>(2), "ReflectionPad2d((2, 2, 2, 2))"},
  };
  for (auto& [m, repr] : mods) {
    CHECK(m->repr() == repr);
    CHECK(m->num_parameters() == 0);
    CHECK(m->state_dict().empty());
    m->load_state_dict({});
  }
}

TEST_CASE("a small net of these layers trains end to end") {
  Sequential net{make<ReflectionPad2d>(1), make<MaxPool2d>(3, 2, 1, 1, true), make<LocalResponseNorm>(2, 0.1),
                 make<Upsample>(2.0, UpsampleMode::bilinear), make<AvgPool2d>(2, 1, 1, false, false),
                 make<AdaptiveAvgPool2d>(2)};
  Tensor x = make_input({1, 3, 7, 7}, 3).requires_grad_(true);
  Tensor y = net(x);
  CHECK(y.sizes() == Shape{1, 3, 2, 2});
  ops::sum(y).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().sizes() == x.sizes());
  CHECK(ops::sum(ops::abs(x.grad())).item() > 0);
}
