// MNIST / Fashion-MNIST IDX files (http://yann.lecun.com/exdb/mnist/): a big-endian header
// (magic 0x00000800 | type << 8 | ndims, then ndims uint32 dims) followed by the data. Only
// unsigned bytes (type 0x08) are read: images 0x00000803, labels 0x00000801. Plain or gzip.
//   ctest --test-dir build -R test_readers
#pragma once

#include <string>

#include "io/data/dataset.h"

namespace kiln {

// The file as a uint8 tensor with the file's dims. Throws kiln::Error naming the file and the
// byte offset on a bad magic, a zero or oversized dim, or a size that disagrees with the dims.
Tensor read_idx(const std::string& path);

// The same from the file's bytes in memory (plain or gzip); `name` starts every message. A gzip
// stream is inflated straight into the tensor after its header: the element count the header
// claims must fit io::gzip_bound(size) (file_bytes.h) before anything is allocated, and inflation
// stops one byte past it, so a gzip bomb is refused at once whatever it expands to.
Tensor parse_idx(const uint8_t* data, size_t size, const std::string& name);

// dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. Inputs float32 [1, rows, cols] in
// [0, 1]; targets int64 scalars in [0, 10). Checks image and label counts agree and labels < 10.
class MnistDataset : public Dataset {
 public:
  MnistDataset(const std::string& dir, bool train);
  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;
  Shape sample_shape() const override { return {1, images_.size(1), images_.size(2)}; }
  const Tensor& images() const { return images_; }  // uint8 [n, rows, cols]
  const Tensor& labels() const { return labels_; }  // uint8 [n]

 private:
  Tensor images_;
  Tensor labels_;
};

}  // namespace kiln
