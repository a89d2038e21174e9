// Point to point over MPI: a ring of sends, any-source receives, size mismatches.
//   ctest --test-dir build -R mpi.test_p2p
#include <doctest/doctest.h>

#include <set>

#include "tests/mpi/mpi_testing.h"
#include "tests/support/testing.h"

namespace kiln::test {
namespace {

TEST_CASE("send and recv around the ring") {
  auto comm = world_comm();
  const int r = comm->rank(), p = comm->size();
  Tensor mine = from_vector(rank_values(r, 1000, DType::float32), {1000});
  Tensor got = zeros({1000});
  // Even ranks send first, odd ranks receive first: no deadlock even with rendezvous sends.
  if (r % 2 == 0) {
    comm->send(mine, (r + 1) % p, 5);
    CHECK(comm->recv(got, (r + p - 1) % p, 5) == (r + p - 1) % p);
  } else {
    CHECK(comm->recv(got, (r + p - 1) % p, 5) == (r + p - 1) % p);
    comm->send(mine, (r + 1) % p, 5);
  }
  CHECK(got.to_vector() == rank_values((r + p - 1) % p, 1000, DType::float32));
  comm->barrier("ring done");
}

TEST_CASE("rank 0 receives from any source") {
  auto comm = world_comm();
  const int r = comm->rank(), p = comm->size();
  if (r == 0) {
    std::set<int> seen;
    for (int k = 1; k < p; ++k) {
      Tensor x = zeros({4}, TensorOptions(DType::int64));
      int src = comm->recv(x, dist::kAnySource, 9);
      CHECK(x.to_vector() == std::vector<double>(4, double(src)));
      seen.insert(src);
    }
    CHECK(int(seen.size()) == p - 1);
  } else {
    comm->send(full({4}, double(r), TensorOptions(DType::int64)), 0, 9);
  }
  comm->barrier("any source done");
}

TEST_CASE("a received message of another size is an error naming both sizes") {
  auto comm = world_comm();
  const int r = comm->rank();
  if (r == 1) comm->send(zeros({8}), 0, 3);
  if (r == 0) CHECK_THROWS_KILN(comm->recv(zeros({4}), 1, 3), "recv");
  if (r == 1) comm->send(zeros({2}), 0, 4);
  if (r == 0) CHECK_THROWS_KILN(comm->recv(zeros({4}), 1, 4), "has 8 bytes; the tensor");
  CHECK_THROWS_KILN(comm->send(zeros({1}), comm->size(), 0), "is not a rank");
  CHECK_THROWS_KILN(comm->send(zeros({1}), 0, -1), "tags are >= 0");
  comm->barrier("p2p errors done");
}

}  // namespace
}  // namespace kiln::test
