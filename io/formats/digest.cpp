// File and buffer digests (OpenSSL EVP) and atomic small-file writes; see io/formats/digest.h.
//   ctest --test-dir build -R io.test_checkpoint
#include "io/formats/digest.h"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "engine/error.h"
#include "io/formats/file_bytes.h"

namespace kiln::io {

struct Digest::Impl {
  EVP_MD_CTX* ctx = nullptr;
  std::string name;
};

Digest::Digest(const std::string& algorithm) : impl_(std::make_unique<Impl>()) {
  const EVP_MD* md = algorithm == "md5" ? EVP_md5() : algorithm == "sha256" ? EVP_sha256() : nullptr;
  KILN_CHECK(md != nullptr, "digest: unknown algorithm '", algorithm, "' (md5, sha256)");
  impl_->name = algorithm;
  impl_->ctx = EVP_MD_CTX_new();
  KILN_CHECK(impl_->ctx != nullptr && EVP_DigestInit_ex(impl_->ctx, md, nullptr) == 1, "digest: ", algorithm,
             " initialisation failed in libcrypto");
}

Digest::~Digest() {
  if (impl_ && impl_->ctx) EVP_MD_CTX_free(impl_->ctx);
}

void Digest::update(const void* data, size_t n) {
  KILN_CHECK(EVP_DigestUpdate(impl_->ctx, data, n) == 1, "digest: ", impl_->name, " update failed");
}

std::string Digest::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  KILN_CHECK(EVP_DigestFinal_ex(impl_->ctx, md, &len) == 1, "digest: ", impl_->name, " final failed");
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += digits[md[i] >> 4];
    s += digits[md[i] & 15];
  }
  return s;
}

std::string digest_hex(const std::string& algorithm, const void* data, size_t n) {
  Digest d(algorithm);
  d.update(data, n);
  return d.hex();
}

std::string file_digest_hex(const std::string& algorithm, const std::string& path) {
  Digest d(algorithm);
  // A FIFO or device in place of the file is refused, never read until it ends (RegularFile).
  RegularFile file(path);
  std::vector<char> buf(1 << 20);
  for (uint64_t at = 0; at < file.size(); at += buf.size()) {
    size_t n = size_t(std::min<uint64_t>(buf.size(), file.size() - at));
    file.read_at(at, buf.data(), n);
    d.update(buf.data(), n);
  }
  return d.hex();
}

std::string gunzip_digest_hex(const std::string& algorithm, const std::string& path) {
  Digest d(algorithm);
  RegularFile file(path);
  int fd = ::dup(file.fd());
  KILN_CHECK(fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
  gzFile gz = ::gzdopen(fd, "rb");
  if (!gz) ::close(fd);
  KILN_CHECK(gz != nullptr, "cannot open '", path, "': ", std::strerror(errno));
  std::vector<char> buf(1 << 20);
  for (;;) {
    int r = ::gzread(gz, buf.data(), unsigned(buf.size()));
    if (r < 0) {
      int err = 0;
      std::string msg = ::gzerror(gz, &err);
      ::gzclose(gz);
      KILN_THROW("'", path, "': corrupt gzip stream: ", msg);
    }
    if (r == 0) break;
    d.update(buf.data(), size_t(r));
  }
  ::gzclose(gz);
  return d.hex();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  KILN_CHECK(fd >= 0, "cannot create '", tmp, "': ", std::strerror(errno));
  const char* p = bytes.data();
  size_t n = bytes.size();
  bool ok = true;
  int err = 0;
  while (n > 0 && ok) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { ok = false; err = errno; break; }
    p += w;
    n -= size_t(w);
  }
  if (ok && ::fsync(fd) != 0) { ok = false; err = errno; }
  if (::close(fd) != 0 && ok) { ok = false; err = errno; }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) { ok = false; err = errno; }
  if (!ok) {
    ::unlink(tmp.c_str());
    KILN_THROW("writing '", path, "' failed: ", std::strerror(err));
  }
  // The rename is durable only once the directory entry is.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (dir.empty()) dir = "/";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace kiln::io
