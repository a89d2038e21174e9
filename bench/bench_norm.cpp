// Micro-benchmark of the norm and loss families on the native backend: batch norm (training,
// forward and forward+backward) on a ResNet-like activation, softmax, cross-entropy, dropout.
// Prints ms per call (median of reps) and the effective bandwidth against the bytes each op
// must move at least (STREAM triad on the 2-core dev box is about 28 GB/s).
//   cmake --build build --target bench_norm && KILN_NUM_THREADS=2 build/bench/bench_norm
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "engine/random.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/norm.h"

using namespace kiln;

static double time_ms(const std::function<void()>& f, int reps = 7) {
  f();  // warm-up: allocator cache, page faults
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

static void report(const char* name, double ms, double bytes) {
  std::printf("%-44s %8.3f ms  %6.1f GB/s (min bytes %.0f MB)\n", name, ms, bytes / (ms * 1e-3) / 1e9, bytes / 1e6);
}

int main() {
  BackendGuard g("native");
  std::printf("threads %d\n", num_threads());
  {
    const Shape s{32, 64, 56, 56};
    Tensor x = rand(s), w = ones({64}), b = zeros({64}), rm = zeros({64}), rv = ones({64});
    const double n = double(shape_numel(s)) * 4;
    // The elementwise x * 2 (one read, one write) measured the same way: the yardstick on a
    // shared machine whose bandwidth varies with the neighbours' load.
    report("reference: x * 2 [32,64,56,56]", time_ms([&] {
             NoGradGuard ng;
             ops::mul(x, 2.0);
           }), 2 * n);
    report("batch_norm fwd train [32,64,56,56]", time_ms([&] {
             NoGradGuard ng;
             ops::batch_norm(x, w, b, rm, rv, true);
           }), 3 * n);  // read twice (stats, normalise), write once
    Tensor xr = x.detach().requires_grad_(true), dy = rand(s);
    report("batch_norm fwd+bwd train [32,64,56,56]", time_ms([&] {
             xr.set_grad(Tensor());  // no accumulation into last rep's gradient
             Tensor y = ops::batch_norm(xr, w, b, rm, rv, true);
             y.backward(dy);
           }), 8 * n);  // fwd 3 + bwd 5 (x, dy twice each, dx once)
    {  // the kernels alone, without op-wrapper allocation and autograd
      BatchNormDesc d;
      d.N = 32; d.C = 64; d.S = 56 * 56;
      Tensor y = empty(s), sm = empty({64}), si = empty({64}), dx = empty(s), dw = empty({64}), db = empty({64});
      report("  kernel native::batch_norm_fwd", time_ms([&] {
               native::batch_norm_fwd(d, x.data_ptr(), w.data_ptr(), b.data_ptr(), rm.data_ptr(), rv.data_ptr(),
                                      y.data_ptr(), sm.data_ptr(), si.data_ptr());
             }), 3 * n);
      report("  kernel native::batch_norm_bwd", time_ms([&] {
               native::batch_norm_bwd(d, x.data_ptr(), dy.data_ptr(), w.data_ptr(), sm.data_ptr(), si.data_ptr(),
                                      dx.data_ptr(), dw.data_ptr(), db.data_ptr());
             }), 5 * n);
    }
    Tensor x2 = rand({8192, 1024});
    report("batch_norm fwd train [8192,1024]", time_ms([&] {
             NoGradGuard ng;
             ops::batch_norm(x2, Tensor(), Tensor(), Tensor(), Tensor(), true);
           }), 3 * 8192.0 * 1024 * 4);
  }
  {
    Tensor x = rand({256, 1000}, {}, nullptr);
    const double n = 256.0 * 1000 * 4;
    report("softmax fwd [256,1000] dim 1", time_ms([&] {
             NoGradGuard ng;
             ops::softmax(x, 1);
           }), 2 * n);
    Tensor x4 = rand({16, 21, 64, 64});
    report("log_softmax fwd [16,21,64,64] dim 1", time_ms([&] {
             NoGradGuard ng;
             ops::log_softmax(x4, 1);
           }), 2 * 16.0 * 21 * 64 * 64 * 4);
    std::vector<double> tv(256);
    for (int i = 0; i < 256; ++i) tv[size_t(i)] = (i * 37) % 1000;
    Tensor t = from_vector(tv, {256}, TensorOptions(DType::int64));
    Tensor xr = x.detach().requires_grad_(true);
    report("cross_entropy fwd+bwd [256,1000] smoothing 0.1", time_ms([&] {
             Tensor l = ops::cross_entropy(xr, t, Reduction::mean, 0.1);
             l.backward();
           }), 3 * n);
  }
  {
    Tensor x = rand({64, 4096 * 4});
    Generator gen(1);
    const double n = 64.0 * 4096 * 4 * 4;
    report("dropout fwd p=0.5 [64,16384]", time_ms([&] {
             NoGradGuard ng;
             ops::dropout(x, 0.5, true, &gen);
           }), 2 * n + n / 4);  // read, write, mask bytes
  }
  return 0;
}
