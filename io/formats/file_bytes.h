// File opening and whole-file reading shared by the io/ readers. Every input file is opened by
// open_regular_file: a FIFO, device or directory is refused at once with an error naming the path
// (never a hang on a FIFO nobody writes), and its size comes from fstat. Readers then check every
// size they read from the file against that size (or, for gzip, against the bounded expansion
// below) before allocating, so memory stays a stated multiple of the input (docs/fuzzing.md).
//   ctest --test-dir build -R 'io.test_readers|io.test_hostile_readers'
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::io {

// gzip expansion allowed for data files: at most kMaxGzipRatio times the compressed size plus
// kGzipSlack (small files carry a fixed overhead), and never more than kMaxGzipBytes. Real data
// sets compress 2-5 times (MNIST); a stream claiming more is refused before it is inflated.
constexpr uint64_t kMaxGzipRatio = 256;
constexpr uint64_t kGzipSlack = uint64_t(1) << 20;
constexpr uint64_t kMaxGzipBytes = uint64_t(4) << 30;
// The bound above for `compressed` bytes of gzip.
uint64_t gzip_bound(uint64_t compressed);
// Bytes every gzip stream of this process has produced so far (GzipReader, gunzip): the work a
// hostile file caused, which tests bound by this count rather than by a clock.
uint64_t gzip_bytes_inflated();

// A read-only view of bytes already in memory (a file's contents), indexed like the vector it
// stands for; the parsers that take a pointer and a size read through it.
struct ByteView {
  const uint8_t* p;
  size_t n;
  size_t size() const { return n; }
  const uint8_t* data() const { return p; }
  uint8_t operator[](size_t i) const { return p[i]; }
};

// An open regular file (read-only, O_NONBLOCK, close-on-exec) and its size; closes on destruction.
// Throws kiln::Error naming the path when it is missing, unreadable, or not a regular file (FIFO,
// socket, device, directory). Use it for every file read from a user-given path.
class RegularFile {
 public:
  explicit RegularFile(const std::string& path);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  // Reads [offset, offset + n) into dst; throws naming the path if the file ends first.
  void read_at(uint64_t offset, void* dst, size_t n) const;
  // The whole file (size() bytes; up to `max_bytes`, else an error naming `what`).
  std::vector<uint8_t> read_all(uint64_t max_bytes = UINT64_MAX, const char* what = "file") const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The file's bytes as stored (no decompression).
std::vector<uint8_t> read_raw_bytes(const std::string& path);

// The file's bytes; gzip files (by their magic, whatever the name) are decompressed within
// gzip_bound(file size). Missing, non-regular or unreadable files, corrupt or truncated gzip
// streams and over-expanding ones throw kiln::Error naming the path.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// In-memory gzip: is_gzip checks the magic; gunzip inflates all members of `data` within
// `max_bytes` (an error naming `name` beyond it). Concatenated members are read as gzip(1) does.
bool is_gzip(const uint8_t* data, size_t size);
std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, uint64_t max_bytes, const std::string& name);

// Streaming inflate of an in-memory gzip buffer: read() fills dst with up to n decompressed bytes
// and returns how many (0 at the end of the last member). Corrupt or truncated data throws
// naming `name` and the decompressed offset; so does output beyond gzip_bound() of the compressed
// bytes consumed so far, checked every MiB, so a bomb stops within a few MiB whatever it claims.
class GzipReader {
 public:
  GzipReader(const uint8_t* data, size_t size, std::string name);
  ~GzipReader();
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;
  size_t read(uint8_t* dst, size_t n);
  // Reads exactly n bytes or throws "truncated" naming `what`.
  void read_exact(uint8_t* dst, size_t n, const char* what);
  uint64_t produced() const { return produced_; }

 private:
  struct Impl;
  Impl* impl_;
  std::string name_;
  uint64_t produced_ = 0;
  bool done_ = false;
};

// "dir/sub/name.ext" -> "name.ext", for messages.
std::string base_name(const std::string& path);

// A regular file exists at `path` (FIFOs and directories do not count).
bool file_exists(const std::string& path);

// Big-endian 32-bit at `offset` (caller checked the bounds).
inline uint32_t read_be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace kiln::io
