// IDX reader and MnistDataset. See idx.h.
#include "io/data/idx.h"

#include <cstring>

#include "io/formats/file_bytes.h"

namespace kiln {

namespace {

Tensor idx_from_bytes(const std::vector<uint8_t>& b, const std::string& name) {
  KILN_CHECK(b.size() >= 4, name, ": truncated at offset 0: expected a 4-byte IDX magic, file has ",
             b.size(), " bytes");
  uint32_t magic = io::read_be32(b.data());
  uint32_t type = (magic >> 8) & 0xff, ndims = magic & 0xff;
  KILN_CHECK((magic >> 16) == 0 && type == 0x08 && ndims >= 1 && ndims <= 4, name,
             ": bad IDX magic at offset 0: 0x", std::hex, magic, std::dec,
             " (expected 0x00000801..0x00000804, unsigned bytes with 1-4 dims)");
  size_t header = 4 + 4 * size_t(ndims);
  KILN_CHECK(b.size() >= header, name, ": truncated at offset 4: expected ", ndims,
             " 4-byte dims, file has ", b.size(), " bytes");
  Shape dims;
  uint64_t count = 1;
  for (uint32_t d = 0; d < ndims; ++d) {
    uint32_t v = io::read_be32(b.data() + 4 + 4 * d);
    KILN_CHECK(v > 0, name, ": dim ", d, " at offset ", 4 + 4 * d, " is 0");
    count *= v;
    KILN_CHECK(count <= (uint64_t(1) << 40), name, ": dims at offset 4 give more than 2^40 elements");
    dims.push_back(int64_t(v));
  }
  uint64_t have = b.size() - header;
  KILN_CHECK(have >= count, name, ": truncated at offset ", header, " + ", have, ": expected ", count,
             " bytes of data, file has ", have);
  KILN_CHECK(have == count, name, ": ", have - count, " trailing bytes at offset ", header, " + ", count,
             ": dims give ", count, " bytes of data, file has ", have);
  Tensor t = empty(dims, uint8);
  std::memcpy(t.data_ptr(), b.data() + header, count);
  return t;
}

std::string find_file(const std::string& dir, const std::string& stem) {
  std::string plain = dir + "/" + stem;
  if (io::file_exists(plain)) return plain;
  if (io::file_exists(plain + ".gz")) return plain + ".gz";
  KILN_THROW("MnistDataset: neither ", stem, " nor ", stem, ".gz in ", dir);
}

}  // namespace

Tensor read_idx(const std::string& path) {
  return idx_from_bytes(io::read_file_bytes(path), io::base_name(path));
}

MnistDataset::MnistDataset(const std::string& dir, bool train) {
  std::string prefix = train ? "train" : "t10k";
  std::string ipath = find_file(dir, prefix + "-images-idx3-ubyte");
  std::string lpath = find_file(dir, prefix + "-labels-idx1-ubyte");
  std::string iname = io::base_name(ipath), lname = io::base_name(lpath);
  images_ = read_idx(ipath);
  labels_ = read_idx(lpath);
  KILN_CHECK(images_.dim() == 3, iname, ": bad IDX magic at offset 0: expected 3 dims (0x00000803), got ",
             images_.dim());
  KILN_CHECK(labels_.dim() == 1, lname, ": bad IDX magic at offset 0: expected 1 dim (0x00000801), got ",
             labels_.dim());
  KILN_CHECK(labels_.size(0) == images_.size(0), lname, ": label count ", labels_.size(0),
             " (offset 4) != image count ", images_.size(0), " in ", iname);
  const uint8_t* l = labels_.data<uint8_t>();
  for (int64_t i = 0; i < labels_.size(0); ++i)
    KILN_CHECK(l[i] < 10, lname, ": label ", int(l[i]), " out of range [0, 10) at offset 8 + ", i);
}

Example MnistDataset::get(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size(), "MnistDataset::get: index ", index, " out of range [0, ",
             size(), ")");
  int64_t rows = images_.size(1), cols = images_.size(2), n = rows * cols;
  Tensor x = empty({1, rows, cols}, float32);
  const uint8_t* src = images_.data<uint8_t>() + index * n;
  float* dst = x.data<float>();
  for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]) * (1.0f / 255.0f);
  Tensor y = empty(Shape{}, int64);
  *y.data<int64_t>() = labels_.data<uint8_t>()[index];
  return {x, y};
}

}  // namespace kiln
