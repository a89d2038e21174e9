// What the e2e training tests share: a small mnist-cnn recipe (2 epochs of 10 steps, Adam with a
// cosine schedule, logs every step into `dir`) and the net made from a fixed seed. Each test
// changes what it exercises from there.
#pragma once

#include <cstdint>
#include <filesystem>

#include "engine/random.h"
#include "nets/zoo.h"
#include "train/trainer.h"

namespace kiln::test {

inline train::TrainConfig small_train_config(const std::filesystem::path& dir) {
  train::TrainConfig c;
  c.model_name = "mnist-cnn";
  c.epochs = 2;
  c.batch_size = 64;
  c.optimizer.name = "adam";
  c.optimizer.lr = 1e-3;
  c.schedule = "cosine";
  c.warmup_epochs = 0.25;
  c.limit_train = 640;  // 10 steps per epoch
  c.limit_test = 256;
  c.workers = 2;
  c.seed = 5;
  c.logdir = dir.string();
  c.log_every = 1;
  c.progress = false;
  return c;
}

inline ModulePtr fresh_mnist_cnn(uint64_t seed) {
  manual_seed(seed);
  return nets::build("mnist-cnn");
}

}  // namespace kiln::test
