// Hostile input to the io/ readers (issue 18): non-regular files, sizes that wrap 2^64, gzip bombs,
// forged zip directories, images whose headers claim gigapixels, the validation resize of extreme
// aspect ratios, class counts from forged labels, synthetic specs. Each case checks a kiln::Error
// naming the file and the size, and that the refusal is quick (no allocation or inflation first).
// The fuzz targets' regression inputs are replayed by fuzz.<target> (fuzz/CMakeLists.txt).
//   ctest --test-dir build -R io.test_hostile_readers
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <jpeglib.h>

#include "io/data/cifar.h"
#include "io/data/datasets.h"
#include "io/data/idx.h"
#include "io/data/image_folder.h"
#include "io/data/transforms.h"
#include "io/formats/file_bytes.h"
#include "io/formats/npy.h"
#include "io/formats/npz.h"
#include "io/formats/safetensors.h"
#include "tests/support/testing.h"

namespace kiln {
namespace {

using Bytes = std::vector<uint8_t>;

const test::TempDir& dir() {
  static test::TempDir d("hostile");
  return d;
}

std::string write(const std::string& name, const Bytes& b) {
  std::string path = dir() / name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  return path;
}

void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

Bytes idx_header(const std::vector<uint32_t>& dims) {
  Bytes b;
  put_be32(b, 0x800 | uint32_t(dims.size()));
  for (uint32_t d : dims) put_be32(b, d);
  return b;
}

// One gzip member of `data`.
Bytes gzip(const Bytes& data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + 15, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&z, uLong(data.size())));
  z.next_in = const_cast<Bytef*>(data.data());
  z.avail_in = uInt(data.size());
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A 10 GiB gzip bomb in about 10 MB: `head` then 160 members of 64 MiB of zeros each.
Bytes gzip_bomb(const Bytes& head) {
  Bytes out = gzip(head), zeros = gzip(Bytes(size_t(64) << 20, 0));
  for (int i = 0; i < 160; ++i) out.insert(out.end(), zeros.begin(), zeros.end());
  return out;
}

// Bytes the gzip readers inflated while f ran (f's kiln::Error caught): the work a hostile file
// made kiln do, counted, where a clock would only say how busy the machine was.
uint64_t inflated_by(const std::function<void()>& f) {
  const uint64_t before = io::gzip_bytes_inflated();
  try {
    f();
  } catch (const Error&) {
  }
  return io::gzip_bytes_inflated() - before;
}
constexpr uint64_t kMiB = uint64_t(1) << 20;

TEST_CASE("a FIFO, a directory or a device is refused at once, naming the path") {
  std::string fifo = dir() / "fifo-idx3-ubyte";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO nobody writes would block a plain open() for ever (until CTest's timeout ends
  // the test): each reader returning with its error is the check.
  CHECK_THROWS_KILN(read_idx(fifo), "fifo-idx3-ubyte: a FIFO, not a regular file (" + fifo + ")");
  CHECK_THROWS_KILN(read_npy(fifo), "a FIFO, not a regular file");
  CHECK_THROWS_KILN(read_npz(fifo), "a FIFO, not a regular file");
  CHECK_THROWS_KILN(read_cifar_batch(fifo, CifarKind::cifar10), "a FIFO, not a regular file");
  CHECK_THROWS_KILN(load_safetensors(fifo), "a FIFO, not a regular file");
  CHECK_THROWS_KILN(decode_image(fifo), "a FIFO, not a regular file");
  CHECK_THROWS_KILN(io::RegularFile(dir().path.string()), "a directory, not a regular file");
  CHECK_THROWS_KILN(read_npy("/dev/zero"), "zero: a character device, not a regular file (/dev/zero)");
}

TEST_CASE("IDX dims whose product wraps 2^64 are refused, not allocated") {
  // 2^20 * 2^20 * 2^24 = 2^64: wrapped to 0 it once passed the size check with an empty file.
  std::string p = write("wrap-idx4-ubyte", idx_header({1u << 20, 1u << 20, 1u << 24, 1}));
  CHECK_THROWS_KILN(read_idx(p), "wrap-idx4-ubyte: dims at offset 4: shape [1048576, 1048576, 16777216, 1] has more "
                                 "than 2^63 - 1 elements");
  std::string q = write("big-idx3-ubyte", idx_header({60000, 28, 28}));
  CHECK_THROWS_KILN(read_idx(q), "big-idx3-ubyte: truncated at offset 16 + 0: expected 47040000 bytes");
}

TEST_CASE("a gzip IDX claiming more than the expansion bound is refused before inflating") {
  // 100000 x 100000 bytes (10 GB) claimed by a 10 MB file: over 256x, refused from the header.
  std::string p = write("claim-idx2-ubyte.gz", gzip_bomb(idx_header({100000, 100000})));
  CHECK(inflated_by([&] { read_idx(p); }) <= kMiB);  // the header's chunk, not the 10 GiB
  CHECK_THROWS_KILN(read_idx(p), "claim-idx2-ubyte.gz: dims at offset 4 claim 10000000000 bytes of data from a");
  CHECK_THROWS_KILN(read_idx(p), "corrupt or a gzip bomb");
  // A modest claim followed by 10 GB: stopped right after the claimed bytes.
  Bytes head = idx_header({2, 28, 28});
  head.resize(head.size() + 2 * 28 * 28);
  std::string q = write("tail-idx3-ubyte.gz", gzip_bomb(head));
  CHECK(inflated_by([&] { read_idx(q); }) <= 16 + 1568 + kMiB);  // the claim and one chunk past it
  CHECK_THROWS_KILN(read_idx(q), "tail-idx3-ubyte.gz: trailing bytes at offset 16 + 1568");
  // The generic path (CIFAR, .npy, images): the running ratio stops the inflation after ~1 MiB.
  std::string r = write("bomb.bin", gzip_bomb({}));
  // Zeros deflate 1032:1, so 256:1 + 1 MiB is passed after about 1.4 MB; the check runs per MiB.
  CHECK(inflated_by([&] { read_cifar_batch(r, CifarKind::cifar10); }) <= 3 * kMiB);
  CHECK_THROWS_KILN(read_cifar_batch(r, CifarKind::cifar10), "bomb.bin: gzip stream expands to more than");
}

Bytes npy_header(const std::string& descr, const std::string& shape) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(h.size()), uint8_t(h.size() >> 8)};
  b.insert(b.end(), h.begin(), h.end());
  return b;
}

