// Two communicators driven from two threads at once (the communication thread of sync training
// beside a parameter-server thread): MPI_THREAD_MULTIPLE, or SERIALIZED with kiln's per-call lock
// (the .serialized variant of this test asks for it through KILN_MPI_THREAD_LEVEL).
//   ctest --test-dir build -R mpi.test_threads
#include <doctest/doctest.h>

#include <thread>

#include "tests/mpi/mpi_testing.h"

namespace kiln::test {
namespace {

TEST_CASE("two communicators, two threads, interleaved collectives and messages") {
  auto a = world_comm(dist::AllreduceAlgorithm::library);
  auto b = world_comm(dist::AllreduceAlgorithm::ring);
  const int r = a->rank(), p = a->size();
  bool ok_b = true;
  std::thread other([&] {
    for (int i = 0; i < 30; ++i) {
      Tensor x = full({1001}, double(r + i));
      b->allreduce(x, dist::ReduceOp::sum, "b");
      double want = double(p) * i + p * (p - 1) / 2.0;
      if (x.to_vector() != std::vector<double>(1001, want)) ok_b = false;
      Tensor y = full({3}, double(r));
      b->send(y, (r + 1) % p, i);
      b->recv(y, (r + p - 1) % p, i);
      if (y.to_vector() != std::vector<double>(3, double((r + p - 1) % p))) ok_b = false;
    }
  });
  for (int i = 0; i < 30; ++i) {
    Tensor x = full({517}, double(i), TensorOptions(DType::int64));
    a->allreduce(x, dist::ReduceOp::max, "a");
    CHECK(x.to_vector() == std::vector<double>(517, double(i)));
    a->barrier("a");
  }
  other.join();
  CHECK(ok_b);
}

}  // namespace
}  // namespace kiln::test
