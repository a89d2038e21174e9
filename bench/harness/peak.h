// This machine's roofline: the FMA peak (GFLOP/s) that independent multiply-add chains reach per
// ISA the CPU has, on a given number of threads, and the memory bandwidth (GB/s) of a
// STREAM-triad loop over buffers several times the last-level cache. Each figure is the median
// of repeats. `kiln bench` measures the quick configuration (~0.3 s) for the threads it uses and
// prints achieved/peak per row; build/bench/bench_peak prints the full table (every ISA, one
// thread and all).
//
// Threads are std::threads started per measurement (not kiln's OpenMP team), released together
// and timed from the first start to the last finish; they are not pinned. Not thread-safe: run
// one measurement at a time, with nothing else busy, or the figures are shares of the machine.
//   build/bench/bench_peak [--quick]       ctest --test-dir build -R bench.test_peak
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::bench {

struct PeakConfig {
  double fma_seconds = 0.1;  // per repeat of an FMA measurement
  int fma_repeats = 5;
  int64_t array_bytes = 0;   // per triad array; 0: 4 x the largest cache (sysfs), at least 64 MiB
  int bw_repeats = 10;
};
PeakConfig quick_peak_config();  // ~0.4 s for one thread count: 20 ms x 5 per FMA figure, L3-sized arrays
PeakConfig full_peak_config();   // the defaults

// The multiply-add loops this build has and this CPU runs (after KILN_CPU_ISA's cap), best
// first: "avx512_bf16" (bfloat16 dot products), "avx512", "avx2", "portable" (whatever the
// compiler makes of plain float loops for the build's baseline target).
std::vector<std::string> peak_isas();
// The best float32 loop of peak_isas() ("avx512", "avx2" or "portable").
std::string best_fma_isa();
// The widest multiply-add of the CPU: "avx512_bf16" where present, else best_fma_isa().
std::string best_bf16_isa();

// GFLOP/s of `isa`'s loop on `threads` threads (the best of cfg.fma_repeats). Throws kiln::Error
// for an ISA not in peak_isas() or threads < 1.
double measure_fma_gflops(const std::string& isa, int threads, const PeakConfig& cfg);

// The FLOPs one step of `isa`'s loop is counted as (what measure_fma_gflops multiplies by), and
// the FLOPs it does, counted from its result (a = 1, b = 2^-20: each multiply-add lane adds b
// exactly, so twice the steps add lanes x steps x b more). Equal for an honest loop.
double flops_per_step(const std::string& isa);
double count_flops_per_step(const std::string& isa);

// STREAM triad a[i] = b[i] + s * c[i] over float64 arrays of cfg.array_bytes (each touched first
// by the thread that later reads it), counted as STREAM does: 24 bytes per element (two reads, one
// write; the write-allocate read is not counted). GB/s = 1e9 bytes/s, the best of cfg.bw_repeats.
// Throws kiln::Error if any element of a is not the triad's result afterwards.
double measure_bandwidth_gbs(int threads, const PeakConfig& cfg);

// What `kiln bench` measures and prints once per process.
struct MachinePeak {
  int threads = 0;
  std::string isa;             // best_fma_isa()
  double gflops = 0;           // float32 FMA peak on `threads`
  std::string bf16_isa;        // best_bf16_isa()
  double bf16_gflops = 0;      // its peak (= gflops when it is a float32 loop)
  double bandwidth_gbs = 0;    // triad on `threads`
  // The peak that applies to a run of `dtype` ("bfloat16" takes bf16_gflops, others gflops).
  double peak_for(const std::string& dtype) const;
};
MachinePeak measure_machine_peak(int threads, const PeakConfig& cfg);

// A bound no measurement of `isa` on `threads` threads can pass: FLOPs per cycle of the widest
// multiply-add (two ports) x 7 GHz x min(threads, hardware threads). For sanity checks.
double theoretical_bound_gflops(const std::string& isa, int threads);

}  // namespace kiln::bench
