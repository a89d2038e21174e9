// Hierarchical all-reduce (--allreduce hierarchical): within each node, across the node leaders,
// then back within the node; nodes of KILN_RANKS_PER_NODE consecutive ranks on this machine (1, 2
// and all ranks per node), against the library's result, exactly (small multiples of 1/4).
//   ctest --test-dir build -L mpi -R hierarchical
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "tests/mpi/mpi_testing.h"

using namespace kiln;

TEST_CASE("hierarchical allreduce equals the library's, for 1, 2 and all ranks per node") {
  auto world = test::world_comm();
  const int n = world->size();
  for (int per_node : {1, 2, n}) {
    if (per_node > n) continue;
    CAPTURE(per_node);
    ::setenv("KILN_RANKS_PER_NODE", std::to_string(per_node).c_str(), 1);
    auto h = test::world_comm(dist::AllreduceAlgorithm::hierarchical);
    for (DType t : {DType::float32, DType::float64, DType::int64}) {
      for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::max, dist::ReduceOp::average}) {
        if (op == dist::ReduceOp::average && t == DType::int64) continue;
        CAPTURE(dtype_name(t));
        const int64_t count = 1001;  // odd: no size divides it
        Tensor a = from_vector(test::rank_values(world->rank(), count, t), {count}, t);
        Tensor b = a.clone();
        h->allreduce(a, op, "hierarchical");
        world->allreduce(b, op, "library");
        CHECK(test::first_mismatch(a.to_vector_of<double>(), b.to_vector_of<double>(), 0.0) == -1);
      }
    }
  }
  ::setenv("KILN_RANKS_PER_NODE", "0", 1);
  auto bad = test::world_comm(dist::AllreduceAlgorithm::hierarchical);
  Tensor x = zeros({4});
  CHECK_THROWS_WITH_AS(bad->allreduce(x, dist::ReduceOp::sum, "x"), doctest::Contains("KILN_RANKS_PER_NODE='0'"), Error);
  ::unsetenv("KILN_RANKS_PER_NODE");
}
