// What the bench harness tests share: a RunResult with the given spec and throughput, as the
// harness would have measured it, for the output, comparison and plot code.
#pragma once

#include <cstdint>
#include <string>

#include "bench/harness/results.h"

namespace kiln::test {

inline bench::RunResult synthetic(const std::string& model, int64_t batch, bool train,
                                         const std::string& backend, double ips) {
  bench::RunResult r;
  r.spec.model = model;
  r.spec.batch = batch;
  r.spec.train = train;
  r.spec.backend = backend;
  r.images_per_s = ips;
  return r;
}

}  // namespace kiln::test