TEST_CASE(".npy shapes whose element or byte count wraps are refused") {
  // 2^40 * 2^24 = 2^64 elements (once wrapped to 0 and accepted with no data).
  std::string p = write("wrap.npy", npy_header("<f4", "(1099511627776, 16777216)"));
  CHECK_THROWS_KILN(read_npy(p), "wrap.npy: shape at offset 10: shape [1099511627776, 16777216] has more than 2^63");
  // 2^62 elements fit int64 but 2^64 bytes of <f4 do not.
  std::string q = write("bytes.npy", npy_header("<f4", "(1073741824, 1073741824, 4)"));
  CHECK_THROWS_KILN(read_npy(q), "bytes.npy: shape at offset 10: size 4611686018427387904 * 4 overflows");
}

void put16(Bytes& b, uint32_t v) {
  b.push_back(uint8_t(v));
  b.push_back(uint8_t(v >> 8));
}
void put32(Bytes& b, uint32_t v) {
  put16(b, v & 0xFFFF);
  put16(b, v >> 16);
}

// A stored zip whose central directory lists `copies` entries for the one local member.
Bytes zip_sharing_one_member(const std::string& name, const Bytes& data, int copies) {
  uint32_t crc = uint32_t(crc32(0, data.data(), uInt(data.size())));
  auto header = [&](Bytes& b, bool central, const std::string& n) {
    put32(b, central ? 0x02014b50 : 0x04034b50);
    if (central) put16(b, 20);
    for (uint32_t v : {20u, 0u, 0u, 0u, 0u}) put16(b, v);
    put32(b, crc);
    put32(b, uint32_t(data.size()));
    put32(b, uint32_t(data.size()));
    put16(b, uint32_t(n.size()));
    put16(b, 0);
    if (central) {
      for (int i = 0; i < 3; ++i) put16(b, 0);
      put32(b, 0);
      put32(b, 0);  // every entry at offset 0
    }
    b.insert(b.end(), n.begin(), n.end());
  };
  Bytes out, central;
  header(out, false, name);
  out.insert(out.end(), data.begin(), data.end());
  for (int i = 0; i < copies; ++i) header(central, true, name);
  uint32_t cd_at = uint32_t(out.size());
  out.insert(out.end(), central.begin(), central.end());
  put32(out, 0x06054b50);
  put32(out, 0);
  put16(out, uint32_t(copies));
  put16(out, uint32_t(copies));
  put32(out, uint32_t(central.size()));
  put32(out, cd_at);
  put16(out, 0);
  return out;
}

TEST_CASE(".npz members may not share bytes (an overlapping-directory zip bomb)") {
  Bytes npy = npy_header("|u1", "(4,)");
  npy.insert(npy.end(), {1, 2, 3, 4});
  std::string p = write("shared.npz", zip_sharing_one_member("x.npy", npy, 1000));
  CHECK_THROWS_KILN(read_npz(p), "shared.npz: members 'x.npy' (offset 0, 132 compressed bytes) and 'x.npy' (offset 0) "
                                 "overlap");
  std::string q = write("single.npz", zip_sharing_one_member("x.npy", npy, 1));
  auto arrays = read_npz(q);
  REQUIRE(arrays.size() == 1);
  CHECK(arrays[0].second.sizes() == Shape{4});
}

