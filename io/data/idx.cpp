// IDX reader and MnistDataset. See idx.h.
#include "io/data/idx.h"

#include <cstring>

#include "engine/checked_size.h"
#include "io/formats/file_bytes.h"

namespace kiln {

namespace {

// The header's dims and element count, from its first 4 + 4 * ndims bytes. `more(n)` makes at
// least n header bytes available (or throws "truncated"); `have` says how many there are.
struct IdxHeader {
  Shape dims;
  uint64_t count = 1;
  size_t bytes = 0;
};

template <class Fetch>
IdxHeader idx_header(Fetch&& fetch, const std::string& name) {
  uint8_t h[4 + 4 * 4];
  fetch(h, 4, "truncated at offset 0: expected a 4-byte IDX magic");
  uint32_t magic = io::read_be32(h);
  uint32_t type = (magic >> 8) & 0xff, ndims = magic & 0xff;
  KILN_CHECK((magic >> 16) == 0 && type == 0x08 && ndims >= 1 && ndims <= 4, name,
             ": bad IDX magic at offset 0: 0x", std::hex, magic, std::dec,
             " (expected 0x00000801..0x00000804, unsigned bytes with 1-4 dims)");
  IdxHeader out;
  out.bytes = 4 + 4 * size_t(ndims);
  fetch(h + 4, 4 * size_t(ndims), "truncated at offset 4: expected 4-byte dims");
  for (uint32_t d = 0; d < ndims; ++d) {
    uint32_t v = io::read_be32(h + 4 + 4 * d);
    KILN_CHECK(v > 0, name, ": dim ", d, " at offset ", 4 + 4 * d, " is 0");
    out.dims.push_back(int64_t(v));
  }
  // Four 32-bit dims can reach 2^128: the count is checked as it is formed.
  out.count = uint64_t(checked_numel(out.dims, name + ": dims at offset 4"));
  return out;
}

Tensor idx_plain(const uint8_t* b, size_t size, const std::string& name) {
  size_t at = 0;
  IdxHeader h = idx_header(
      [&](uint8_t* dst, size_t n, const char* why) {
        KILN_CHECK(size - at >= n, name, ": ", why, ", file has ", size, " bytes");
        std::memcpy(dst, b + at, n);
        at += n;
      },
      name);
  uint64_t have = size - h.bytes;
  KILN_CHECK(have >= h.count, name, ": truncated at offset ", h.bytes, " + ", have, ": expected ", h.count,
             " bytes of data, file has ", have);
  KILN_CHECK(have == h.count, name, ": ", have - h.count, " trailing bytes at offset ", h.bytes, " + ", h.count,
             ": dims give ", h.count, " bytes of data, file has ", have);
  Tensor t = empty(h.dims, uint8);
  std::memcpy(t.data_ptr(), b + h.bytes, h.count);
  return t;
}

Tensor idx_gzip(const uint8_t* b, size_t size, const std::string& name) {
  io::GzipReader gz(b, size, name);
  IdxHeader h = idx_header(
      [&](uint8_t* dst, size_t n, const char* why) {
        size_t got = gz.read(dst, n);
        KILN_CHECK(got == n, name, ": ", why, ", the gzip stream has ", gz.produced(), " bytes");
      },
      name);
  uint64_t bound = io::gzip_bound(size);
  KILN_CHECK(h.count <= bound, name, ": dims at offset 4 claim ", h.count, " bytes of data from a ", size,
             "-byte gzip file, over the ", bound, "-byte limit (", io::kMaxGzipRatio,
             "x the compressed size + 1 MiB, at most 4 GiB): corrupt or a gzip bomb");
  Tensor t = empty(h.dims, uint8);
  size_t got = gz.read(t.data<uint8_t>(), size_t(h.count));
  KILN_CHECK(got == h.count, name, ": truncated at offset ", h.bytes, " + ", got, ": expected ", h.count,
             " bytes of data, the gzip stream has ", got);
  uint8_t extra[4096];
  size_t more = gz.read(extra, sizeof extra);
  KILN_CHECK(more == 0, name, ": trailing bytes at offset ", h.bytes, " + ", h.count, ": dims give ", h.count,
             " bytes of data, the gzip stream has more");
  return t;
}

}  // namespace

Tensor parse_idx(const uint8_t* data, size_t size, const std::string& name) {
  return io::is_gzip(data, size) ? idx_gzip(data, size, name) : idx_plain(data, size, name);
}

namespace {

std::string find_file(const std::string& dir, const std::string& stem) {
  std::string plain = dir + "/" + stem;
  if (io::file_exists(plain)) return plain;
  if (io::file_exists(plain + ".gz")) return plain + ".gz";
  KILN_THROW("MnistDataset: neither ", stem, " nor ", stem, ".gz in ", dir);
}

}  // namespace

Tensor read_idx(const std::string& path) {
  std::vector<uint8_t> raw = io::read_raw_bytes(path);
  return parse_idx(raw.data(), raw.size(), io::base_name(path));
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
