// TensorBoard event files (what tf.summary / torch.utils.tensorboard write): a sequence of TFRecords
// (uint64 length, masked CRC32C of the length, the bytes, masked CRC32C of the bytes), each holding
// an Event protocol buffer. The first record carries file_version "brain.Event:2"; the others a
// Summary with scalar (simple_value) or histogram (HistogramProto) values. The protos are encoded
// by hand (a few fields of the protobuf wire format), so no protobuf dependency.
//   ctest --test-dir build -R io.test_tfevents
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace kiln {

// CRC32C (Castagnoli) of [data, data + n), continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
// TFRecord's masking: rotate right by 15 and add 0xa282ead8, so a CRC of data holding CRCs stays
// well distributed.
uint32_t masked_crc32c(const void* data, size_t n);

// TensorBoard's histogram of `values` (TensorFlow's default exponential buckets: +-1e-12 * 1.1^k up
// to 1e20, +-DBL_MAX at the ends and 0), runs of empty buckets collapsed as TensorFlow's
// EncodeToProto does. A value v falls in the bucket i with limit[i-1] <= v < limit[i].
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
};
Histogram make_histogram(const std::vector<double>& values);
// The default bucket limits, ascending (1,549 of them).
const std::vector<double>& default_histogram_limits();

// Appends events to logdir/events.out.tfevents.<unix time>.<hostname>.<pid> (".<n>" added for the
// n-th further writer of the process). Thread-safe; writes are buffered and reach the file on
// flush(), at destruction, and when the buffer fills.
class EventWriter {
 public:
  explicit EventWriter(const std::string& logdir);  // creates logdir (and parents)
  ~EventWriter();                                    // flushes
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // Stored as a float32 simple_value, as TensorBoard's scalars are.
  void add_scalar(const std::string& tag, double value, int64_t step);
  // `values`: any shape, dtype and device; NaNs and infinities are skipped (TensorBoard's reader
  // rejects them in min/max/sum).
  void add_histogram(const std::string& tag, const Tensor& values, int64_t step);
  void add_histogram(const std::string& tag, const std::vector<double>& values, int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
  std::mutex mu_;
};

}  // namespace kiln
