// Helpers for tests/mpi: a communicator over all ranks with short timeouts (a mismatched test
// fails in seconds instead of hanging) and deterministic per-rank data.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "engine/tensor.h"

namespace kiln::test {

inline dist::CommOptions mpi_test_options(const std::string& algorithm = "library") {
  dist::CommOptions o;
  o.timeout_s = 30;
  o.warn_after_s = 10;
  o.algorithm = algorithm;
  return o;
}

// A fresh MPI communicator over every rank (MPI_Comm_dup: all ranks must call it).
inline std::unique_ptr<dist::Communicator> world_comm(const std::string& algorithm = "library") {
  return dist::make_communicator("mpi", mpi_test_options(algorithm));
}

// Small multiples of 1/4 in [-8, 8]: exact in every dtype, and their sums over 4 ranks too.
inline double rank_value(int rank, int64_t i, DType t) {
  double v = double((rank * 7 + i * 3) % 17) - 8;
  if (is_floating(t)) v += 0.25 * ((rank + i) % 4);
  return v;
}
inline std::vector<double> rank_values(int rank, int64_t n, DType t, int64_t shift = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = rank_value(rank, i + shift, t);
  return v;
}

}  // namespace kiln::test
