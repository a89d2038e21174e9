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
#include "engine/random.h"
#include "io/data/datasets.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "tests/mpi/mpi_testing.h"
#include "train/trainer.h"

using namespace kiln;

namespace {

ModulePtr small_cnn() {
  manual_seed(21);
  auto s = std::make_shared<Sequential>();
  s->add(std::make_shared<Conv2d>(1, 4, 3, 1, 1));
  s->add(std::make_shared<BatchNorm2d>(4));
  s->add(std::make_shared<ReLU>());
  s->add(std::make_shared<Flatten>());
  s->add(std::make_shared<Linear>(4 * 6 * 6, 3));
  return s;
}

train::TrainConfig config(int64_t batch, Device device) {
  train::TrainConfig c;
  c.model_name = "test";
  c.epochs = 1;
  c.batch_size = batch;
  c.optimizer = {"sgd", 0.05, 0.9};
  c.workers = 0;
  c.augment = false;
  c.progress = false;
  c.epoch_lines = false;
  c.histograms = false;
  c.device = device;
  return c;
}

}  // namespace

TEST_CASE("sync on emulated CUDA devices: N ranks of batch b end as one process of batch N*b") {
  std::shared_ptr<dist::Communicator> comm(test::world_comm());
  const int n = comm->size();
  REQUIRE(n == 2);
  const int device = cuda::select_device_by_local_rank();
  CHECK(device == comm->rank());  // one emulated device per local rank
  const Device mine("cuda:" + std::to_string(device));
  Splits data = open_dataset_dir("synthetic:1x6x6:3:96:learnable");
  const int64_t b = 4, limit = 4 * n * b;

  train::TrainConfig c = config(b, mine);
  c.limit_train = limit;
  c.dist.strategy = dist::StrategyKind::sync;
  c.dist.sync_bn = true;
  ModulePtr net = small_cnn();
  train::Trainer t(net, data, c, comm);
  t.fit();
  CHECK(net->named_parameters().front().second.device() == mine);

  train::TrainConfig one = config(b * n, Device("cuda:0"));
  one.limit_train = limit;
  ModulePtr ref = small_cnn();
  train::Trainer t1(ref, data, one);
  t1.fit();
  CHECK(t.step() == t1.step());
  net->to(Device());
  ref->to(Device());
  CHECK(test::max_state_diff(*net, *ref) < 1e-4);
}
