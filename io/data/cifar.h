// CIFAR-10 / CIFAR-100 binary version (https://www.cs.toronto.edu/~kriz/cifar.html). CIFAR-10:
// data_batch_1..5.bin and test_batch.bin, records of 1 label byte + 3072 pixel bytes (R, G, B
// planes of 32x32). CIFAR-100: train.bin and test.bin, records of 2 label bytes (coarse, fine)
// + 3072 pixel bytes.
//   ctest --test-dir build -R test_readers
#pragma once

#include <string>
#include <vector>

#include "io/data/dataset.h"

namespace kiln {

enum class CifarKind { cifar10, cifar100 };

// One batch file: images uint8 [n, 3, 32, 32], labels uint8 [n] (CIFAR-10) or [n, 2] (CIFAR-100:
// coarse, fine). Throws kiln::Error naming the file and offset when the size is not a whole
// number of records or a label is out of range (10; 20 coarse / 100 fine).
struct CifarBatch {
  Tensor images;
  Tensor labels;
};
CifarBatch read_cifar_batch(const std::string& path, CifarKind kind);
// The same from the file's bytes in memory (already decompressed); `name` starts every message.
CifarBatch parse_cifar_batch(const uint8_t* data, size_t size, const std::string& name, CifarKind kind);

// Reads the train or test files of `dir` (CIFAR-10: data_batch_1..5.bin / test_batch.bin;
// CIFAR-100: train.bin / test.bin). Inputs float32 [3, 32, 32] in [0, 1]; targets int64 scalars
// (CIFAR-100: the fine label, or the coarse one when `coarse`).
class CifarDataset : public Dataset {
 public:
  CifarDataset(const std::string& dir, bool train, CifarKind kind = CifarKind::cifar10, bool coarse = false);
  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;
  Shape sample_shape() const override { return {3, 32, 32}; }
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }

 private:
  Tensor images_;  // uint8 [n, 3, 32, 32]
  Tensor labels_;  // uint8 [n] or [n, 2]
  int label_column_ = 0;
  int label_stride_ = 1;
};

}  // namespace kiln
