// Roofline arithmetic; see roofline.h.
#include "bench/harness/roofline.h"

namespace kiln::bench {

RooflinePoint roofline_point(double gflop, double gbytes, double ms, double peak_gflops, double bandwidth_gbs) {
  RooflinePoint p;
  if (ms > 0) p.gflops = gflop / (ms * 1e-3);
  if (peak_gflops > 0) p.of_peak = p.gflops / peak_gflops;
  if (gbytes > 0) p.intensity = gflop / gbytes;
  if (bandwidth_gbs > 0 && gbytes > 0) {
    const double mem_s = gbytes / bandwidth_gbs;
    const double flop_s = peak_gflops > 0 ? gflop / peak_gflops : 0;
    p.memory_bound = mem_s > flop_s;
    if (p.memory_bound) {
      p.bound_ms = mem_s * 1e3;
      if (ms > 0) p.of_bound = p.bound_ms / ms;
    }
  }
  return p;
}

void apply_roofline(RunResult& r, const MachinePeak& peak) {
  r.peak_gflops = peak.peak_for(r.spec.dtype);
  r.bandwidth_gbs = peak.bandwidth_gbs;
  r.of_peak = r.peak_gflops > 0 ? r.gflops / r.peak_gflops : 0;
  for (LayerRow& l : r.layers) {
    const RooflinePoint p =
        roofline_point(l.gflop, l.gbytes, l.forward_ms + l.backward_ms, r.peak_gflops, r.bandwidth_gbs);
    l.gflops = p.gflops;
    l.of_peak = p.of_peak;
    l.intensity = p.intensity;
    l.memory_bound = p.memory_bound;
    l.bound_ms = p.bound_ms;
    l.of_bound = p.of_bound;
  }
}

}  // namespace kiln::bench
