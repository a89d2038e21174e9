// Data set readers in io/: IDX (plain and gzip), CIFAR-10/100 binary batches, .npy. Each test
// writes small files into a temporary directory, reads them back and checks values; every
// corruption case checks that the message names the file and the byte offset. .npy files
// written by numpy itself: test_python_interop.cpp.
//   ctest --test-dir build -R test_readers
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "io/data/cifar.h"
#include "io/data/idx.h"
#include "io/formats/npy.h"
#include "tests/support/testing.h"

namespace kiln {
namespace {

using Bytes = std::vector<uint8_t>;

// One directory per run, removed when the test program exits.
struct TempDir {
  std::string path;
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf '" + path + "'").c_str());
  }
};

std::string temp_dir() {
  static TempDir dir{[] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/kiln_io_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    return std::string(buf.data());
  }()};
  return dir.path;
}

std::string sub_dir(const std::string& name) {
  std::string d = temp_dir() + "/" + name;
  mkdir(d.c_str(), 0755);
  return d;
}

void write_file(const std::string& path, const Bytes& b) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!b.empty()) REQUIRE(std::fwrite(b.data(), 1, b.size(), f) == b.size());
  std::fclose(f);
}

void write_gz(const std::string& path, const Bytes& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, b.data(), unsigned(b.size())) == int(b.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

Bytes read_raw(const std::string& path) {
  Bytes b;
  FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  int c;
  while ((c = std::fgetc(f)) != EOF) b.push_back(uint8_t(c));
  std::fclose(f);
  return b;
}

void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

Bytes idx_images(uint32_t n, uint32_t rows, uint32_t cols) {
  Bytes b;
  put_be32(b, 0x803);
  put_be32(b, n);
  put_be32(b, rows);
  put_be32(b, cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) b.push_back(uint8_t((i * 7) % 256));
  return b;
}

Bytes idx_labels(const Bytes& labels) {
  Bytes b;
  put_be32(b, 0x801);
  put_be32(b, uint32_t(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

TEST_CASE("read_idx: plain and gzip give the file's dims and bytes") {
  std::string d = sub_dir("idx");
  Bytes img = idx_images(3, 4, 5);
  write_file(d + "/a-idx3-ubyte", img);
  write_gz(d + "/a-idx3-ubyte.gz", img);
  for (const char* f : {"/a-idx3-ubyte", "/a-idx3-ubyte.gz"}) {
    Tensor t = read_idx(d + f);
    CHECK(t.dtype() == uint8);
    CHECK(t.sizes() == Shape{3, 4, 5});
    const uint8_t* p = t.data<uint8_t>();
    for (int i = 0; i < 60; ++i) CHECK(p[i] == uint8_t((i * 7) % 256));
  }
}

TEST_CASE("read_idx: every corruption names the file and the offset") {
  std::string d = sub_dir("idx_bad");
  Bytes img = idx_images(2, 28, 28);

  Bytes bad_magic = img;
  bad_magic[2] = 0x0d;  // type 0x0d (float) is not read
  write_file(d + "/magic-idx3-ubyte", bad_magic);
  CHECK_THROWS_KILN(read_idx(d + "/magic-idx3-ubyte"), "magic-idx3-ubyte: bad IDX magic at offset 0: 0xd03");

  Bytes trunc(img.begin(), img.begin() + 16 + 1000);
  write_file(d + "/trunc-idx3-ubyte", trunc);
  CHECK_THROWS_KILN(read_idx(d + "/trunc-idx3-ubyte"),
                    "trunc-idx3-ubyte: truncated at offset 16 + 1000: expected 1568 bytes of data, file has 1000");

  Bytes header_only(img.begin(), img.begin() + 9);
  write_file(d + "/head-idx3-ubyte", header_only);
  CHECK_THROWS_KILN(read_idx(d + "/head-idx3-ubyte"), "head-idx3-ubyte: truncated at offset 4");

  write_file(d + "/tiny-idx3-ubyte", Bytes{0, 0});
  CHECK_THROWS_KILN(read_idx(d + "/tiny-idx3-ubyte"), "tiny-idx3-ubyte: truncated at offset 0");

  Bytes extra = img;
  extra.push_back(1);
  write_file(d + "/extra-idx3-ubyte", extra);
  CHECK_THROWS_KILN(read_idx(d + "/extra-idx3-ubyte"), "extra-idx3-ubyte: 1 trailing bytes at offset 16 + 1568");

  Bytes zero = img;
  zero[8] = zero[9] = zero[10] = zero[11] = 0;  // rows = 0
  write_file(d + "/zero-idx3-ubyte", zero);
  CHECK_THROWS_KILN(read_idx(d + "/zero-idx3-ubyte"), "zero-idx3-ubyte: dim 1 at offset 8 is 0");

  // A gzip stream cut short is reported, not read as a short file.
  write_gz(d + "/cut-idx3-ubyte.gz", img);
  Bytes gz = read_raw(d + "/cut-idx3-ubyte.gz");
  gz.resize(gz.size() / 2);
  write_file(d + "/cut-idx3-ubyte.gz", gz);
  CHECK_THROWS_KILN(read_idx(d + "/cut-idx3-ubyte.gz"), "cut-idx3-ubyte.gz: corrupt or truncated gzip stream");

  CHECK_THROWS_KILN(read_idx(d + "/missing-idx3-ubyte"), "missing-idx3-ubyte: no such file");
}

TEST_CASE("MnistDataset: float32 [1,28,28] in [0,1], int64 labels, gz found") {
  std::string d = sub_dir("mnist");
  write_gz(d + "/train-images-idx3-ubyte.gz", idx_images(3, 28, 28));
  write_file(d + "/train-labels-idx1-ubyte", idx_labels({7, 0, 9}));
  MnistDataset ds(d, true);
  CHECK(ds.size() == 3);
  CHECK(ds.sample_shape() == Shape{1, 28, 28});
  Example e = ds.get(1);
  CHECK(e.input.dtype() == float32);
  CHECK(e.input.sizes() == Shape{1, 28, 28});
  CHECK(e.target.dtype() == int64);
  CHECK(e.target.dim() == 0);
  CHECK(*e.target.data<int64_t>() == 0);
  const float* x = e.input.data<float>();
  for (int i = 0; i < 784; i += 97) CHECK(x[i] == doctest::Approx(((784 + i) * 7 % 256) / 255.0));
  CHECK(*ds.get(2).target.data<int64_t>() == 9);
  CHECK_THROWS_KILN(ds.get(3), "index 3 out of range [0, 3)");
  CHECK_THROWS_KILN(MnistDataset(d, false), "neither t10k-images-idx3-ubyte nor t10k-images-idx3-ubyte.gz");
}

TEST_CASE("MnistDataset: label count and label range are checked") {
  std::string d = sub_dir("mnist_bad");
  write_file(d + "/train-images-idx3-ubyte", idx_images(3, 28, 28));
  write_file(d + "/train-labels-idx1-ubyte", idx_labels({1, 2}));
  CHECK_THROWS_KILN(MnistDataset(d, true),
                    "train-labels-idx1-ubyte: label count 2 (offset 4) != image count 3 in train-images-idx3-ubyte");
  write_file(d + "/train-labels-idx1-ubyte", idx_labels({1, 2, 10}));
  CHECK_THROWS_KILN(MnistDataset(d, true), "train-labels-idx1-ubyte: label 10 out of range [0, 10) at offset 8 + 2");
  write_file(d + "/train-labels-idx1-ubyte", idx_images(3, 1, 1));  // 3 dims where 1 expected
  CHECK_THROWS_KILN(MnistDataset(d, true), "train-labels-idx1-ubyte: bad IDX magic at offset 0: expected 1 dim");
}

Bytes cifar_records(int n, int nlabels, int first_label) {
  Bytes b;
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < nlabels; ++j) b.push_back(uint8_t((first_label + r + j) % 10));
    for (int i = 0; i < 3072; ++i) b.push_back(uint8_t((r * 31 + i) % 256));
  }
  return b;
}

TEST_CASE("CIFAR-10: five train batches and the test batch") {
  std::string d = sub_dir("cifar10");
  for (int i = 1; i <= 5; ++i) write_file(d + "/data_batch_" + std::to_string(i) + ".bin", cifar_records(2, 1, i));
  write_file(d + "/test_batch.bin", cifar_records(3, 1, 0));
  CifarDataset train(d, true);
  CHECK(train.size() == 10);
  CHECK(train.sample_shape() == Shape{3, 32, 32});
  // Record 1 of batch 3 is example 5: label (3 + 1) % 10 = 4, pixels (31 + i) % 256.
  Example e = train.get(5);
  CHECK(*e.target.data<int64_t>() == 4);
  CHECK(e.input.sizes() == Shape{3, 32, 32});
  CHECK(e.input.data<float>()[0] == doctest::Approx(31 / 255.0));
  CHECK(e.input.data<float>()[1024 + 5] == doctest::Approx(((31 + 1029) % 256) / 255.0));
  CifarDataset test(d, false);
  CHECK(test.size() == 3);
  CHECK(*test.get(2).target.data<int64_t>() == 2);

  CifarBatch b = read_cifar_batch(d + "/test_batch.bin", CifarKind::cifar10);
  CHECK(b.images.sizes() == Shape{3, 3, 32, 32});
  CHECK(b.labels.sizes() == Shape{3});
}

TEST_CASE("CIFAR-100: coarse and fine labels") {
  std::string d = sub_dir("cifar100");
  Bytes recs = cifar_records(2, 2, 0);
  recs[3074] = 17;  // record 1: coarse 17
  recs[3075] = 93;  // record 1: fine 93
  write_file(d + "/train.bin", recs);
  CifarDataset fine(d, true, CifarKind::cifar100);
  CifarDataset coarse(d, true, CifarKind::cifar100, true);
  CHECK(fine.size() == 2);
  CHECK(*fine.get(1).target.data<int64_t>() == 93);
  CHECK(*coarse.get(1).target.data<int64_t>() == 17);
  CHECK(fine.labels().sizes() == Shape{2, 2});
  CHECK(fine.get(1).input.data<float>()[0] == doctest::Approx(31 / 255.0));
}

TEST_CASE("CIFAR: truncation and labels out of range name the file and offset") {
  std::string d = sub_dir("cifar_bad");
  Bytes recs = cifar_records(2, 1, 0);
  recs.resize(3073 + 100);
  write_file(d + "/short.bin", recs);
  CHECK_THROWS_KILN(read_cifar_batch(d + "/short.bin", CifarKind::cifar10),
                    "short.bin: truncated at offset 3073 (record 1): expected 3073-byte records");
  write_file(d + "/empty.bin", {});
  CHECK_THROWS_KILN(read_cifar_batch(d + "/empty.bin", CifarKind::cifar10), "empty.bin: empty file");

  recs = cifar_records(2, 1, 0);
  recs[3073] = 10;
  write_file(d + "/label.bin", recs);
  CHECK_THROWS_KILN(read_cifar_batch(d + "/label.bin", CifarKind::cifar10),
                    "label.bin: label 10 out of range [0, 10) at offset 3073 (record 1)");

  recs = cifar_records(2, 2, 0);
  recs[0] = 20;  // coarse labels are < 20
  write_file(d + "/coarse.bin", recs);
  CHECK_THROWS_KILN(read_cifar_batch(d + "/coarse.bin", CifarKind::cifar100),
                    "coarse.bin: label 20 out of range [0, 20) at offset 0 (record 0)");
  recs = cifar_records(2, 2, 0);
  recs[3074 + 1] = 100;
  write_file(d + "/fine.bin", recs);
  CHECK_THROWS_KILN(read_cifar_batch(d + "/fine.bin", CifarKind::cifar100),
                    "fine.bin: label 100 out of range [0, 100) at offset 3075 (record 1)");
  // A CIFAR-10 train set with a batch missing names the missing file.
  CHECK_THROWS_KILN(CifarDataset(d, true), "data_batch_1.bin: no such file");
}

// A .npy file as numpy writes it: magic, version, little-endian header length, the dict padded
// with spaces to a multiple of 64 and ended by '\n', then the data.
Bytes npy(const std::string& dict, const void* data, size_t nbytes, int major = 1) {
  size_t len_size = major == 1 ? 2 : 4;
  std::string h = dict;
  while ((10 + (len_size - 2) + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  for (size_t i = 0; i < len_size; ++i) b.push_back(uint8_t(h.size() >> (8 * i)));
  b.insert(b.end(), h.begin(), h.end());
  const uint8_t* p = static_cast<const uint8_t*>(data);
  b.insert(b.end(), p, p + nbytes);
  return b;
}

TEST_CASE("read_npy: every supported dtype, v1 and v2 headers") {
  std::string d = sub_dir("npy");
  float f[6] = {1.5f, -2, 3, 4, 5, 6.25f};
  write_file(d + "/f4.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, sizeof f));
  Tensor t = read_npy(d + "/f4.npy");
  CHECK(t.dtype() == float32);
  CHECK(t.sizes() == Shape{2, 3});
  for (int i = 0; i < 6; ++i) CHECK(t.data<float>()[i] == f[i]);

  double g[2] = {0.125, -1e300};
  write_file(d + "/f8.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", g, sizeof g, 2));
  t = read_npy(d + "/f8.npy");
  CHECK(t.dtype() == float64);
  CHECK(t.sizes() == Shape{2});
  CHECK(t.data<double>()[1] == -1e300);

  int32_t i4[4] = {-7, 0, 1 << 30, 3};
  write_file(d + "/i4.npy", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2, 2), }", i4, sizeof i4));
  t = read_npy(d + "/i4.npy");
  CHECK(t.dtype() == int32);
  CHECK(t.sizes() == Shape{1, 2, 2});
  CHECK(t.data<int32_t>()[2] == (1 << 30));

  int64_t i8[3] = {-(int64_t(1) << 40), 2, 3};
  write_file(d + "/i8.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i8, sizeof i8));
  t = read_npy(d + "/i8.npy");
  CHECK(t.dtype() == int64);
  CHECK(t.data<int64_t>()[0] == -(int64_t(1) << 40));

  uint8_t u1[3] = {0, 200, 255};
  write_file(d + "/u1.npy", npy("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", u1, 3));
  t = read_npy(d + "/u1.npy");
  CHECK(t.dtype() == uint8);
  CHECK(t.data<uint8_t>()[1] == 200);

  // Booleans come back as booleans; a byte other than 0 and 1 (a hostile file) is true, not UB.
  uint8_t b1[3] = {1, 0, 7};
  write_file(d + "/b1.npy", npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b1, 3));
  t = read_npy(d + "/b1.npy");
  CHECK(t.dtype() == boolean);
  CHECK(t.to_vector() == std::vector<double>{1, 0, 1});
  CHECK(reinterpret_cast<const uint8_t*>(t.data_ptr())[2] == 1);

  float s = 42;  // 0-d array
  write_file(d + "/scalar.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", &s, 4));
  t = read_npy(d + "/scalar.npy");
  CHECK(t.dim() == 0);
  CHECK(t.data<float>()[0] == 42);
}

TEST_CASE("read_npy: corruption and unsupported layouts name the file and offset") {
  std::string d = sub_dir("npy_bad");
  float f[6] = {};
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

  Bytes b = npy(ok, f, sizeof f);
  b[1] = 'X';
  write_file(d + "/magic.npy", b);
  CHECK_THROWS_KILN(read_npy(d + "/magic.npy"), "magic.npy: bad .npy magic at offset 0");

  b = npy(ok, f, sizeof f);
  b[6] = 9;
  write_file(d + "/version.npy", b);
  CHECK_THROWS_KILN(read_npy(d + "/version.npy"), "version.npy: unsupported .npy version 9.0 at offset 6");

  b = npy(ok, f, sizeof f);
  b.resize(b.size() - 5);
  write_file(d + "/trunc.npy", b);
  CHECK_THROWS_KILN(read_npy(d + "/trunc.npy"),
                    "trunc.npy: truncated at offset 128 + 19: expected 24 bytes of <f4 data, file has 19");

  b = npy(ok, f, sizeof f);
  b.resize(30);
  write_file(d + "/header.npy", b);
  CHECK_THROWS_KILN(read_npy(d + "/header.npy"), "header.npy: truncated at offset 10: header length 118");

  write_file(d + "/tiny.npy", Bytes{0x93, 'N'});
  CHECK_THROWS_KILN(read_npy(d + "/tiny.npy"), "tiny.npy: truncated at offset 0");

  b = npy(ok, f, sizeof f);
  b.push_back(0);
  write_file(d + "/extra.npy", b);
  CHECK_THROWS_KILN(read_npy(d + "/extra.npy"), "extra.npy: 1 trailing bytes at offset 128 + 24");

  write_file(d + "/fortran.npy", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f, sizeof f));
  CHECK_THROWS_KILN(read_npy(d + "/fortran.npy"), "fortran.npy: Fortran-order array at offset 10");

  write_file(d + "/big.npy", npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", f, sizeof f));
  CHECK_THROWS_KILN(read_npy(d + "/big.npy"), "big.npy: big-endian dtype '>f4' at offset 10");

  write_file(d + "/c8.npy", npy("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", f, sizeof f));
  CHECK_THROWS_KILN(read_npy(d + "/c8.npy"), "c8.npy: unsupported dtype '<c8' at offset 10");

  write_file(d + "/noshape.npy", npy("{'descr': '<f4', 'fortran_order': False, }", f, sizeof f));
  CHECK_THROWS_KILN(read_npy(d + "/noshape.npy"), "noshape.npy: malformed .npy header at offset 10: no 'shape'");
}

}  // namespace
}  // namespace kiln
