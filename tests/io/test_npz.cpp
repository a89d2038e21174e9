// .npz reader (io/formats/npz.h): archives written by a small zip writer here, plus truncated and corrupt
// archives, which must throw kiln::Error naming the file and an offset. Archives written by numpy
// itself (with NpzDataset and open_dataset_dir on them) are read in test_python_interop.cpp.
//   ctest --test-dir build -R test_npz
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "io/data/datasets.h"
#include "io/formats/npz.h"
#include "tests/support/testing.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

std::string temp_dir() {
  static test::TempDir dir("npz");
  return dir.path.string();
}

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

Bytes npy_f32(const std::vector<float>& v, const std::string& shape) {
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(h.size()), uint8_t(h.size() >> 8)};
  for (char ch : h) b.push_back(uint8_t(ch));
  const uint8_t* p = reinterpret_cast<const uint8_t*>(v.data());
  b.insert(b.end(), p, p + v.size() * 4);
  return b;
}

void put16(Bytes& b, uint32_t v) {
  b.push_back(uint8_t(v));
  b.push_back(uint8_t(v >> 8));
}
void put32(Bytes& b, uint32_t v) {
  put16(b, v & 0xFFFF);
  put16(b, v >> 16);
}

// A plain (non-ZIP64) zip; deflate members with raw zlib.
struct Entry {
  std::string name;
  Bytes data;
  bool deflate;
};
Bytes make_zip(const std::vector<Entry>& entries) {
  Bytes out, central;
  for (const Entry& e : entries) {
    Bytes body = e.data;
    if (e.deflate) {
      z_stream z{};
      REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
      body.resize(deflateBound(&z, uLong(e.data.size())));
      z.next_in = const_cast<Bytef*>(e.data.data());
      z.avail_in = uInt(e.data.size());
      z.next_out = body.data();
      z.avail_out = uInt(body.size());
      REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
      body.resize(z.total_out);
      deflateEnd(&z);
    }
    uint32_t crc = uint32_t(crc32(0, e.data.data(), uInt(e.data.size())));
    uint32_t offset = uint32_t(out.size());
    auto header = [&](Bytes& b, bool is_central) {
      put32(b, is_central ? 0x02014b50 : 0x04034b50);
      if (is_central) put16(b, 20);
      put16(b, 20);
      put16(b, 0);
      put16(b, e.deflate ? 8 : 0);
      put16(b, 0);
      put16(b, 0);
      put32(b, crc);
      put32(b, uint32_t(body.size()));
      put32(b, uint32_t(e.data.size()));
      put16(b, uint32_t(e.name.size()));
      put16(b, 0);
      if (is_central) {
        put16(b, 0);
        put16(b, 0);
        put16(b, 0);
        put32(b, 0);
        put32(b, offset);
      }
      b.insert(b.end(), e.name.begin(), e.name.end());
    };
    header(out, false);
    out.insert(out.end(), body.begin(), body.end());
    header(central, true);
  }
  uint32_t cd_at = uint32_t(out.size());
  out.insert(out.end(), central.begin(), central.end());
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, uint32_t(entries.size()));
  put16(out, uint32_t(entries.size()));
  put32(out, uint32_t(central.size()));
  put32(out, cd_at);
  put16(out, 0);
  return out;
}

std::string error_of(const std::string& path) {
  try {
    read_npz(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("read_npz: stored and deflated members from a hand-written zip") {
  std::string path = temp_dir() + "/hand.npz";
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<float> big(5000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(i % 7);
  write_file(path, make_zip({{"a.npy", npy_f32(a, "(2, 3)"), false}, {"big.npy", npy_f32(big, "(5000,)"), true}}));
  auto arrays = read_npz(path);
  REQUIRE(arrays.size() == 2);
  CHECK(arrays[0].first == "a");
  CHECK(arrays[0].second.sizes() == Shape{2, 3});
  CHECK(arrays[0].second.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(arrays[1].first == "big");
  CHECK(arrays[1].second.numel() == 5000);
  CHECK(arrays[1].second.at({4999}) == 4999 % 7);
}

TEST_CASE("read_npz: truncated, garbage and corrupt archives throw naming file and offset") {
  std::string dir = temp_dir();
  std::vector<float> big(3000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(i);
  Bytes good = make_zip({{"x.npy", npy_f32(big, "(3000,)"), true}});
  // Every truncation point: never a crash, always an Error naming the file.
  for (size_t cut : {size_t(0), size_t(10), size_t(40), good.size() / 2, good.size() - 30, good.size() - 1}) {
    std::string p = dir + "/cut.npz";
    Bytes part = good;
    part.resize(cut);
    write_file(p, part);
    std::string msg = error_of(p);
    CHECK_MESSAGE(msg.find("cut.npz") != std::string::npos, cut, ": ", msg);
    CHECK_MESSAGE(msg.find("offset") != std::string::npos, cut, ": ", msg);
  }
  write_file(dir + "/garbage.npz", Bytes(500, 0x5A));
  CHECK_THROWS_KILN(read_npz(dir + "/garbage.npz"), "garbage.npz: no zip end of central directory record");

  Bytes bad = good;
  bad[0] = 'X';  // local header signature
  write_file(dir + "/sig.npz", bad);
  CHECK_THROWS_KILN(read_npz(dir + "/sig.npz"), "sig.npz:x.npy: bad local header signature at offset 0");

  bad = good;
  bad[30 + 5 + 40] ^= 0xFF;  // inside the deflate stream
  write_file(dir + "/flip.npz", bad);
  std::string msg = error_of(dir + "/flip.npz");
  CHECK_MESSAGE((msg.find("corrupt deflate data at offset") != std::string::npos ||
                 msg.find("CRC-32 mismatch") != std::string::npos || msg.find("inflated") != std::string::npos),
                msg);

  Bytes stored = make_zip({{"x.npy", npy_f32(big, "(3000,)"), false}});
  stored[30 + 5 + 200] ^= 0x01;  // a data byte: only the CRC can tell
  write_file(dir + "/crc.npz", stored);
  CHECK_THROWS_KILN(read_npz(dir + "/crc.npz"), "crc.npz:x.npy: CRC-32 mismatch for the data at offset 35");

  stored = make_zip({{"x.npy", npy_f32(big, "(3000,)"), false}});
  stored[8] = 12;  // bzip2 in the local header only: disagrees with the directory
  write_file(dir + "/method.npz", stored);
  CHECK_THROWS_KILN(read_npz(dir + "/method.npz"), "disagrees with the central directory");

  Bytes npy = npy_f32({1, 2}, "(3,)");  // shape promises 3 floats, holds 2
  write_file(dir + "/short.npz", make_zip({{"s.npy", npy, false}}));
  CHECK_THROWS_KILN(read_npz(dir + "/short.npz"), "short.npz:s.npy: truncated at offset");
}

}  // namespace
}  // namespace kiln
