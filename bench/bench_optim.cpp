// Micro-benchmark of the optimizer family: one SGD-with-momentum, Adam and LARS step over a
// parameter set the size of mnist-cnn (1.2 M floats in 8 tensors) and of ResNet-50 (25.6 M in
// one), native against ref, with the effective bandwidth against the bytes each update must move
// (SGD momentum: p, g, buf read + p, buf written = 5 x 4 B per element; Adam: 7 x 4 B).
//   cmake --build build --target bench_optim && KILN_NUM_THREADS=2 build/bench/bench_optim
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "engine/dispatch.h"
#include "engine/optim.h"
#include "engine/random.h"
#include "kernels/common/parallel.h"

using namespace kiln;

static double time_ms(const std::function<void()>& f, int reps = 21) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto a = std::chrono::steady_clock::now();
    f();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static NamedTensors make_params(const std::vector<Shape>& shapes) {
  NamedTensors ps;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor p = randn(shapes[i]).requires_grad_();
    p.set_grad(randn(shapes[i]));
    ps.emplace_back("p" + std::to_string(i), p);
  }
  return ps;
}

int main() {
  std::printf("threads %d\n", num_threads());
  const std::vector<std::pair<const char*, std::vector<Shape>>> sets = {
      {"mnist-cnn 1.2M", {{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {128, 9216}, {128}, {10, 128}, {10}}},
      {"resnet50-size 25.6M", {{25557032}}}};
  for (auto& [label, shapes] : sets) {
    NamedTensors ps = make_params(shapes);
    double n = 0;
    for (auto& [k, p] : ps) n += double(p.numel());
    for (const char* backend : {"native", "ref"}) {
      BackendGuard g(backend, true);
      struct Case { const char* name; std::unique_ptr<optim::Optimizer> opt; double bytes_per; };
      Case cases[] = {{"sgd momentum", optim::sgd(ps, {0.01, 0.9}), 20},
                      {"adam", optim::adam(ps, {}), 28},
                      {"lars", optim::lars(ps, {}), 28}};
      for (auto& c : cases) {
        const double ms = time_ms([&] { c.opt->step(); });
        std::printf("%-20s %-7s %-13s %8.3f ms  %6.1f GB/s\n", label, backend, c.name, ms,
                    n * c.bytes_per / (ms * 1e-3) / 1e9);
      }
    }
  }
}
