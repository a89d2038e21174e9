// The Trainer setup the synchronous data-parallel tests share (tests/mpi/test_sync.cpp on the CPU,
// tests/emu_device/mpi/test_sync_cuda.cpp on emulated CUDA devices): a learnable synthetic data
// set, a small conv + batch-norm net, and a one-epoch SGD configuration without progress output.
#pragma once

#include <memory>

#include "dist/comm.h"
#include "engine/random.h"
#include "io/data/datasets.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "train/trainer.h"

namespace kiln::test {

inline Splits sync_synthetic() { return open_dataset_dir("synthetic:1x6x6:3:96:learnable"); }

inline train::TrainConfig sync_trainer_config(int64_t batch, Device device = Device()) {
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

inline ModulePtr sync_small_cnn() {
  manual_seed(21);
  auto s = std::make_shared<Sequential>();
  s->add(std::make_shared<Conv2d>(1, 4, 3, 1, 1));
  s->add(std::make_shared<BatchNorm2d>(4));
  s->add(std::make_shared<ReLU>());
  s->add(std::make_shared<Flatten>());
  s->add(std::make_shared<Linear>(4 * 6 * 6, 3));
  return s;
}

// N ranks of batch b (the sharded loader, synchronised batch norm) on `device`, and one process
// of batch N*b on `one_device`, over the same 4*N*b samples: both trainers, fitted. Their
// parameters must end equal (tests/mpi/test_sync.cpp on the CPU,
// tests/emu_device/mpi/test_sync_cuda.cpp on emulated CUDA devices).
struct SyncPair {
  Splits data;
  ModulePtr net, ref;
  std::unique_ptr<train::Trainer> dp, one;
};

inline SyncPair fit_sync_pair(const std::shared_ptr<dist::Communicator>& comm, int64_t b, Device device = Device(),
                              Device one_device = Device()) {
  SyncPair p;
  const int n = comm->size();
  p.data = sync_synthetic();
  const int64_t limit = 4 * n * b;  // every rank's shard whole: n*b divides the limit
  train::TrainConfig c = sync_trainer_config(b, device);
  c.limit_train = limit;
  c.dist.strategy = dist::StrategyKind::sync;
  c.dist.sync_bn = true;
  p.net = sync_small_cnn();
  p.dp = std::make_unique<train::Trainer>(p.net, p.data, c, comm);
  p.dp->fit();
  train::TrainConfig one = sync_trainer_config(b * n, one_device);
  one.limit_train = limit;
  p.ref = sync_small_cnn();
  p.one = std::make_unique<train::Trainer>(p.ref, p.data, one);
  p.one->fit();
  return p;
}

}  // namespace kiln::test
