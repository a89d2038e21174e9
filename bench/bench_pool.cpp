// Pool and shape op timings on CNN-sized float32 tensors, native against ref, forward and
// forward+backward, with the bytes each pass must move and the achieved GB/s (these ops are
// memory bound: the floor is about 28 GB/s STREAM triad on this 2-core machine).
//   cmake --build build -j2 --target bench_pool && ./build/bench/bench_pool [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/random.h"

using namespace kiln;

namespace {

// Best of `reps` runs after a warm-up: the machine is shared, so the minimum is the figure that
// reflects the kernel rather than the neighbours.
double seconds(const std::function<void()>& f, int reps) {
  f();  // warm up (allocator, page faults)
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

struct Bench {
  const char* name;
  Shape shape;
  std::function<Tensor(const Tensor&)> op;
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  std::vector<Bench> benches = {
      {"max_pool2d 3x3 s2 (AlexNet pool1)", {32, 96, 55, 55},
       [](const Tensor& x) { return ops::max_pool2d(x, {3, 3}, {2, 2}); }},
      {"  same, forward with indices", {32, 96, 55, 55},
       [](const Tensor& x) { return ops::max_pool2d_with_indices(x, {3, 3}, {2, 2}).values; }},
      {"max_pool2d 2x2 s2 (VGG)", {32, 128, 112, 112}, [](const Tensor& x) { return ops::max_pool2d(x, {2, 2}); }},
      {"max_pool2d 3x3 s2 p1 ceil (GoogLeNet)", {32, 192, 56, 56},
       [](const Tensor& x) { return ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true); }},
      {"avg_pool2d 3x3 s1 p1 (Inception)", {32, 192, 28, 28},
       [](const Tensor& x) { return ops::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}); }},
      {"adaptive_avg_pool2d 7x7->1 (ResNet)", {32, 2048, 7, 7},
       [](const Tensor& x) { return ops::adaptive_avg_pool2d(x, {1, 1}); }},
      {"local_response_norm 5 (AlexNet)", {32, 96, 55, 55},
       [](const Tensor& x) { return ops::local_response_norm(x, 5, 1e-4, 0.75, 2.0); }},
      {"upsample_bilinear2d x2", {8, 64, 64, 64},
       [](const Tensor& x) { return ops::upsample_bilinear2d(x, {128, 128}, false); }},
      {"upsample_nearest2d x2", {8, 64, 64, 64}, [](const Tensor& x) { return ops::upsample_nearest2d(x, 2.0, 2.0); }},
      {"pad reflect 1", {8, 64, 128, 128}, [](const Tensor& x) { return ops::pad(x, {1, 1, 1, 1}, PadMode::reflect); }},
      {"cat dim 1", {32, 128, 28, 28},
       [](const Tensor& x) { return ops::cat({x, x}, 1); }},
  };
  std::printf("%-40s %-18s %9s %9s %8s %9s %9s %7s\n", "op", "input", "fwd ms", "GB/s", "ref ms", "f+b ms",
              "ref f+b", "x ref");
  for (const Bench& b : benches) {
    Tensor x = empty(b.shape);
    uniform_(x, -1, 1);
    Tensor y;
    {
      NoGradGuard ng;
      y = b.op(x);
    }
    Tensor g = ones_like(y);
    const double bytes = double(x.numel() + y.numel()) * 4;
    auto fwd = [&] {
      NoGradGuard ng;
      b.op(x);
    };
    auto fb = [&] {
      Tensor xr = x.detach().requires_grad_(true);
      b.op(xr).backward(g);
    };
    double tn, tr, fbn, fbr;
    {
      BackendGuard bg("native");
      tn = seconds(fwd, reps);
      fbn = seconds(fb, reps);
    }
    {
      BackendGuard bg("ref");
      tr = seconds(fwd, 1);
      fbr = seconds(fb, 1);
    }
    std::printf("%-40s %-18s %9.2f %9.1f %8.1f %9.2f %9.1f %6.1fx\n", b.name, shape_str(b.shape).c_str(), tn * 1e3,
                bytes / tn * 1e-9, tr * 1e3, fbn * 1e3, fbr * 1e3, fbr / fbn);
  }
  return 0;
}
