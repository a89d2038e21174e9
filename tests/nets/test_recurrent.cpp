// The recurrent nets of the zoo (nets/recurrent.cpp): parameter counts (as PyTorch counts its
// twins in bench/baselines/pytorch_bench.py), output shapes, options, and a few steps of SGD on a
// fixed batch of a smooth series lowering the forecaster's MSE.
//   ctest --test-dir build -R nets.test_recurrent
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "nets/zoo.h"

using namespace kiln;

TEST_CASE("recurrent zoo nets: parameters and output shapes") {
  manual_seed(1);
  const std::vector<std::pair<std::string, int64_t>> counts = {
      {"lstm-forecast", 17859},     {"gru-forecast", 13443},       {"lstm-h1024-t25", 8396800},
      {"lstm-h1536-t50", 18886656}, {"gru-h512-t1500", 1575936},   {"gru-h2816-t375", 47596032}};
  for (const auto& count : counts) {
    const std::string& name = count.first;  // a structured binding cannot be captured in C++17
    const int64_t n = count.second;
    CAPTURE(name);
    CHECK(nets::find(name).parameters == n);
    if (n < 2000000) CHECK(nets::build(name)->num_parameters() == n);
  }
  ModulePtr f = nets::build("gru-forecast");
  CHECK((*f)(randn({5, 6, 3})).sizes() == Shape{5, 3});
  nets::NetOptions o;
  o.in_channels = 4;
  o.classes = 1;
  o.width = 8;
  o.depth = 2;
  ModulePtr g = nets::build("lstm-forecast", o);
  CHECK((*g)(randn({2, 9, 4})).sizes() == Shape{2, 1});
  ModulePtr seq = nets::build("gru-h512-t1500");
  CHECK((*seq)(randn({1, 3, 512})).sizes() == Shape{1, 3, 512});
  o = {};
  o.width = 3;
  CHECK_THROWS_KILN(nets::build("lstm-h1024-t25", o), "a DeepBench shape takes no size options");
  o = {};
  o.image_size = 32;
  CHECK_THROWS_KILN(nets::build("gru-forecast", o), "image_size does not apply to a sequence net");
}

TEST_CASE("the forecaster learns a smooth series: SGD lowers the MSE on a fixed batch") {
  manual_seed(2);
  ModulePtr net = nets::build("lstm-forecast");
  // Windows of three phase-shifted sines; the target is the next step.
  const int64_t N = 16, L = 6;
  std::vector<double> xv, yv;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t t = 0; t <= L; ++t)
      for (int64_t c = 0; c < 3; ++c) {
        const double v = std::sin(0.3 * double(n + t) + double(c));
        (t < L ? xv : yv).push_back(v);
      }
  }
  const Tensor x = from_vector(xv, {N, L, 3}), y = from_vector(yv, {N, 3});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    Tensor loss = ops::mse_loss((*net)(x), y);
    if (step == 0) first = loss.item();
    last = loss.item();
    net->zero_grad();
    loss.backward();
    NoGradGuard ng;
    for (Tensor& p : net->parameters()) p.copy_(p - p.grad() * 0.5);
  }
  CHECK(last < first * 0.3);
}
