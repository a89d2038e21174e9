// This machine's roofline: the FMA peak (GFLOP/s) of each multiply-add loop the CPU has, on one
// thread and on all, and the STREAM-triad bandwidth (GB/s) on one thread and all; the best of
// repeats (bench/harness/peak.h, the code `kiln bench` prints its achieved/peak with). Prints
// figures, asserts nothing.
//   build/bench/bench_peak             # full: ~0.1 s per repeat, 4 x L3 arrays
//   build/bench/bench_peak --quick     # kiln bench's quick configuration
//   KILN_CPU_ISA=avx2 build/bench/bench_peak
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "bench/harness/peak.h"
#include "engine/error.h"
#include "kernels/cpu/native/cpu_features.h"

int main(int argc, char** argv) {
  using namespace kiln::bench;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return 2;
    }
  }
  try {
    const PeakConfig cfg = quick ? quick_peak_config() : full_peak_config();
    const int all = std::max(1, int(std::thread::hardware_concurrency()));
    std::printf("cpu features: %s\n", kiln::native::cpu_features_str().c_str());
    // Seconds each measurement took (calibration, allocation and first touch included).
    auto since = [](std::chrono::steady_clock::time_point t0) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::printf("%-12s %8s %12s %12s %9s %7s\n", "loop", "threads", "GFLOP/s", "bound", "of bound", "took s");
    for (const std::string& isa : peak_isas())
      for (int t : {1, all}) {
        const auto t0 = std::chrono::steady_clock::now();
        const double g = measure_fma_gflops(isa, t, cfg);
        const double took = since(t0);
        const double bound = theoretical_bound_gflops(isa, t);
        std::printf("%-12s %8d %12.1f %12.1f %8.1f%% %7.2f\n", isa.c_str(), t, g, bound, 100.0 * g / bound, took);
        std::fflush(stdout);
        if (all == 1) break;
      }
    std::printf("\n%-12s %8s %12s %7s\n", "triad", "threads", "GB/s", "took s");
    for (int t : {1, all}) {
      const auto t0 = std::chrono::steady_clock::now();
      const double gbs = measure_bandwidth_gbs(t, cfg);
      std::printf("%-12s %8d %12.1f %7.2f\n", "float64", t, gbs, since(t0));
      std::fflush(stdout);
      if (all == 1) break;
    }
    std::printf("(bound: two multiply-add ports x lanes x 7 GHz per thread, a ceiling no core reaches)\n");
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "bench_peak: %s\n", e.what());
    return 1;
  }
  return 0;
}
