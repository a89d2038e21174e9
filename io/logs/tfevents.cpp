// TensorBoard event files; see io/logs/tfevents.h for the format.
//   ctest --test-dir build -R io.test_tfevents
#include "io/logs/tfevents.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "engine/error.h"

namespace kiln {
namespace {

// CRC32C by a byte-wise table. Hand-written because no maintained CRC32C library is packaged here
// (zlib's crc32 is the other polynomial), and event records are small (a few hundred bytes, a few
// KiB for a histogram) so the SSE4.2 instruction would buy nothing measurable.
struct Crc32cTable {
  uint32_t t[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected 0x1EDC6F41
      t[i] = c;
    }
  }
};

// Protocol-buffer wire format, just the field kinds an Event uses.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void put_tag(std::string& out, int field, int wire) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
void put_fixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char(uint8_t(v >> (8 * i))));
}
void put_double(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  put_tag(out, field, 1);
  put_fixed64(out, bits);
}
void put_float(std::string& out, int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  put_tag(out, field, 5);
  for (int i = 0; i < 4; ++i) out.push_back(char(uint8_t(bits >> (8 * i))));
}
void put_bytes(std::string& out, int field, const std::string& s) {
  put_tag(out, field, 2);
  put_varint(out, s.size());
  out += s;
}
void put_packed_doubles(std::string& out, int field, const std::vector<double>& v) {
  std::string body;
  for (double d : v) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    put_fixed64(body, bits);
  }
  put_bytes(out, field, body);
}

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
std::string event(int64_t step, int field, const std::string& payload) {
  std::string e;
  put_double(e, 1, wall_time());
  put_tag(e, 2, 0);
  put_varint(e, uint64_t(step));
  put_bytes(e, field, payload);
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  static const Crc32cTable table;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table.t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

const std::vector<double>& default_histogram_limits() {
  static const std::vector<double> limits = [] {
    // TensorFlow's core/lib/histogram/histogram.cc InitDefaultBucketsInner.
    std::vector<double> pos, neg;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) {
      pos.push_back(v);
      neg.push_back(-v);
    }
    pos.push_back(DBL_MAX);
    neg.push_back(-DBL_MAX);
    std::reverse(neg.begin(), neg.end());
    neg.push_back(0.0);
    neg.insert(neg.end(), pos.begin(), pos.end());
    return neg;
  }();
  return limits;
}

Histogram make_histogram(const std::vector<double>& values) {
  const std::vector<double>& limits = default_histogram_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    size_t b = size_t(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
    if (b == limits.size()) b = limits.size() - 1;  // only v == DBL_MAX, which limit DBL_MAX takes
    counts[b] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  if (h.num == 0) h.min = h.max = 0;
  // Collapse each run of empty buckets into one, as TensorFlow's Histogram::EncodeToProto.
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i], count = counts[i];
    ++i;
    if (count <= 0.0)
      while (i < counts.size() && counts[i] <= 0.0) end = limits[i++];
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

EventWriter::EventWriter(const std::string& logdir) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  KILN_CHECK(!ec, "EventWriter: cannot create log directory '", logdir, "': ", ec.message());
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = 0;
  const long long now = static_cast<long long>(std::time(nullptr));
  std::string name = "events.out.tfevents." + std::to_string(now) + "." + host + "." + std::to_string(::getpid());
  // Two writers of one process in one second would share a name: later ones get a suffix, as
  // TensorBoard's own writer adds a per-process counter.
  static std::atomic<int> writers{0};
  if (int n = writers.fetch_add(1); n > 0) name += "." + std::to_string(n);
  path_ = (std::filesystem::path(logdir) / name).string();
  file_ = std::fopen(path_.c_str(), "ab");
  KILN_CHECK(file_ != nullptr, "EventWriter: cannot open '", path_, "': ", std::strerror(errno));
  std::string e;
  put_double(e, 1, wall_time());
  put_bytes(e, 3, "brain.Event:2");
  std::lock_guard<std::mutex> lock(mu_);
  write_record(e);
  std::fflush(file_);
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);  // flushes; errors cannot be reported from a destructor
}

void EventWriter::write_record(const std::string& data) {
  unsigned char head[12];
  const uint64_t n = data.size();
  for (int i = 0; i < 8; ++i) head[i] = static_cast<unsigned char>(n >> (8 * i));
  const uint32_t len_crc = masked_crc32c(head, 8);
  for (int i = 0; i < 4; ++i) head[8 + i] = static_cast<unsigned char>(len_crc >> (8 * i));
  const uint32_t data_crc = masked_crc32c(data.data(), data.size());
  unsigned char tail[4];
  for (int i = 0; i < 4; ++i) tail[i] = static_cast<unsigned char>(data_crc >> (8 * i));
  bool ok = std::fwrite(head, 1, 12, file_) == 12 && std::fwrite(data.data(), 1, data.size(), file_) == data.size() &&
            std::fwrite(tail, 1, 4, file_) == 4;
  KILN_CHECK(ok, "EventWriter: write to '", path_, "' failed: ", std::strerror(errno));
}

void EventWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  // Value { string tag = 1; float simple_value = 2; }
  std::string v;
  put_bytes(v, 1, tag);
  put_float(v, 2, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e = event(step, 5, summary);
  std::lock_guard<std::mutex> lock(mu_);
  write_record(e);
}

void EventWriter::add_histogram(const std::string& tag, const Tensor& values, int64_t step) {
  KILN_CHECK(values.defined(), "EventWriter::add_histogram '", tag, "': undefined tensor");
  add_histogram(tag, values.detach().to(Device()).to_vector(), step);
}

void EventWriter::add_histogram(const std::string& tag, const std::vector<double>& values, int64_t step) {
  const Histogram h = make_histogram(values);
  // HistogramProto { double min = 1, max = 2, num = 3, sum = 4, sum_squares = 5;
  //                  repeated double bucket_limit = 6 [packed]; repeated double bucket = 7 [packed]; }
  std::string hp;
  put_double(hp, 1, h.min);
  put_double(hp, 2, h.max);
  put_double(hp, 3, h.num);
  put_double(hp, 4, h.sum);
  put_double(hp, 5, h.sum_squares);
  put_packed_doubles(hp, 6, h.bucket_limit);
  put_packed_doubles(hp, 7, h.bucket);
  // Value { string tag = 1; HistogramProto histo = 5; }
  std::string v;
  put_bytes(v, 1, tag);
  put_bytes(v, 5, hp);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e = event(step, 5, summary);
  std::lock_guard<std::mutex> lock(mu_);
  write_record(e);
}

void EventWriter::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_CHECK(std::fflush(file_) == 0, "EventWriter: flush of '", path_, "' failed: ", std::strerror(errno));
}

}  // namespace kiln
