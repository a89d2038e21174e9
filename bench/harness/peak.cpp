// FMA peak and triad bandwidth; see peak.h. The ISA loops live in peak_<isa>.cpp.
#include "bench/harness/peak.h"

#include <unistd.h>
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>

#include "bench/harness/peak_kernels.h"
#include "engine/error.h"
#include "kernels/cpu/native/cpu_features.h"

namespace kiln::bench {

namespace peak_detail {

// Plain float loops the compiler vectorises for the build's own target (SSE2 on x86-64, VSX on
// POWER8, NEON on ARM64); 16 x 8 independent chains.
float fma_portable(int64_t steps, float a, float b) {
  float c[16][8];
  for (int k = 0; k < 16; ++k)
    for (int l = 0; l < 8; ++l) c[k][l] = float(k + l) / 16;  // dyadic: count_flops_per_step is exact
  for (int64_t i = 0; i < steps; ++i)
    for (int k = 0; k < 16; ++k)
      for (int l = 0; l < 8; ++l) c[k][l] = c[k][l] * a + b;
  float s = 0;
  for (int k = 0; k < 16; ++k)
    for (int l = 0; l < 8; ++l) s += c[k][l];
  return s;
}

}  // namespace peak_detail

namespace {

using Clock = std::chrono::steady_clock;
namespace pd = peak_detail;

struct Loop {
  float (*fn)(int64_t, float, float);
  double flops_per_step;
};
// The measurement's chain constants: a < 1, so every chain converges (peak_kernels.h).
constexpr float kA = 0.999999f, kB = 1e-6f;

Loop loop_of(const std::string& isa) {
  const std::vector<std::string> have = peak_isas();
  std::string list;
  for (const std::string& h : have) list += (list.empty() ? "" : ", ") + h;
  KILN_CHECK(std::find(have.begin(), have.end(), isa) != have.end(), "peak: no '", isa,
             "' multiply-add loop on this CPU and build (have: ", list, ")");
  if (isa == "avx512_bf16") return {pd::dpbf16_avx512, pd::kFlopsPerStepAvx512Bf16};
  if (isa == "avx512") return {pd::fma_avx512, pd::kFlopsPerStepAvx512};
  if (isa == "avx2") return {pd::fma_avx2, pd::kFlopsPerStepAvx2};
  return {pd::fma_portable, pd::kFlopsPerStepPortable};
}

#ifdef __linux__
// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Pins the calling thread to one CPU for its lifetime in the team; the caller's own thread gets
// its mask back when the team ends (PinScope's destructor).
struct PinScope {
  cpu_set_t saved;
  bool pinned = false;
  PinScope(int cpu, bool restore) {
    if (cpu < 0) return;
    if (restore && pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0 && restore;
  }
  ~PinScope() {
    if (pinned) pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  }
};
#else
std::vector<int> allowed_cpus() { return {}; }
struct PinScope {
  PinScope(int, bool) {}
};
#endif

// Runs body(tid) on `threads` threads released together; returns the seconds from the first
// start to the last finish of body. Where the process may use at least `threads` CPUs, thread t
// runs pinned to the t-th of them: left to the scheduler, a new thread can start on its parent's
// core and stay there for a whole 20 ms repeat while the other core idles (seen on a 2-vCPU
// virtual machine: 2-thread figures of exactly one core's, in every repeat of a process).
double run_team(int threads, const std::function<void(int)>& body, const std::function<void(int)>& setup = nullptr) {
  std::atomic<int> ready{0};
  std::vector<Clock::time_point> t0(static_cast<size_t>(threads)), t1(static_cast<size_t>(threads));
  const std::vector<int> cpus = allowed_cpus();
  const bool pin = int(cpus.size()) >= threads;
  auto work = [&](int tid) {
    const PinScope scope(pin ? cpus[size_t(tid)] : -1, tid == 0);
    if (setup) setup(tid);
    ready.fetch_add(1);
    while (ready.load() < threads) std::this_thread::yield();  // more threads than cores must still start
    t0[size_t(tid)] = Clock::now();
    body(tid);
    t1[size_t(tid)] = Clock::now();
  };
  std::vector<std::thread> team;
  for (int t = 1; t < threads; ++t) team.emplace_back(work, t);
  work(0);
  for (std::thread& t : team) t.join();
  const auto first = *std::min_element(t0.begin(), t0.end());
  const auto last = *std::max_element(t1.begin(), t1.end());
  return std::chrono::duration<double>(last - first).count();
}

// The best of the repeats: a rate is a ceiling, and whatever else runs on the machine (another
// process, the hypervisor, a core still clocking up) only ever lowers it. A median of three 20 ms
// repeats once read 117 GFLOP/s for a 2-thread peak of 233 on a virtual machine: one core had
// been taken away for most of the 60 ms.
double best(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

std::atomic<float> g_sink{0};  // keeps every loop's result live

// The largest cache of cpu0 from sysfs (what lscpu reads), else glibc's answer, clamped to
// [8 MiB, 512 MiB]: some virtual machines give glibc ten times the real L3 (320 MiB for a 32 MiB
// one), and arrays sized from that would make the quick measurement take seconds.
int64_t last_level_cache_bytes() {
  int64_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    int64_t v = 0;
    std::string unit;
    if (!(in >> v)) continue;
    in >> unit;
    if (unit == "K") v <<= 10;
    else if (unit == "M") v <<= 20;
    best = std::max(best, v);
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (best <= 0) best = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  if (best <= 0) best = int64_t(32) << 20;
  return std::min<int64_t>(std::max<int64_t>(best, int64_t(8) << 20), int64_t(512) << 20);
}

struct AlignedFree {
  void operator()(double* p) const { std::free(p); }
};

}  // namespace

PeakConfig quick_peak_config() {
  PeakConfig c;
  c.fma_seconds = 0.02;
  c.fma_repeats = 5;
  c.array_bytes = std::max<int64_t>(last_level_cache_bytes(), int64_t(32) << 20);  // 3 arrays: 3 x L3
  c.bw_repeats = 3;
  return c;
}

PeakConfig full_peak_config() { return PeakConfig{}; }

std::vector<std::string> peak_isas() {
  std::vector<std::string> v;
  if (pd::built_avx512_bf16() && native::has_avx512_bf16()) v.push_back("avx512_bf16");
  if (pd::built_avx512() && native::has_avx512f()) v.push_back("avx512");
  if (pd::built_avx2() && native::has_avx2()) v.push_back("avx2");
  v.push_back("portable");
  return v;
}

std::string best_fma_isa() {
  for (const std::string& isa : peak_isas())
    if (isa != "avx512_bf16") return isa;
  return "portable";
}

std::string best_bf16_isa() { return peak_isas().front(); }

double measure_fma_gflops(const std::string& isa, int threads, const PeakConfig& cfg) {
  KILN_CHECK(threads >= 1, "peak: threads must be at least 1, got ", threads);
  KILN_CHECK(cfg.fma_seconds > 0 && cfg.fma_repeats >= 1, "peak: fma_seconds and fma_repeats must be positive");
  const Loop loop = loop_of(isa);
  // Steps for cfg.fma_seconds, from a short run on this thread (its clock ramps up meanwhile).
  int64_t steps = 1 << 14;
  for (;;) {
    const auto t0 = Clock::now();
    g_sink.store(loop.fn(steps, kA, kB), std::memory_order_relaxed);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0.004 || steps > (int64_t(1) << 40)) {
      steps = std::max<int64_t>(1, int64_t(double(steps) * cfg.fma_seconds / std::max(s, 1e-9)));
      break;
    }
    steps *= 4;
  }
  std::vector<double> gflops;
  for (int r = 0; r < cfg.fma_repeats; ++r) {
    const double s = run_team(threads, [&](int) { g_sink.store(loop.fn(steps, kA, kB), std::memory_order_relaxed); });
    gflops.push_back(double(threads) * double(steps) * loop.flops_per_step / s * 1e-9);
  }
  return best(gflops);
}

double flops_per_step(const std::string& isa) { return loop_of(isa).flops_per_step; }

double count_flops_per_step(const std::string& isa) {
  const Loop loop = loop_of(isa);
  // Each lane adds 2^-20 a step (a = 1): 1024 and 2048 steps keep every chain exact in float32.
  const int64_t steps = 1024;
  const float b = 0x1p-20f;
  const double diff = double(loop.fn(2 * steps, 1.0f, b)) - double(loop.fn(steps, 1.0f, b));
  return 2.0 * diff / (double(steps) * double(b));
}

double measure_bandwidth_gbs(int threads, const PeakConfig& cfg) {
  KILN_CHECK(threads >= 1, "peak: threads must be at least 1, got ", threads);
  KILN_CHECK(cfg.bw_repeats >= 1, "peak: bw_repeats must be positive");
  const int64_t bytes = cfg.array_bytes > 0 ? cfg.array_bytes : std::max<int64_t>(4 * last_level_cache_bytes(), int64_t(64) << 20);
  const int64_t n = bytes / int64_t(sizeof(double));
  KILN_CHECK(n >= threads, "peak: arrays of ", bytes, " bytes are too small for ", threads, " threads");
  auto alloc = [&] {
    void* p = std::aligned_alloc(64, size_t((n * int64_t(sizeof(double)) + 63) / 64 * 64));
    KILN_CHECK(p, "peak: cannot allocate ", bytes, " bytes for the triad arrays");
    return std::unique_ptr<double, AlignedFree>(static_cast<double*>(p));
  };
  auto a = alloc(), b = alloc(), c = alloc();
  double* pa = a.get();
  double* pb = b.get();
  double* pc = c.get();
  auto slice = [&](int tid, int64_t& lo, int64_t& hi) {
    lo = n * tid / threads;
    hi = n * (tid + 1) / threads;
  };
  // First touch by the thread that will stream the slice (its NUMA node, where there are several).
  run_team(threads, [&](int tid) {
    int64_t lo, hi;
    slice(tid, lo, hi);
    for (int64_t i = lo; i < hi; ++i) {
      pa[i] = 0.0;
      pb[i] = 1.0;
      pc[i] = 2.0;
    }
  });
  const double s = 3.0;
  std::vector<double> gbs;
  for (int r = 0; r < cfg.bw_repeats + 1; ++r) {  // the first pass warms the TLB and page tables
    const double sec = run_team(threads, [&](int tid) {
      int64_t lo, hi;
      slice(tid, lo, hi);
      for (int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
    });
    if (r > 0) gbs.push_back(3.0 * double(n) * double(sizeof(double)) / sec * 1e-9);
  }
  // Every element holds the triad's result: the bytes counted above were moved.
  for (int64_t i = 0; i < n; ++i)
    KILN_CHECK(pa[i] == 7.0, "peak: the triad left a[", i, "] = ", pa[i],
               ", not 1 + 3 x 2: its timing counts work not done");
  return best(gbs);
}

double MachinePeak::peak_for(const std::string& dtype) const {
  return dtype == "bfloat16" && bf16_gflops > 0 ? bf16_gflops : gflops;
}

MachinePeak measure_machine_peak(int threads, const PeakConfig& cfg) {
  MachinePeak p;
  p.threads = threads;
  p.isa = best_fma_isa();
  p.gflops = measure_fma_gflops(p.isa, threads, cfg);
  p.bf16_isa = best_bf16_isa();
  p.bf16_gflops = p.bf16_isa == p.isa ? p.gflops : measure_fma_gflops(p.bf16_isa, threads, cfg);
  p.bandwidth_gbs = measure_bandwidth_gbs(threads, cfg);
  return p;
}

double theoretical_bound_gflops(const std::string& isa, int threads) {
  // FLOPs per cycle per core with two multiply-add ports: 2 x lanes x 2 (x2 again for the
  // pairwise bfloat16 dot product). The portable loop gets the AVX-512 figure: whatever the
  // compiler made of it cannot be wider.
  double per_cycle = 2 * 16 * 2;
  if (isa == "avx512_bf16") per_cycle = 2 * 32 * 2;
  else if (isa == "avx2") per_cycle = 2 * 8 * 2;
  const int hw = std::max(1, int(std::thread::hardware_concurrency()));
  return per_cycle * 7.0 * double(std::min(threads, hw));
}

}  // namespace kiln::bench
