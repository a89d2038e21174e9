// This machine's roofline: the FMA peak (GFLOP/s) of each multiply-add loop the CPU has, on one
// thread and on all, and the STREAM-triad bandwidth (GB/s) on one thread and all; medians of
// repeats (bench/harness/peak.h, the code `kiln bench` prints its achieved/peak with). Prints
// figures, asserts nothing.
//   build/bench/bench_peak             # full: ~0.1 s per repeat, 4 x L3 arrays
//   build/bench/bench_peak --quick     # kiln bench's quick configuration
//   KILN_CPU_ISA=avx2 build/bench/bench_peak
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
    std::printf("%-12s %8s %12s %12s %9s\n", "loop", "threads", "GFLOP/s", "bound", "of bound");
    for (const std::string& isa : peak_isas())
      for (int t : {1, all}) {
        const double g = measure_fma_gflops(isa, t, cfg);
        const double bound = theoretical_bound_gflops(isa, t);
        std::printf("%-12s %8d %12.1f %12.1f %8.1f%%\n", isa.c_str(), t, g, bound, 100.0 * g / bound);
        std::fflush(stdout);
        if (all == 1) break;
      }
    std::printf("\n%-12s %8s %12s\n", "triad", "threads", "GB/s");
    for (int t : {1, all}) {
      std::printf("%-12s %8d %12.1f\n", "float64", t, measure_bandwidth_gbs(t, cfg));
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
