// Convolution micro-benchmark: GFLOP/s of forward, backward-data and backward-weights (each
// 2*N*K*P*Q*(C/g)*R*S flops per pass) for layers given as benchdnn-style problem strings, the
// median of --reps timed runs after one warm-up, on the dispatcher's choice for --backend.
//   cmake --build build --target bench_conv && build/bench/bench_conv
//   build/bench/bench_conv --reps 7 --threads 2 --backend native mb16ic64ih56oc64oh56kh3ph1
//   build/bench/bench_conv --threads 1 --cpu-clock --layout nhwc ...   # CPU time: a busy machine's figure
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "engine/dispatch.h"
#include "kernels/common/conv.h"
#include "kernels/common/half.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"

using namespace kiln;

namespace {

std::vector<float> random_buffer(int64_t n, uint64_t seed) {
  std::vector<float> v(size_t(std::max<int64_t>(n, 1)));
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (auto& x : v) {  // xorshift: the values only need to be non-trivial
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = float(int64_t(s % 2001) - 1000) / 1000.f;
  }
  return v;
}

// Wall time, or with cpu_clock the process's CPU time (all threads): on a shared machine a
// one-thread run's CPU time is what the kernel cost, whatever else ran beside it.
bool g_cpu_clock = false;
double now_ms() {
  if (!g_cpu_clock)
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double median_ms(int reps, const std::function<void()>& f) {
  f();  // warm-up: page faults, allocator, dispatch cache
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::string backend = "native";
  bool nhwc = false;
  DType dtype = DType::float32;
  std::vector<std::string> problems;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc) set_num_threads(std::atoi(argv[++i]));
    else if (a == "--backend" && i + 1 < argc) backend = argv[++i];
    else if (a == "--layout" && i + 1 < argc) nhwc = std::string(argv[++i]) == "nhwc";
    else if (a == "--cpu-clock") g_cpu_clock = true;
    else if (a == "--direct-tuning" && i + 1 < argc) {  // batch_bytes,panel_bytes,item_pixels
      native::ConvDirectTuning t{};
      if (std::sscanf(argv[++i], "%ld,%ld,%ld", &t.batch_bytes, &t.panel_bytes, &t.item_pixels) != 3) {
        std::fprintf(stderr, "bench_conv: --direct-tuning BATCH_BYTES,PANEL_BYTES,ITEM_PIXELS\n");
        return 2;
      }
      native::set_conv_direct_tuning(t);
    }
    else if (a == "--dtype" && i + 1 < argc) {
      const std::string t = argv[++i];
      if (t != "float32" && t != "bfloat16") {
        std::fprintf(stderr, "bench_conv: --dtype float32 or bfloat16, not '%s'\n", t.c_str());
        return 2;
      }
      dtype = t == "bfloat16" ? DType::bfloat16 : DType::float32;
    }
    else if (a == "-h" || a == "--help") {
      std::printf("usage: bench_conv [--reps N] [--threads T] [--backend native|onednn|ref] [--layout nchw|nhwc] [--dtype float32|bfloat16] [--cpu-clock] [--direct-tuning B,P,I] [problem ...]\n");
      return 0;
    } else problems.push_back(a);
  }
  if (problems.empty())
    problems = {
        "mb16ic64ih27oc192oh27kh5ph2",   // AlexNet conv2
        "mb16ic64ih56oc64oh56kh3ph1",    // ResNet-50 res2 3x3
        "mb16ic256ih56oc64oh56kh1ph0",   // ResNet-50 res2 1x1 reduce
        "mb1ic64ih56oc64oh56kh3ph1",     // the 3x3 at batch 1 (parallel GEMM path)
        "g32mb16ic32ih56oc32oh56kh3ph1", // depthwise 3x3
    };
  BackendGuard guard(backend);
  std::printf("bench_conv: backend %s, %s, %s, %d threads, median of %d\n", backend.c_str(), dtype_name(dtype),
              nhwc ? "nhwc" : "nchw", num_threads(), reps);
  std::printf("%-34s %-9s %10s %10s\n", "problem", "pass", "ms", "GFLOP/s");
  try {
    for (const std::string& p : problems) {
      ConvDesc d = parse_conv_problem(p, dtype, /*has_bias=*/true);
      d.nhwc = nhwc;
      std::vector<float> src = random_buffer(d.src_elems(), 1), wei = random_buffer(d.wei_elems(), 2),
                         bias = random_buffer(d.K, 3), dst(size_t(d.dst_elems())),
                         diff_dst = random_buffer(d.dst_elems(), 4), diff_src(size_t(d.src_elems())),
                         diff_wei(size_t(d.wei_elems())), diff_bias(size_t(d.K));
      if (dtype == DType::bfloat16)  // the same values as bfloat16, packed at the front of each buffer
        for (std::vector<float>* v : {&src, &wei, &diff_dst}) {
          std::vector<uint16_t> h(v->size());
          for (size_t i = 0; i < v->size(); ++i) h[i] = BFloat16((*v)[i]).bits;
          std::memcpy(v->data(), h.data(), h.size() * sizeof(uint16_t));
        }
      auto& fwd = op_table<kernel_op::conv2d_fwd>();
      auto& bwd_d = op_table<kernel_op::conv2d_bwd_data>();
      auto& bwd_w = op_table<kernel_op::conv2d_bwd_weights>();
      const auto cpu = DeviceType::cpu;
      struct Pass {
        const char* name;
        std::function<void()> run;
      };
      std::vector<Pass> passes = {
          {"fwd", [&] { fwd(cpu, d, src.data(), wei.data(), bias.data(), dst.data()); }},
          {"bwd_d", [&] { bwd_d(cpu, d, diff_dst.data(), wei.data(), diff_src.data()); }},
          {"bwd_w", [&] { bwd_w(cpu, d, src.data(), diff_dst.data(), diff_wei.data(), diff_bias.data()); }},
      };
      for (const Pass& pass : passes) {
        const double ms = median_ms(reps, pass.run);
        std::printf("%-34s %-9s %10.2f %10.1f\n", p.c_str(), pass.name, ms, d.flops() / ms * 1e-6);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_conv: %s\n", e.what());
    return 1;
  }
  return 0;
}
