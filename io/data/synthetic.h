// In-memory data sets: SyntheticDataset (deterministic random images and labels, for smoke runs
// and benchmarks without files: "synthetic:CxHxW:CLASSES:N"; with ":learnable" each image also
// carries its class as a brighter band of rows, so a training run on a machine with no data set
// can show that a net learns) and TensorDataset (rows of two tensors, e.g. arrays read from a .npz).
//   ctest --test-dir build -R test_dataloader
#pragma once

#include "io/data/dataset.h"

namespace kiln {

// Example i: input float32 `sample` uniform in [0, 1), target int64 scalar in [0, classes); both a
// pure function of (seed, i) (Philox), generated on demand. learnable: rows [c*H/classes,
// (c+1)*H/classes) of every channel (at least one row) get +1 for class c.
class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(Shape sample, int64_t classes, int64_t size, uint64_t seed = 0, bool learnable = false);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  Shape sample_shape() const override { return sample_; }
  int64_t classes() const { return classes_; }

 private:
  Shape sample_;
  int64_t classes_, size_;
  uint64_t seed_;
  bool learnable_;
};

// Example i: (inputs[i], targets[i]) as views of row i. Both need the same first dim.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets);
  int64_t size() const override { return inputs_.size(0); }
  Example get(int64_t index) const override;
  Shape sample_shape() const override;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_, targets_;
};

}  // namespace kiln
