// File opening, whole-file reading and bounded gzip inflation. See file_bytes.h.
#include "io/formats/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "engine/checked_size.h"
#include "engine/error.h"

namespace kiln::io {

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

uint64_t gzip_bound(uint64_t compressed) {
  uint64_t ratio = compressed > (kMaxGzipBytes - kGzipSlack) / kMaxGzipRatio ? kMaxGzipBytes
                                                                          : compressed * kMaxGzipRatio + kGzipSlack;
  return std::min(ratio, kMaxGzipBytes);
}

namespace {
const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}
}  // namespace

RegularFile::RegularFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; fstat then refuses it.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    int e = errno;
    KILN_CHECK(e != ENOENT, base_name(path), ": no such file (", path, ")");
    KILN_THROW(base_name(path), ": cannot open (", path, "): ", std::strerror(e));
  }
  struct stat st;
  int rc = ::fstat(fd_, &st), e = errno;
  if (rc != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    KILN_CHECK(rc != 0, base_name(path), ": ", file_kind(st.st_mode), ", not a regular file (", path, ")");
    KILN_THROW(base_name(path), ": cannot stat (", path, "): ", std::strerror(e));
  }
  size_ = uint64_t(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RegularFile::read_at(uint64_t offset, void* dst, size_t n) const {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, std::min<size_t>(n, size_t(1) << 30), off_t(offset));
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    KILN_CHECK(r >= 0, base_name(path_), ": read at byte ", offset, " failed (", path_, "): ", std::strerror(errno));
    KILN_CHECK(r > 0, base_name(path_), ": file ends at byte ", offset, " while ", n,
               " more bytes were expected (it shrank while being read?)");
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
}

std::vector<uint8_t> RegularFile::read_all(uint64_t max_bytes, const char* what) const {
  KILN_CHECK(size_ <= max_bytes, base_name(path_), ": ", what, " is ", size_, " bytes, over the ", max_bytes,
             "-byte limit");
  std::vector<uint8_t> out(static_cast<size_t>(size_));
  if (!out.empty()) read_at(0, out.data(), out.size());
  return out;
}

std::vector<uint8_t> read_raw_bytes(const std::string& path) { return RegularFile(path).read_all(); }

bool is_gzip(const uint8_t* data, size_t size) { return size >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

// ---- streaming gzip

namespace {
std::atomic<uint64_t> g_inflated{0};
}  // namespace

uint64_t gzip_bytes_inflated() { return g_inflated.load(std::memory_order_relaxed); }

struct GzipReader::Impl {
  z_stream z{};
  const uint8_t* data;
  size_t size;
};

GzipReader::GzipReader(const uint8_t* data, size_t size, std::string name) : impl_(new Impl), name_(std::move(name)) {
  impl_->data = data;
  impl_->size = size;
  // 16 + 15: gzip wrapper only, the largest window.
  if (inflateInit2(&impl_->z, 16 + 15) != Z_OK) {
    delete impl_;
    KILN_THROW(name_, ": zlib inflateInit2 failed");
  }
  impl_->z.next_in = const_cast<Bytef*>(data);
  impl_->z.avail_in = 0;
}

GzipReader::~GzipReader() {
  inflateEnd(&impl_->z);
  delete impl_;
}

size_t GzipReader::read(uint8_t* dst, size_t n) {
  z_stream& z = impl_->z;
  size_t got = 0;
  while (got < n && !done_) {
    // zlib counts in uInt: hand it at most 1 GiB of input and output at a time.
    size_t in_at = size_t(z.next_in - impl_->data) + z.avail_in;
    if (z.avail_in == 0 && in_at < impl_->size) z.avail_in = uInt(std::min<size_t>(impl_->size - in_at, 1u << 30));
    // 1 MiB of output at a time, so the expansion check below runs often.
    z.next_out = dst + got;
    z.avail_out = uInt(std::min<size_t>(n - got, 1u << 20));
    uInt before = z.avail_out;
    int rc = inflate(&z, Z_NO_FLUSH);
    got += before - z.avail_out;
    produced_ += before - z.avail_out;
    g_inflated.fetch_add(before - z.avail_out, std::memory_order_relaxed);
    // The ratio so far: a bomb (deflate packs zeros 1032:1) is refused after about a megabyte,
    // long before its claimed gigabytes; real data (2-5:1) never comes near.
    uint64_t consumed = uint64_t(z.next_in - impl_->data);
    KILN_CHECK(produced_ <= gzip_bound(consumed), name_, ": gzip stream expands to more than ", produced_,
               " bytes from its first ", consumed, " compressed bytes, over the limit (", kMaxGzipRatio,
               "x the compressed size + 1 MiB, at most 4 GiB): corrupt or a gzip bomb");
    if (rc == Z_STREAM_END) {
      // Another member follows only if the rest starts with the gzip magic; anything else after a
      // member is ignored, as gzip(1) and zlib's gzread do.
      size_t at = size_t(z.next_in - impl_->data);
      if (is_gzip(impl_->data + at, impl_->size - at)) {
        inflateReset(&z);
        z.avail_in = 0;
      } else {
        done_ = true;
      }
      continue;
    }
    if (rc == Z_OK) continue;
    size_t at = size_t(z.next_in - impl_->data);
    if (rc == Z_BUF_ERROR && at >= impl_->size)
      KILN_THROW(name_, ": corrupt or truncated gzip stream after ", produced_, " decompressed bytes: the file ends at byte ",
                 impl_->size, " inside the stream");
    KILN_THROW(name_, ": corrupt or truncated gzip stream after ", produced_, " decompressed bytes, at compressed byte ",
               at, ": ", z.msg ? z.msg : "zlib error " + std::to_string(rc));
  }
  return got;
}

void GzipReader::read_exact(uint8_t* dst, size_t n, const char* what) {
  uint64_t at = produced_;
  size_t got = read(dst, n);
  KILN_CHECK(got == n, name_, ": truncated at offset ", at + got, ": ", what, " needs ", n, " bytes, the gzip stream has ",
             got);
}

std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, uint64_t max_bytes, const std::string& name) {
  GzipReader gz(data, size, name);
  std::vector<uint8_t> out;
  size_t chunk = 1 << 16;
  for (;;) {
    size_t at = out.size();
    // One byte past the bound tells an over-long stream from one that ends exactly there.
    size_t want = size_t(std::min<uint64_t>(chunk, max_bytes + 1 - at));
    out.resize(at + want);
    size_t got = gz.read(out.data() + at, want);
    out.resize(at + got);
    KILN_CHECK(out.size() <= max_bytes, name, ": gzip stream expands past ", max_bytes, " bytes from ", size,
               " compressed (the limit: ", kMaxGzipRatio, "x the compressed size + 1 MiB, at most 4 GiB)");
    if (got < want) break;
    chunk = std::min<size_t>(chunk * 2, size_t(1) << 26);
  }
  return out;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::vector<uint8_t> raw = read_raw_bytes(path);
  if (!is_gzip(raw.data(), raw.size())) return raw;
  return gunzip(raw.data(), raw.size(), gzip_bound(raw.size()), base_name(path));
}

}  // namespace kiln::io
