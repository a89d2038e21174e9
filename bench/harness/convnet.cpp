#include "bench/harness/convnet.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/random.h"
#include "kernels/common/parallel.h"
#include "nets/zoo.h"

using kiln::nets::NetOptions;

namespace kiln::bench {

RunResult run(const RunSpec& spec) {
  const nets::NetInfo& info = nets::find(spec.model);
  ModulePtr net = info.build(NetOptions{});
  return run(*net, info.input, spec);
}

RunResult run(Module& net, const Shape& input, const RunSpec& spec) {
  KILN_CHECK(spec.batch > 0 && spec.iters > 0 && spec.warmup >= 0, "bench: batch and iters must be positive (batch ",
             spec.batch, ", iters ", spec.iters, ", warmup ", spec.warmup, ")");
  if (spec.threads > 0) set_num_threads(spec.threads);
  BackendGuard backend(spec.backend == "auto" ? "" : spec.backend);
  Shape shape = input;
  shape.insert(shape.begin(), spec.batch);
  Generator gen(1234);
  Tensor x = randn(shape, {}, &gen);
  net.train(spec.train);
  Tensor grad_out;

  auto step = [&] {
    if (spec.train) {
      Tensor y = net(x);
      if (!grad_out.defined()) grad_out = randn(y.sizes(), {}, &gen);
      y.backward(grad_out);
      net.zero_grad();
    } else {
      NoGradGuard ng;
      Tensor y = net(x);
    }
  };
  for (int i = 0; i < spec.warmup; ++i) step();
  CpuAllocator::instance().reset_peak();
  RunResult r;
  r.spec = spec;
  r.threads = num_threads();
  for (int i = 0; i < spec.iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    auto t1 = std::chrono::steady_clock::now();
    r.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::vector<double> s = r.ms;
  std::sort(s.begin(), s.end());
  r.ms_min = s.front();
  r.ms_max = s.back();
  r.ms_median = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  r.images_per_s = double(spec.batch) * 1000.0 / r.ms_median;
  r.peak_bytes = CpuAllocator::instance().stats().peak;
  return r;
}

std::string table_header() {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %-6s %-8s %6s %-8s %3s %9s %9s %9s %10s %9s", "model", "device", "backend",
                "batch", "mode", "thr", "ms min", "ms median", "ms max", "images/s", "peak MiB");
  return buf;
}

std::string table_row(const RunResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %-6s %-8s %6lld %-8s %3d %9.2f %9.2f %9.2f %10.1f %9.1f", r.spec.model.c_str(),
                "cpu", r.spec.backend.c_str(), static_cast<long long>(r.spec.batch),
                r.spec.train ? "train" : "forward", r.threads, r.ms_min, r.ms_median, r.ms_max, r.images_per_s,
                double(r.peak_bytes) / (1 << 20));
  return buf;
}

}  // namespace kiln::bench
