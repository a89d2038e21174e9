// A rank that never arrives: the others' kiln::Error names it once timeout_s (2 s here) has passed,
// instead of hanging. A communicator that timed out is unusable (its state with the silent rank
// is unknown); every rank then resynchronises on a fresh one (MPI_Comm_dup of MPI_COMM_WORLD,
// which all ranks, the silent one included, call next).
//   ctest --test-dir build -R mpi.test_timeout
#include <doctest/doctest.h>

#include <chrono>

#include "tests/mpi/mpi_testing.h"
#include "tests/support/testing.h"

namespace kiln::test {
namespace {

dist::CommOptions short_timeout(const char* algo = "library") {
  dist::CommOptions o = mpi_test_options(algo);
  o.timeout_s = 2;
  o.warn_after_s = 1;
  return o;
}

TEST_CASE("the last rank skips a collective: the others name it, then all resynchronise") {
  auto comm = dist::make_communicator("mpi", short_timeout());
  const int r = comm->rank(), p = comm->size();
  if (r != p - 1) {
    auto t0 = std::chrono::steady_clock::now();
    std::string want = "rank " + std::to_string(r) + ": allreduce 'skipped' #0 timed out after 2 s waiting for rank " +
                       std::to_string(p - 1) + " (no answer to a ping";  // it is blocked in MPI_Comm_dup below
    CHECK_THROWS_KILN(comm->allreduce(zeros({8}), dist::ReduceOp::sum, "skipped"), want);
    // It waited out the timeout (not an early give-up); a wait without end would meet CTest's
    // timeout instead, so no upper bound is asserted here.
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(s >= 2);
    CHECK_THROWS_KILN(comm->barrier("later"), "unusable after allreduce 'skipped' #0 timed out");
  }
  auto fresh = world_comm();
  Tensor x = full({4}, 1.0);
  fresh->allreduce(x, dist::ReduceOp::sum, "resync");
  CHECK(x.to_vector() == std::vector<double>(4, double(p)));
}

TEST_CASE("a recv from a rank that never sends names it") {
  auto comm = dist::make_communicator("mpi", short_timeout());
  if (comm->rank() == 0) CHECK_THROWS_KILN(comm->recv(zeros({2}), 1, 77), "waiting for rank 1");
  auto fresh = world_comm();
  fresh->barrier("resync");
}

}  // namespace
}  // namespace kiln::test
