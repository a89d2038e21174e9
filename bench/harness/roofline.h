// The roofline of a run and of each of its layers: achieved GFLOP/s against the machine's FMA
// peak, arithmetic intensity (FLOPs per byte of tensors read and written), and where the bytes
// at the measured bandwidth take longer than the FLOPs at the peak (memory-bound), that floor
// (bytes / bandwidth) and the fraction of it achieved. Pure arithmetic; the machine's figures
// come from peak.h.
//   ctest --test-dir build -R bench.test_peak
#pragma once

#include "bench/harness/convnet.h"
#include "bench/harness/peak.h"

namespace kiln::bench {

struct RooflinePoint {
  double gflops = 0;      // achieved: gflop / ms
  double of_peak = 0;     // gflops / peak_gflops
  double intensity = 0;   // FLOPs per byte (0 without bytes)
  bool memory_bound = false;  // gbytes / bandwidth > gflop / peak
  double bound_ms = 0;    // memory-bound only: the floor gbytes / bandwidth, in ms
  double of_bound = 0;    // memory-bound only: bound_ms / ms
};

// gflop: FLOPs in 1e9; gbytes: bytes in 1e9; ms: measured time; peak in GFLOP/s, bandwidth in
// GB/s (0: unknown, and what needs it stays 0).
RooflinePoint roofline_point(double gflop, double gbytes, double ms, double peak_gflops, double bandwidth_gbs);

// Fills r.peak_gflops (peak.peak_for(r.spec.dtype)), r.of_peak, r.bandwidth_gbs, and each layer
// row's roofline fields (its time: forward + backward ms per iteration).
void apply_roofline(RunResult& r, const MachinePeak& peak);

}  // namespace kiln::bench