Bytes npz_of(const std::vector<std::pair<std::string, Bytes>>& members) {
  // Stored members one after the other (the shared-member builder, once per member).
  Bytes out, central;
  for (const auto& [name, data] : members) {
    Bytes one = zip_sharing_one_member(name, data, 1);
    uint32_t offset = uint32_t(out.size());
    uint32_t local_len = 30 + uint32_t(name.size()) + uint32_t(data.size());
    out.insert(out.end(), one.begin(), one.begin() + local_len);
    Bytes c(one.begin() + local_len, one.begin() + local_len + 46 + name.size());
    for (int i = 0; i < 4; ++i) c[42 + i] = uint8_t(offset >> (8 * i));
    central.insert(central.end(), c.begin(), c.end());
  }
  uint32_t cd_at = uint32_t(out.size());
  out.insert(out.end(), central.begin(), central.end());
  put32(out, 0x06054b50);
  put32(out, 0);
  put16(out, uint32_t(members.size()));
  put16(out, uint32_t(members.size()));
  put32(out, uint32_t(central.size()));
  put32(out, cd_at);
  put16(out, 0);
  return out;
}

TEST_CASE("a class count from a forged label is bounded, naming the file and the label") {
  Bytes x = npy_header("|u1", "(2, 2, 2)");
  x.insert(x.end(), 8, 7);
  Bytes y = npy_header("<i8", "(2,)");
  int64_t labels[2] = {1, int64_t(1) << 62};
  const uint8_t* lp = reinterpret_cast<const uint8_t*>(labels);
  y.insert(y.end(), lp, lp + 16);
  std::string p = write("labels.npz", npz_of({{"x_train.npy", x}, {"y_train.npy", y}, {"x_test.npy", x},
                                               {"y_test.npy", y}}));
  CHECK_THROWS_KILN(open_dataset_dir(p), "labels.npz: label 4611686018427387904 of 'y_train' at index 1 is out of "
                                         "range [0, 1048576)");
}

TEST_CASE("synthetic specs: dims that wrap 2^64 and trailing garbage are refused") {
  CHECK_THROWS_KILN(open_dataset_dir("synthetic:4294967296x4294967296x4294967296:10:5"),
                    "synthetic spec 'synthetic:4294967296x4294967296x4294967296:10:5': sample "
                    "4294967296x4294967296x4294967296: shape [4294967296, 4294967296, 4294967296] has more than 2^63");
  CHECK_THROWS_KILN(open_dataset_dir("synthetic:3x4a:10:5"), "bad synthetic spec 'synthetic:3x4a:10:5'");
  CHECK_THROWS_KILN(open_dataset_dir("synthetic:3x4:99999999999999999999:5"), "bad synthetic spec");
  CHECK_THROWS_KILN(open_dataset_dir("synthetic:3x4:2000000:5"), "2000000 classes, at most 1048576");
  // Within 2^63 but asking for terabytes: a 40 GB sample, 10^14 samples (an index each).
  CHECK_THROWS_KILN(open_dataset_dir("synthetic:1x100000x100000:10:5"), "a sample of 10000000000 values, at most 268435456");
  CHECK_THROWS_KILN(open_dataset_dir("synthetic:1x4x4:10:100000000000000"),
                    "100000000000000 samples, at most 268435456");
  CHECK_THROWS_KILN(SyntheticDataset({int64_t(1) << 62, 4}, 2, 2), "SyntheticDataset: sample shape: shape [4611686018427387904, 4] has more");
  Splits s = open_dataset_dir("synthetic:1x4x4:3:20");
  CHECK(s.train->size() == 20);
}

TEST_CASE("safetensors: a header length over the 100 MB limit is refused before it is read") {
  std::string p = dir() / "sparse.safetensors";
  {
    std::ofstream f(p, std::ios::binary);
    uint64_t n = uint64_t(150) << 20;
    f.write(reinterpret_cast<const char*>(&n), 8);
  }
  REQUIRE(::truncate(p.c_str(), off_t(200) << 20) == 0);  // sparse: no disk used
  CHECK_THROWS_KILN(load_safetensors(p), "header length 157286400 (at byte 0) is over the 104857600-byte limit");
}

Bytes safetensors_with_header(std::string h) {
  h.append((8 - h.size() % 8) % 8, ' ');
  Bytes b;
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(uint64_t(h.size()) >> (8 * i)));
  b.insert(b.end(), h.begin(), h.end());
  return b;
}

