// The one-rank communicator and the host reduction loops, without MPI.
//   ctest --test-dir build -R dist.test_local_comm
#include <doctest/doctest.h>

#include "dist/comm.h"
#include "dist/host_reduce.h"
#include "tests/support/testing.h"

namespace kiln::test {
namespace {

TEST_CASE("local communicator: size 1, identities and copies") {
  auto c = dist::make_communicator("local");
  CHECK(c->backend() == "local");
  CHECK(c->rank() == 0);
  CHECK(c->size() == 1);
  Tensor x = from_vector(std::vector<double>{1, -2, 3.5}, {3});
  for (auto op : {dist::ReduceOp::sum, dist::ReduceOp::average, dist::ReduceOp::max, dist::ReduceOp::min}) {
    c->allreduce(x, op, "x");
    CHECK(x.to_vector() == std::vector<double>{1, -2, 3.5});
  }
  c->broadcast(x, 0, "x");
  CHECK_THROWS_KILN(c->broadcast(x, 1, "x"), "root 1");
  Tensor out = zeros({3});
  c->allgather(x, out, "g");
  CHECK(out.to_vector() == x.to_vector());
  Tensor rs = zeros({3});
  c->reduce_scatter(x, rs, dist::ReduceOp::sum, "rs");
  CHECK(rs.to_vector() == x.to_vector());
  CHECK_THROWS_KILN(c->allgather(x, zeros({4}), "g"), "same dtype and element count");
  c->barrier("b");
  CHECK_THROWS_KILN(c->send(x, 0, 0), "no peer");
  CHECK_THROWS_KILN(c->recv(x, 0, 0), "no peer");
  CHECK_THROWS_KILN(c->allreduce(zeros({2}, TensorOptions(DType::uint8))), "cannot reduce uint8");
  auto s = c->split(3, 0);
  REQUIRE(s);
  CHECK(s->size() == 1);
}

TEST_CASE("make_communicator: auto without a launcher is local; unknown names are errors") {
  if (dist::launched_distributed()) return;
  CHECK(dist::make_communicator("auto")->backend() == "local");
  CHECK_THROWS_KILN(dist::make_communicator("gloo"), "backend 'gloo' is unknown");
  CHECK(std::string(dist::reduce_op_name(dist::ReduceOp::average)) == "average");
}

TEST_CASE("host reduction loops for every dtype") {
  for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32, DType::int64}) {
    CAPTURE(dtype_name(t));
    Tensor a = from_vector(std::vector<double>{1, -4, 6, 8}, {4}, TensorOptions(t));
    Tensor b = from_vector(std::vector<double>{3, 2, -6, 1}, {4}, TensorOptions(t));
    Tensor s = a.clone();
    dist::reduce_into(s.data_ptr(), b.data_ptr(), 4, t, dist::ReduceOp::sum);
    CHECK(s.to_vector() == std::vector<double>{4, -2, 0, 9});
    dist::divide(s.data_ptr(), 4, t, 2);
    if (is_floating(t)) CHECK(s.to_vector() == std::vector<double>{2, -1, 0, 4.5});
    else CHECK(s.to_vector() == std::vector<double>{2, -1, 0, 4});  // truncating
    Tensor m = a.clone();
    dist::reduce_into(m.data_ptr(), b.data_ptr(), 4, t, dist::ReduceOp::max);
    CHECK(m.to_vector() == std::vector<double>{3, 2, 6, 8});
    Tensor n = a.clone();
    dist::reduce_into(n.data_ptr(), b.data_ptr(), 4, t, dist::ReduceOp::min);
    CHECK(n.to_vector() == std::vector<double>{1, -4, -6, 1});
  }
}

}  // namespace
}  // namespace kiln::test
