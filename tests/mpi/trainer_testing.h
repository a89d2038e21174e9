// The Trainer setup the synchronous data-parallel tests share (tests/mpi/test_sync.cpp on the CPU,
// tests/emu_device/mpi/test_sync_cuda.cpp on emulated CUDA devices): a learnable synthetic data
// set, a small conv + batch-norm net, and a one-epoch SGD configuration without progress output.
#pragma once

#include <memory>

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

}  // namespace kiln::test
