// Micro-benchmark of the optimizer family: one SGD-with-momentum, Adam and LARS step over the
// parameter list of mnist-cnn (1.2 M floats in 8 tensors), of ResNet-50 (25.6 M in 161 tensors,
// from 64 to 2.4 M elements: the zoo net's own list) and of one ResNet-50-sized tensor, native
// against ref, each both ways: one call per parameter ("per-tensor") and one multi-tensor call per
// group ("multi", Optimizer::set_multi_tensor). The two ways run interleaved, medians of the
// repeats (timings move while others compile). Effective bandwidth against the bytes each update
// must move (SGD momentum: p, g, buf read + p, buf written = 5 x 4 B per element; Adam: 7 x 4 B).
//   cmake --build build --target bench_optim && KILN_NUM_THREADS=2 build/bench/bench_optim [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/optim.h"
#include "engine/optim.h"
#include "engine/random.h"
#include "kernels/common/parallel.h"
#include "nets/zoo.h"

using namespace kiln;

namespace {

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Medians of a and b, run alternately after one warm-up each.
std::pair<double, double> time_pair_ms(const std::function<void()>& a, const std::function<void()>& b, int reps) {
  a();
  b();
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < 2; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      (k == 0 ? a : b)();
      const auto t1 = std::chrono::steady_clock::now();
      (k == 0 ? ta : tb).push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  return {median(ta), median(tb)};
}

NamedTensors with_grads(const std::vector<Shape>& shapes) {
  NamedTensors ps;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor p = randn(shapes[i]).requires_grad_();
    p.set_grad(randn(shapes[i]));
    ps.emplace_back("p" + std::to_string(i), p);
  }
  return ps;
}

std::vector<Shape> resnet50_shapes() {
  std::vector<Shape> s;
  for (auto& [n, p] : nets::build("resnet50")->named_parameters()) s.push_back(p.sizes());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::printf("threads %d; per-tensor and multi interleaved, medians\n", num_threads());
  const std::vector<std::pair<const char*, std::vector<Shape>>> sets = {
      {"mnist-cnn 1.2M", {{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {128, 9216}, {128}, {10, 128}, {10}}},
      {"resnet50 list", resnet50_shapes()},
      {"resnet50-size 1 tensor", {{25557032}}}};
  std::printf("%-22s %-7s %-13s %8s %12s %12s %9s %9s %7s\n", "params", "backend", "optimizer", "tensors",
              "per-tensor", "multi", "GB/s", "GB/s", "calls");
  for (auto& [label, shapes] : sets) {
    NamedTensors ps = with_grads(shapes);
    double n = 0;
    for (auto& [k, p] : ps) n += double(p.numel());
    for (const char* backend : {"native", "ref"}) {
      if (quick && std::strcmp(backend, "ref") == 0) continue;
      BackendGuard g(backend, true);
      const int reps = std::strcmp(backend, "ref") == 0 ? 3 : (quick ? 5 : 21);
      struct Case {
        const char* name;
        std::unique_ptr<optim::Optimizer> per, multi;
        double bytes_per;
      };
      Case cases[] = {{"sgd momentum", optim::sgd(ps, {0.01, 0.9}), optim::sgd(ps, {0.01, 0.9}), 20},
                      {"adam", optim::adam(ps, {}), optim::adam(ps, {}), 28},
                      {"lars", optim::lars(ps, {}), optim::lars(ps, {}), 28}};
      for (auto& c : cases) {
        c.per->set_multi_tensor(false);
        c.multi->set_multi_tensor(true);
        const auto [per_ms, multi_ms] = time_pair_ms([&] { c.per->step(); }, [&] { c.multi->step(); }, reps);
        const int64_t c0 = ops::optim_update_calls();
        c.multi->step();
        const int64_t calls = ops::optim_update_calls() - c0;
        std::printf("%-22s %-7s %-13s %8zu %9.3f ms %9.3f ms %9.1f %9.1f %7lld\n", label, backend, c.name, ps.size(),
                    per_ms, multi_ms, n * c.bytes_per / (per_ms * 1e-3) / 1e9,
                    n * c.bytes_per / (multi_ms * 1e-3) / 1e9, static_cast<long long>(calls));
      }
    }
  }
}