TEST_CASE("safetensors: JSON numbers out of range and deep nesting are errors, not library exceptions") {
  // nlohmann throws out_of_range (not parse_error) for "1E400": found by the fuzz target.
  std::string p = write("bignum.safetensors", safetensors_with_header(R"({"a": {"dtype": "F32", "shape": [1E400]}})"));
  CHECK_THROWS_KILN(load_safetensors(p), "bignum.safetensors': invalid JSON header: [json.exception.out_of_range.406]");
  std::string q = write("deep.safetensors", safetensors_with_header(std::string(100000, '[') + std::string(100000, ']')));
  CHECK_THROWS_KILN(load_safetensors(q), "deep.safetensors': header: JSON nested deeper than 64 levels");
}

// A valid 8x8 gray JPEG from libjpeg, then its SOF0 dims patched to `h` x `w`.
Bytes jpeg_claiming(uint16_t h, uint16_t w) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = 8;
  c.image_height = 8;
  c.input_components = 1;
  c.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_start_compress(&c, TRUE);
  uint8_t row[8] = {0, 32, 64, 96, 128, 160, 192, 224};
  JSAMPROW r = row;
  while (c.next_scanline < 8) jpeg_write_scanlines(&c, &r, 1);
  jpeg_finish_compress(&c);
  Bytes b(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  for (size_t i = 2; i + 9 < b.size(); ++i)
    if (b[i] == 0xFF && b[i + 1] == 0xC0) {  // SOF0: length(2) precision(1) height(2) width(2)
      b[i + 5] = uint8_t(h >> 8), b[i + 6] = uint8_t(h), b[i + 7] = uint8_t(w >> 8), b[i + 8] = uint8_t(w);
      return b;
    }
  FAIL("no SOF0 marker");
  return b;
}

TEST_CASE("images: a header claiming more than the decode limit is refused before decoding") {
  Bytes ok = jpeg_claiming(8, 8);
  CHECK(decode_image_bytes(ok.data(), ok.size(), "ok.jpg").sizes() == Shape{1, 8, 8});
  Bytes big = jpeg_claiming(65000, 65000);
  std::string p = write("big.jpg", big);
  // The limit is checked on the header's size before any scanline is decoded: the message is that
  // check's (a decoder that ran first would fail allocating 4 GB, or decode for minutes).
  CHECK_THROWS_KILN(decode_image(p), "big.jpg: JPEG decoding failed: 65000x65000x1 image is over the 268435456-value "
                                     "limit");
  // PNG: IHDR of 100000 x 100000 RGB in a 57-byte file cannot be real (deflate packs 1032:1 at most).
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  Bytes ihdr = {'I', 'H', 'D', 'R', 0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0, 8, 2, 0, 0, 0};
  png.insert(png.end(), ihdr.begin() + 4, ihdr.end());
  uint32_t crc = uint32_t(crc32(0, ihdr.data(), uInt(ihdr.size())));
  for (int s = 24; s >= 0; s -= 8) png.push_back(uint8_t(crc >> s));
  Bytes idat = {'I', 'D', 'A', 'T'};  // empty: png_read_info stops at the first IDAT
  crc = uint32_t(crc32(0, idat.data(), 4));
  png.insert(png.end(), {0, 0, 0, 0, 'I', 'D', 'A', 'T'});
  for (int s = 24; s >= 0; s -= 8) png.push_back(uint8_t(crc >> s));
  png.insert(png.end(), {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82});
  std::string q = write("big.png", png);
  CHECK_THROWS_KILN(decode_image(q), "big.png: PNG decoding failed at offset 41: 100000x100000 image needs "
                                     "30000100000 bytes of rows, more than a 57-byte file can hold");
}

TEST_CASE("the validation resize of an extreme aspect ratio is bounded, naming the sizes") {
  Tensor thin = zeros({3, 1, 65000}, uint8);
  SampleRng rng(0, 0, 0);
  CHECK_THROWS_KILN(resize_shorter(256)->apply(thin, rng), "resize_shorter(256): 1x65000 image would become "
                                                           "256x16640000 (3 channels), over the 67108864-value "
                                                           "resize limit");
  CHECK_THROWS_KILN(resize_image(thin, 100000, 100000), "resize_image: 1x65000 image (3 channels) resized to "
                                                         "100000x100000 is over the 67108864-value resize limit");
  Tensor wide = zeros({3, 10, 400}, uint8);  // 40:1 is fine
  CHECK(resize_shorter(256)->apply(wide, rng).sizes() == Shape{3, 256, 10240});
}

}  // namespace
}  // namespace kiln
