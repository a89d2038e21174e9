// The MPI communicator's collectives against a serial reference computed from every rank's
// deterministic data: allreduce (library and ring) over sizes, dtypes and ops, broadcast from
// every root, allgather, reduce_scatter, barrier, split.
//   ctest --test-dir build -R mpi.test_collectives
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/mpi/mpi_testing.h"

namespace kiln::test {
namespace {

const DType kDtypes[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32, DType::int64};
const dist::ReduceOp kOps[] = {dist::ReduceOp::sum, dist::ReduceOp::average, dist::ReduceOp::max, dist::ReduceOp::min};
const int64_t kSizes[] = {0, 1, 7, 1000, (1 << 18) + 3};

// op over ranks of element i, in double (integer average truncates, like the communicator).
double reference(int size, int64_t i, DType t, dist::ReduceOp op) {
  double acc = rank_value(0, i, t);
  for (int r = 1; r < size; ++r) {
    double v = rank_value(r, i, t);
    if (op == dist::ReduceOp::max) acc = std::max(acc, v);
    else if (op == dist::ReduceOp::min) acc = std::min(acc, v);
    else acc += v;
  }
  if (op == dist::ReduceOp::average) acc = is_floating(t) ? acc / size : std::trunc(acc / size);
  return acc;
}

double tolerance(DType t) {
  return t == DType::float16 ? 2e-3 : t == DType::bfloat16 ? 1e-2 : t == DType::float32 ? 1e-6 : 1e-12;
}

// First element off by more than the tolerance (a NaN or infinity always is), or -1.
int64_t first_mismatch(const std::vector<double>& got, int size, DType t, dist::ReduceOp op, int64_t shift = 0) {
  std::vector<double> want(got.size());
  for (size_t i = 0; i < got.size(); ++i) want[i] = reference(size, int64_t(i) + shift, t, op);
  return test::first_mismatch(got, want, tolerance(t));
}

TEST_CASE("allreduce matches the serial reference: sizes x dtypes x ops x algorithms") {
  for (const char* algo : {"library", "ring"}) {
    auto comm = world_comm(algo);
    for (DType t : kDtypes)
      for (dist::ReduceOp op : kOps)
        for (int64_t n : kSizes) {
          CAPTURE(algo);
          CAPTURE(dtype_name(t));
          CAPTURE(dist::reduce_op_name(op));
          CAPTURE(n);
          Tensor x = from_vector(rank_values(comm->rank(), n, t), {n}, TensorOptions(t));
          comm->allreduce(x, op, "x");
          int64_t bad = first_mismatch(x.to_vector(), comm->size(), t, op);
          CHECK_MESSAGE(bad == -1, "element ", bad, " = ", (bad >= 0 ? x.to_vector()[size_t(bad)] : 0.0),
                        ", want ", (bad >= 0 ? reference(comm->size(), bad, t, op) : 0.0));
        }
  }
}

TEST_CASE("ring and library allreduce agree on float32 data of a 2-d tensor") {
  auto lib = world_comm(dist::AllreduceAlgorithm::library);
  auto ring = world_comm(dist::AllreduceAlgorithm::ring);
  const int64_t n = 3 * 12345;
  Tensor a = from_vector(rank_values(lib->rank(), n, DType::float32), {3, 12345});
  Tensor b = a.clone();
  lib->allreduce(a, dist::ReduceOp::sum, "a");
  ring->allreduce(b, dist::ReduceOp::sum, "b");
  std::vector<double> va = a.to_vector(), vb = b.to_vector();
  CHECK(va == vb);
}

TEST_CASE("ring allreduce with several 1 MiB segments per chunk") {
  auto comm = world_comm(dist::AllreduceAlgorithm::ring);
  const int64_t n = int64_t(comm->size()) * (3 << 18) + 5;  // 3 MiB + a little per rank's chunk
  for (DType t : {DType::float32, DType::bfloat16}) {
    Tensor x = from_vector(rank_values(comm->rank(), n, t), {n}, TensorOptions(t));
    comm->allreduce(x, dist::ReduceOp::sum, "big");
    CHECK(first_mismatch(x.to_vector(), comm->size(), t, dist::ReduceOp::sum) == -1);
  }
}

TEST_CASE("broadcast from every root") {
  auto comm = world_comm();
  for (DType t : kDtypes)
    for (int root = 0; root < comm->size(); ++root)
      for (int64_t n : {int64_t(0), int64_t(5), int64_t(100003)}) {
        Tensor x = from_vector(rank_values(comm->rank(), n, t), {n}, TensorOptions(t));
        comm->broadcast(x, root, "b");
        CHECK(x.to_vector() == rank_values(root, n, t));
      }
}

TEST_CASE("allgather places rank r's input at r * numel") {
  auto comm = world_comm();
  const int p = comm->size();
  for (DType t : kDtypes)
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(1000)}) {
      Tensor in = from_vector(rank_values(comm->rank(), n, t), {n}, TensorOptions(t));
      Tensor out = zeros({p * n}, TensorOptions(t));
      comm->allgather(in, out, "g");
      std::vector<double> want;
      for (int r = 0; r < p; ++r) {
        auto v = rank_values(r, n, t);
        want.insert(want.end(), v.begin(), v.end());
      }
      CHECK(out.to_vector() == want);
    }
}

TEST_CASE("reduce_scatter gives each rank its chunk of the reduction") {
  auto comm = world_comm();
  const int p = comm->size();
  for (DType t : kDtypes)
    for (dist::ReduceOp op : kOps)
      for (int64_t m : {int64_t(0), int64_t(1), int64_t(777)}) {
        CAPTURE(dtype_name(t));
        CAPTURE(dist::reduce_op_name(op));
        Tensor in = from_vector(rank_values(comm->rank(), p * m, t), {p * m}, TensorOptions(t));
        Tensor out = zeros({m}, TensorOptions(t));
        comm->reduce_scatter(in, out, op, "rs");
        CHECK(first_mismatch(out.to_vector(), p, t, op, comm->rank() * m) == -1);
      }
}

TEST_CASE("barrier and split into even and odd ranks") {
  auto comm = world_comm();
  comm->barrier("start");
  const int r = comm->rank(), p = comm->size();
  auto sub = comm->split(r % 2, r);
  REQUIRE(sub);
  CHECK(sub->size() == (p + 1 - r % 2) / 2);
  CHECK(sub->rank() == r / 2);
  CHECK(sub->options().timeout_s == comm->options().timeout_s);
  Tensor x = full({3}, double(r));
  sub->allreduce(x, dist::ReduceOp::sum, "sub");
  double want = 0;
  for (int q = r % 2; q < p; q += 2) want += q;
  CHECK(x.to_vector() == std::vector<double>(3, want));
  // A negative color leaves a rank out: it gets no communicator.
  auto none = comm->split(r == 0 ? -1 : 1, 0);
  CHECK((r == 0) == (none == nullptr));
  comm->barrier("end");
}

}  // namespace
}  // namespace kiln::test
