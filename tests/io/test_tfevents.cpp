// TensorBoard event files: CRC32C against its published test vector, and a file written by
// EventWriter read back by TensorBoard's own reader (tests/io/read_tfevents.py through the venv
// python KILN_TEST_PYTHON) with every scalar and histogram intact.
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
#include "io/file_bytes.h"
#include "io/tfevents.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::string run_capture(const std::string& cmd, int* rc) {
  std::string out;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = ::pclose(p);
  return out;
}

bool have_python_tensorboard() {
  return std::system("'" KILN_TEST_PYTHON "' -c 'import tensorboard' >/dev/null 2>&1") == 0;
}

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

TEST_CASE("TensorBoard's EventAccumulator reads every scalar and histogram back") {
  if (!have_python_tensorboard()) {
    MESSAGE("skipped: no tensorboard in " KILN_TEST_PYTHON " (tools/install-deps.sh --test makes it)");
    return;
  }
  fs::path dir = fs::temp_directory_path() / ("kiln_tfevents_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  struct S { std::string tag; int64_t step; double value; };
  std::vector<S> scalars;
  for (int64_t s = 0; s < 30; ++s) {
    scalars.push_back({"train/loss", s, 2.5 / (1.0 + s)});
    if (s % 10 == 0) scalars.push_back({"val/acc", s, 0.1 + s * 0.02});
  }
  scalars.push_back({"lr", 7, 1e-3});
  scalars.push_back({"lr", 8, -0.0});
  Generator gen(42);
  std::vector<std::pair<std::string, Tensor>> hists = {
      {"weights/conv1", randn({64, 3, 3, 3}, {}, &gen)},
      {"weights/fc", rand({100}, DType::float64, &gen) * 1e-6},
      {"ints", arange(17, DType::int64)},
      {"constant", full({5}, 3.0)},
      {"empty", zeros({0})}};
  std::string path;
  {
    EventWriter w(dir.string());
    for (auto& s : scalars) w.add_scalar(s.tag, s.value, s.step);
    for (size_t i = 0; i < hists.size(); ++i) w.add_histogram(hists[i].first, hists[i].second, int64_t(i) * 5);
    w.flush();
    path = w.path();
  }
  int rc = 0;
  std::string out = run_capture("'" KILN_TEST_PYTHON "' '" KILN_SOURCE_DIR "/tests/io/read_tfevents.py' '" + path + "'", &rc);
  REQUIRE_MESSAGE(rc == 0, out);
  auto j = nlohmann::json::parse(out);

  size_t seen = 0;
  for (auto& [tag, events] : j["scalars"].items()) seen += events.size();
  CHECK(seen == scalars.size());
  for (auto& s : scalars) {
    bool found = false;
    for (auto& e : j["scalars"][s.tag])
      if (e[0].get<int64_t>() == s.step) {
        CHECK(e[1].get<double>() == double(float(s.value)));
        found = true;
      }
    CHECK_MESSAGE(found, s.tag, " step ", s.step);
  }

  REQUIRE(j["histograms"].size() == hists.size());
  for (size_t i = 0; i < hists.size(); ++i) {
    const auto& [tag, t] = hists[i];
    std::vector<double> v = t.to_vector();
    auto& e = j["histograms"][tag];
    REQUIRE(e.size() == 1);
    auto& h = e[0];
    CHECK(h["step"].get<int64_t>() == int64_t(i) * 5);
    CHECK(h["num"].get<double>() == double(v.size()));
    double mn = v.empty() ? 0 : *std::min_element(v.begin(), v.end());
    double mx = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
    double sum = 0, sq = 0;
    for (double x : v) sum += x, sq += x * x;
    CHECK(h["min"].get<double>() == mn);
    CHECK(h["max"].get<double>() == mx);
    CHECK(h["sum"].get<double>() == doctest::Approx(sum).epsilon(1e-12));
    CHECK(h["sum_squares"].get<double>() == doctest::Approx(sq).epsilon(1e-12));
    // Recount each value into the limits TensorBoard returned: limit[k-1] <= x < limit[k].
    auto lim = h["bucket_limit"].get<std::vector<double>>();
    auto cnt = h["bucket"].get<std::vector<double>>();
    REQUIRE(lim.size() == cnt.size());
    std::vector<double> want(lim.size(), 0);
    for (double x : v) {
      size_t k = 0;
      while (k < lim.size() && !(x < lim[k])) ++k;
      REQUIRE(k < lim.size());
      want[k] += 1;
    }
    CHECK_MESSAGE(cnt == want, tag);
    // Every limit is one of TensorFlow's defaults.
    for (double l : lim)
      CHECK(std::binary_search(default_histogram_limits().begin(), default_histogram_limits().end(), l));
  }
  fs::remove_all(dir);
}
