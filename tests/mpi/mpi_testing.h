// Helpers for tests/mpi: a communicator over all ranks with short timeouts (a mismatched test
// fails in seconds instead of hanging), deterministic per-rank data, and the distributed equality
// checks (NaN-aware, tests/support/testing.h: a NaN or infinity where the reference is finite
// fails).
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "engine/tensor.h"
#include "layers/module.h"
#include "tests/support/testing.h"

namespace kiln::test {

inline dist::CommOptions mpi_test_options(dist::AllreduceAlgorithm algorithm = dist::AllreduceAlgorithm::library) {
  dist::CommOptions o;
  o.timeout_s = 30;
  o.warn_after_s = 10;
  o.algorithm = algorithm;
  return o;
}

// A fresh MPI communicator over every rank (MPI_Comm_dup: all ranks must call it).
inline std::unique_ptr<dist::Communicator> world_comm(dist::AllreduceAlgorithm algorithm = dist::AllreduceAlgorithm::library) {
  return dist::make_communicator("mpi", mpi_test_options(algorithm));
}
// The same, by the algorithm's --allreduce name.
inline dist::CommOptions mpi_test_options(const std::string& algorithm) {
  return mpi_test_options(dist::parse_allreduce(algorithm));
}
inline std::unique_ptr<dist::Communicator> world_comm(const std::string& algorithm) {
  return world_comm(dist::parse_allreduce(algorithm));
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

// The first element of `got` farther than tol * (1 + |want|) from `want`, or -1 (test::near).
inline int64_t first_mismatch(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  return test::first_mismatch(got, want, tol, tol);
}

// The largest |a - b| / (1 + |b|) over every floating tensor of the two modules' states, in
// order; +inf where one holds a NaN or infinity the other does not (test::max_rel_diff).
inline double max_state_diff(Module& a, Module& b) {
  auto pa = a.state_dict(), pb = b.state_dict();
  if (pa.size() != pb.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (pa[i].first != pb[i].first) return INFINITY;
    if (!pa[i].second.is_floating_point()) continue;
    worst = std::max(worst, test::max_rel_diff(pa[i].second.to_vector_of<double>(), pb[i].second.to_vector_of<double>()));
  }
  return worst;
}

}  // namespace kiln::test
