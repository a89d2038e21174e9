// The NCCL communicator on one GPU: a job of one rank (no launcher, no MPI needed) runs the same
// NCCL calls as a job of many, so a machine of one GPU proves the path: every collective on CUDA
// tensors of each dtype NCCL carries, the CPU tensors it hands to its host communicator, and the
// errors for tensors it cannot serve. Skipped where kiln was built without NCCL (the emulated
// device has none). Several ranks: tests/mpi under mpirun on a machine of several GPUs.
//   ctest --test-dir build -R gpu.test_gpu_nccl
#include <vector>

#include "dist/comm.h"
#include "engine/cuda_runtime.h"
#include "tests/support/testing.h"

using namespace kiln;

#if defined(KILN_HAVE_NCCL)

namespace {
const Device kGpu("cuda:0");

// Distinct values that every dtype below holds exactly.
Tensor values(int64_t n, DType dt, int base) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double((i * 7 + base) % 61) - 30;
  return from_vector(v, {n}, TensorOptions(dt));
}

std::vector<double> host_values(const Tensor& t) { return t.to(Device()).to_vector(); }
}  // namespace

TEST_CASE("gpu nccl: one rank's communicator, every collective on CUDA tensors") {
  auto c = dist::make_communicator("nccl", {}, kGpu);
  REQUIRE(c);
  CHECK(c->backend() == "nccl");
  CHECK(c->rank() == 0);
  CHECK(c->size() == 1);
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32}) {
    CAPTURE(dt);
    const int64_t n = 1000003;  // odd, and larger than NCCL's smallest chunk
    const Tensor h = values(n, dt, 3);
    const std::vector<double> want = host_values(h);
    for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::average, dist::ReduceOp::max, dist::ReduceOp::min}) {
      if (op == dist::ReduceOp::average && !is_floating(dt)) continue;
      Tensor d = h.to(kGpu);
      c->allreduce(d, op, "allreduce");
      CHECK(test::first_mismatch(host_values(d), want, 0, 0) == -1);
    }
    Tensor b = h.to(kGpu);
    c->broadcast(b, 0, "broadcast");
    CHECK(test::first_mismatch(host_values(b), want, 0, 0) == -1);
    // allgather and reduce_scatter move the data into another buffer: poisoned first.
    Tensor out = full({n}, -99.0, TensorOptions(dt).with_device(kGpu));
    c->allgather(h.to(kGpu), out, "allgather");
    CHECK(test::first_mismatch(host_values(out), want, 0, 0) == -1);
    Tensor rs = full({n}, -99.0, TensorOptions(dt).with_device(kGpu));
    c->reduce_scatter(h.to(kGpu), rs, dist::ReduceOp::sum, "reduce_scatter");
    CHECK(test::first_mismatch(host_values(rs), want, 0, 0) == -1);
  }
  c->barrier("barrier");
  cuda::synchronize();
}

TEST_CASE("gpu nccl: CPU tensors go to the host communicator; what NCCL cannot serve is an Error") {
  auto c = dist::make_communicator("nccl", {}, kGpu);
  Tensor cpu = values(17, DType::float32, 5);
  const std::vector<double> want = host_values(cpu);
  c->allreduce(cpu, dist::ReduceOp::sum, "on the host");
  CHECK(test::first_mismatch(host_values(cpu), want, 0, 0) == -1);
  Tensor strided = values(20, DType::float32, 1).to(kGpu).reshape({4, 5}).transpose(0, 1);
  CHECK_THROWS_KILN(c->allreduce(strided, dist::ReduceOp::sum, "strided"), "must be contiguous");
  Tensor out = empty({16}, TensorOptions(DType::float32).with_device(kGpu));
  CHECK_THROWS_KILN(c->allgather(values(17, DType::float32, 2).to(kGpu), out, "short"), "must have size()");
}

#else

TEST_CASE("gpu nccl: kiln was built without NCCL") {
  test::skip_not_built("NCCL", "kiln was built without NCCL (the emulated device has none)");
}

#endif
