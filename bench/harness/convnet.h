// Times a net as convnet-benchmarks did: synthetic input made once on the device, `warmup`
// untimed iterations, then `iters` timed ones of forward (inference, no graph) or
// forward+backward (backward seeded with a fixed random output gradient, no weight update).
// Reports min/median/max ms per iteration, images/s from the median, and peak allocator bytes.
#pragma once

#include <string>
#include <vector>

#include "layers/module.h"

namespace kiln::bench {

struct RunSpec {
  std::string model;
  int64_t batch = 16;
  bool train = false;  // false: forward only; true: forward + backward
  int warmup = 2;
  int iters = 10;
  std::string backend = "auto";
  int threads = 0;  // 0: keep the current setting
};

struct RunResult {
  RunSpec spec;
  std::vector<double> ms;  // per timed iteration
  double ms_min = 0, ms_median = 0, ms_max = 0;
  double images_per_s = 0;
  int64_t peak_bytes = 0;  // allocator peak during the timed loop
  int threads = 0;
};

// Builds spec.model from the zoo and times it.
RunResult run(const RunSpec& spec);
// Times an already built net on inputs of shape [batch, input...].
RunResult run(Module& net, const Shape& input, const RunSpec& spec);

std::string table_header();
std::string table_row(const RunResult& r);

}  // namespace kiln::bench
