// GradScaler: loss scaling for float16 mixed precision, with torch.cuda.amp.GradScaler's rules.
//   ctest --test-dir build -R amp
#include "tests/support/testing.h"

#include <cmath>
#include <limits>

#include "engine/amp.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/optim.h"

using namespace kiln;

namespace {

Tensor vec(std::vector<double> v) {
  const int64_t n = int64_t(v.size());
  return from_vector(v, {n}, DType::float32);
}

NamedTensors one_param(std::vector<double> v) {
  const int64_t n = int64_t(v.size());
  return {{"w", from_vector(std::move(v), {n}, DType::float32).requires_grad_()}};
}

}  // namespace

TEST_CASE("GradScaler scales the loss, unscales gradients to the unscaled ones, and steps") {
  auto opt = optim::sgd(one_param({1.0, -2.0, 0.5}), {0.1});
  amp::GradScaler scaler;
  CHECK(scaler.get_scale() == 65536.0);
  Tensor w = opt->params()[0].second;
  Tensor x = vec({3.0, 1.0, -4.0});
  Tensor loss = ops::sum(w * x);
  Tensor scaled = scaler.scale(loss);
  CHECK(scaled.item() == doctest::Approx(loss.item() * 65536.0));
  scaled.backward();
  CHECK(w.grad().to_vector() == std::vector<double>{3.0 * 65536, 1.0 * 65536, -4.0 * 65536});
  scaler.unscale(*opt);
  CHECK(w.grad().to_vector() == std::vector<double>{3.0, 1.0, -4.0});  // powers of two: exact
  CHECK_FALSE(scaler.found_inf());
  CHECK_THROWS_WITH_AS(scaler.unscale(*opt), doctest::Contains("already called"), Error);
  CHECK(scaler.step(*opt));  // no second unscale
  scaler.update();
  CHECK_CLOSE(w, vec({1.0 - 0.3, -2.0 - 0.1, 0.5 + 0.4}), 0, 1e-7);
  CHECK(scaler.get_scale() == 65536.0);
  CHECK(scaler.growth_tracker() == 1);
}

TEST_CASE("GradScaler skips a step with inf or NaN gradients and backs off; grows after the interval") {
  amp::GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 3;
  amp::GradScaler scaler(o);
  auto opt = optim::sgd(one_param({1.0, 2.0}), {0.5});
  Tensor w = opt->params()[0].second;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  for (double bad : {inf, -inf, nan}) {
    w.set_grad(vec({1.0, bad}));
    const double before = scaler.get_scale();
    CHECK_FALSE(scaler.step(*opt));
    CHECK(scaler.found_inf());
    scaler.update();
    CHECK(scaler.get_scale() == before * 0.5);
    CHECK(w.to_vector() == std::vector<double>{1.0, 2.0});  // untouched
    CHECK(opt->steps() == 0);
  }
  CHECK(scaler.get_scale() == 128);
  for (int i = 0; i < 3; ++i) {
    w.set_grad(vec({128.0, 256.0}));
    CHECK(scaler.step(*opt));
    scaler.update();
  }
  CHECK(scaler.get_scale() == 256);  // grown once after 3 clean steps
  CHECK(scaler.growth_tracker() == 0);
  CHECK_CLOSE(w, vec({1.0 - 1.5, 2.0 - 3.0}), 0, 1e-7);
  CHECK_THROWS_WITH_AS(scaler.update(), doctest::Contains("no unscale"), Error);
}

TEST_CASE("GradScaler state round trip, validation, and the disabled scaler") {
  amp::GradScalerOptions o;
  o.init_scale = 8;
  o.growth_interval = 5;
  amp::GradScaler a(o);
  auto opt = optim::sgd(one_param({1.0}), {0.1});
  Tensor(opt->params()[0].second).set_grad(vec({8.0}));
  a.step(*opt);
  a.update();
  amp::GradScaler b;
  b.load_state(a.state_json());
  CHECK(b.get_scale() == 8);
  CHECK(b.growth_tracker() == 1);
  CHECK_THROWS_WITH_AS(b.load_state("{\"scale\": -1, \"growth_tracker\": 0}"), doctest::Contains("not finite"), Error);
  CHECK_THROWS_WITH_AS(b.load_state("{}"), doctest::Contains("bad state"), Error);
  o.init_scale = 0;
  CHECK_THROWS_WITH_AS(amp::GradScaler{o}, doctest::Contains("init_scale"), Error);

  amp::GradScalerOptions off;
  off.enabled = false;
  amp::GradScaler d(off);
  Tensor l = vec({2.0});
  CHECK(d.scale(l).item() == 2.0);
  Tensor(opt->params()[0].second).set_grad(vec({std::numeric_limits<double>::infinity()}));
  CHECK(d.step(*opt));  // disabled: no check, as torch's enabled=False
}
