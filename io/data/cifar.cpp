// CIFAR binary reader. See cifar.h.
#include "io/data/cifar.h"

#include <cstring>

#include "io/formats/file_bytes.h"

namespace kiln {

namespace {
constexpr int64_t kPixels = 3 * 32 * 32;
}

CifarBatch read_cifar_batch(const std::string& path, CifarKind kind) {
  std::vector<uint8_t> b = io::read_file_bytes(path);
  return parse_cifar_batch(b.data(), b.size(), io::base_name(path), kind);
}

CifarBatch parse_cifar_batch(const uint8_t* data, size_t bytes, const std::string& name, CifarKind kind) {
  int64_t nlabels = kind == CifarKind::cifar10 ? 1 : 2;
  int64_t record = nlabels + kPixels;
  // The record count comes from the size, so the tensors are exactly the file's bytes.
  int64_t size = int64_t(bytes);
  KILN_CHECK(size > 0, name, ": empty file (expected records of ", record, " bytes)");
  int64_t n = size / record;
  KILN_CHECK(size % record == 0, name, ": truncated at offset ", n * record, " (record ", n, "): expected ",
             record, "-byte records (", nlabels, " label byte", nlabels > 1 ? "s" : "",
             " + 3072 pixels), file has ", size, " bytes");
  CifarBatch out;
  out.images = empty({n, 3, 32, 32}, uint8);
  out.labels = nlabels == 1 ? empty({n}, uint8) : empty({n, 2}, uint8);
  uint8_t* img = out.images.data<uint8_t>();
  uint8_t* lab = out.labels.data<uint8_t>();
  const int limits[2] = {kind == CifarKind::cifar10 ? 10 : 20, 100};
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* rec = data + r * record;
    for (int64_t j = 0; j < nlabels; ++j) {
      int limit = kind == CifarKind::cifar10 ? 10 : limits[j];
      KILN_CHECK(rec[j] < limit, name, ": label ", int(rec[j]), " out of range [0, ", limit, ") at offset ",
                 r * record + j, " (record ", r, ")");
      lab[r * nlabels + j] = rec[j];
    }
    std::memcpy(img + r * kPixels, rec + nlabels, kPixels);
  }
  return out;
}

CifarDataset::CifarDataset(const std::string& dir, bool train, CifarKind kind, bool coarse) {
  std::vector<std::string> files;
  if (kind == CifarKind::cifar10) {
    if (train)
      for (int i = 1; i <= 5; ++i) files.push_back(dir + "/data_batch_" + std::to_string(i) + ".bin");
    else
      files.push_back(dir + "/test_batch.bin");
  } else {
    files.push_back(dir + (train ? "/train.bin" : "/test.bin"));
    label_stride_ = 2;
    label_column_ = coarse ? 0 : 1;
  }
  std::vector<CifarBatch> batches;
  int64_t n = 0;
  for (const std::string& f : files) {
    batches.push_back(read_cifar_batch(f, kind));
    n += batches.back().images.size(0);
  }
  images_ = empty({n, 3, 32, 32}, uint8);
  labels_ = label_stride_ == 1 ? empty({n}, uint8) : empty({n, 2}, uint8);
  int64_t at = 0;
  for (const CifarBatch& b : batches) {
    int64_t m = b.images.size(0);
    std::memcpy(images_.data<uint8_t>() + at * kPixels, b.images.data_ptr(), m * kPixels);
    std::memcpy(labels_.data<uint8_t>() + at * label_stride_, b.labels.data_ptr(), m * label_stride_);
    at += m;
  }
}

Example CifarDataset::get(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size(), "CifarDataset::get: index ", index, " out of range [0, ",
             size(), ")");
  Tensor x = empty({3, 32, 32}, float32);
  const uint8_t* src = images_.data<uint8_t>() + index * kPixels;
  float* dst = x.data<float>();
  for (int64_t i = 0; i < kPixels; ++i) dst[i] = float(src[i]) * (1.0f / 255.0f);
  Tensor y = empty(Shape{}, int64);
  *y.data<int64_t>() = labels_.data<uint8_t>()[index * label_stride_ + label_column_];
  return {x, y};
}

}  // namespace kiln
