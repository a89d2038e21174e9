// Synchronous data parallelism with CUDA tensors, on the emulated device (preset emu-device):
// under `mpirun -np 2` each rank takes its own emulated device by local rank (cuda:0, cuda:1), the
// gradients are staged through host memory for MPI (no CUDA-aware MPI), and the Trainer on N ranks
// of batch b ends with the parameters of one process training with batch N*b on cuda:0, as
// tests/mpi/test_sync.cpp asserts on the CPU.
//   ctest --test-dir build-emu-device -R emu_device.mpi_sync_cuda --output-on-failure
#include <doctest/doctest.h>

#include <memory>

#include "dist/comm.h"
#include "engine/cuda_runtime.h"
#include "tests/mpi/mpi_testing.h"
#include "tests/mpi/trainer_testing.h"

using namespace kiln;

TEST_CASE("sync on emulated CUDA devices: N ranks of batch b end as one process of batch N*b") {
  std::shared_ptr<dist::Communicator> comm(test::world_comm());
  const int n = comm->size();
  REQUIRE(n == 2);
  const int device = cuda::select_device_by_local_rank();
  CHECK(device == comm->rank());  // one emulated device per local rank
  const Device mine("cuda:" + std::to_string(device));
  test::SyncPair p = test::fit_sync_pair(comm, 4, mine, Device("cuda:0"));
  CHECK(p.net->named_parameters().front().second.device() == mine);
  CHECK(p.dp->step() == p.one->step());
  p.net->to(Device());
  p.ref->to(Device());
  CHECK(test::max_state_diff(*p.net, *p.ref) < 1e-4);
}
