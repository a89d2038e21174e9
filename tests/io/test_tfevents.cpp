// TensorBoard event files: CRC32C against its published test vector, default histogram buckets,
// and the record framing (lengths, masked CRCs, the version event first). TensorBoard's own reader
// on EventWriter's files: test_python_interop.cpp.
//   ctest --test-dir build -R io.test_tfevents
#include "tests/support/testing.h"

#include <unistd.h>

#include <cfloat>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/ops/elementwise.h"
#include "engine/random.h"
#include "io/formats/file_bytes.h"
#include "io/logs/tfevents.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

uint32_t le32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

}  // namespace

TEST_CASE("crc32c matches the published check value and TFRecord's masking") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
  // Continuing a CRC over split data equals one pass.
  CHECK(crc32c("6789", 4, crc32c("12345", 5)) == 0xE3069283u);
  // 32 zero bytes: the RFC 3720 (iSCSI) vector 0x8A9136AA.
  const unsigned char zeros[32] = {};
  CHECK(crc32c(zeros, 32) == 0x8A9136AAu);
  // mask(c) = rotr(c, 15) + 0xa282ead8: rotr(0xE3069283, 15) = 0x2507C60D.
  CHECK(masked_crc32c("123456789", 9) == uint32_t(0x2507C60Du + 0xa282ead8u));
}

TEST_CASE("default histogram buckets follow TensorFlow's") {
  const auto& lim = default_histogram_limits();
  REQUIRE(lim.size() % 2 == 1);
  const size_t mid = lim.size() / 2;
  CHECK(lim[mid] == 0.0);
  CHECK(lim[mid + 1] == 1e-12);
  CHECK(lim.back() == DBL_MAX);
  CHECK(lim.front() == -DBL_MAX);
  CHECK(std::is_sorted(lim.begin(), lim.end()));
  Histogram h = make_histogram({1.0, 1.0, -2.0, 0.0, 3.5});
  CHECK(h.num == 5);
  CHECK(h.min == -2.0);
  CHECK(h.max == 3.5);
  CHECK(h.sum == 3.5);
  CHECK(h.sum_squares == 1 + 1 + 4 + 0 + 12.25);
  double total = 0;
  for (double c : h.bucket) total += c;
  CHECK(total == 5);
}

TEST_CASE("every record carries a valid length, masked CRCs and the version event first") {
  fs::path dir = fs::temp_directory_path() / ("kiln_tfevents_raw_" + std::to_string(::getpid()));
  std::string path;
  {
    EventWriter w(dir.string());
    w.add_scalar("loss", 0.5, 1);
    path = w.path();
    CHECK(fs::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  }
  std::vector<uint8_t> b = io::read_file_bytes(path);
  size_t off = 0;
  int records = 0;
  while (off < b.size()) {
    REQUIRE(off + 12 <= b.size());
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(b[off + i]) << (8 * i);
    CHECK(le32(&b[off + 8]) == masked_crc32c(&b[off], 8));
    REQUIRE(off + 12 + n + 4 <= b.size());
    CHECK(le32(&b[off + 12 + n]) == masked_crc32c(&b[off + 12], n));
    if (records == 0) {
      std::string data(reinterpret_cast<const char*>(&b[off + 12]), n);
      CHECK(data.find("brain.Event:2") != std::string::npos);
    }
    off += 12 + n + 4;
    ++records;
  }
  CHECK(records == 2);
  fs::remove_all(dir);
}

