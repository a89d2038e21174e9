// Collectives that differ across ranks (count, dtype, collective, root, op) are a kiln::Error on
// every rank naming both sides, never a hang; the communicator stays usable afterwards.
//   ctest --test-dir build -R mpi.test_mismatch
#include <doctest/doctest.h>

#include "tests/mpi/mpi_testing.h"
#include "tests/support/testing.h"

namespace kiln::test {
namespace {

TEST_CASE("different element counts") {
  auto comm = world_comm();
  const int r = comm->rank();
  Tensor x = zeros({r == 0 ? 10 : 11});
  CHECK_THROWS_KILN(comm->allreduce(x, dist::ReduceOp::sum, "fc.weight"),
                    "collective mismatch at #0: rank 0 calls allreduce(sum) 'fc.weight' float32[10] but rank 1 calls "
                    "allreduce(sum) 'fc.weight' float32[11]");
  // Usable afterwards: the same sequence numbers go on.
  Tensor y = full({5}, 1.0);
  comm->allreduce(y, dist::ReduceOp::sum, "after");
  CHECK(y.to_vector() == std::vector<double>(5, double(comm->size())));
}

TEST_CASE("different dtypes, collectives, roots and ops") {
  for (const char* algo : {"library", "ring"}) {
    auto comm = world_comm(algo);
    const int r = comm->rank();
    CHECK_THROWS_KILN(comm->allreduce(zeros({4}, TensorOptions(r == 1 ? DType::float64 : DType::float32)),
                                      dist::ReduceOp::sum, "g"),
                      "rank 1 calls allreduce(sum) 'g' float64[4]");
    Tensor x = zeros({864});
    if (r == 0) {
      CHECK_THROWS_KILN(comm->allreduce(zeros({1000}), dist::ReduceOp::sum, "fc.weight"),
                        "at #1: rank 0 calls allreduce(sum) 'fc.weight' float32[1000] but rank 1 calls broadcast "
                        "'conv1.weight' float32[864] from root 0");
    } else {
      CHECK_THROWS_KILN(comm->broadcast(x, 0, "conv1.weight"), "but rank 1 calls broadcast 'conv1.weight'");
    }
    CHECK_THROWS_KILN(comm->broadcast(x, r == 0 ? 0 : 1, "w"), "from root 1");
    CHECK_THROWS_KILN(comm->allreduce(x, r == 0 ? dist::ReduceOp::max : dist::ReduceOp::sum, "w"),
                      "rank 0 calls allreduce(max) 'w'");
    CHECK_THROWS_KILN(comm->allreduce(x, dist::ReduceOp::sum, r == 0 ? "a" : "b"), "allreduce(sum) 'b'");
    Tensor y = full({3}, double(r));
    comm->allreduce(y, dist::ReduceOp::max, "after");
    CHECK(y.to_vector() == std::vector<double>(3, double(comm->size() - 1)));
  }
}

TEST_CASE("a barrier against an allgather") {
  auto comm = world_comm();
  const int p = comm->size();
  if (comm->rank() == p - 1) {
    CHECK_THROWS_KILN(comm->barrier("sync"), "calls barrier 'sync'");
  } else {
    CHECK_THROWS_KILN(comm->allgather(zeros({2}), zeros({2 * p}), "gather"), "calls allgather 'gather' float32[2]");
  }
  comm->barrier("after");
}

TEST_CASE("with the check off, matching collectives still work") {
  dist::CommOptions o = mpi_test_options();
  o.check = false;
  auto comm = dist::make_communicator("mpi", o);
  Tensor y = full({3}, 2.0);
  comm->allreduce(y, dist::ReduceOp::average, "nocheck");
  CHECK(y.to_vector() == std::vector<double>(3, 2.0));
}

}  // namespace
}  // namespace kiln::test
