// MD5 and SHA-256 of files and buffers through OpenSSL's EVP interface (libcrypto), as lowercase
// hex: checkpoint sidecars record the sha256 of their tensor files, and the data-set catalogue
// checks downloads against the md5/sha256 their publishers list.
//   ctest --test-dir build -R io.test_checkpoint
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace kiln::io {

// Incremental digest: update() any number of times, then hex() once.
class Digest {
 public:
  explicit Digest(const std::string& algorithm);  // "md5" or "sha256"
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  void update(const void* data, size_t n);
  std::string hex();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string digest_hex(const std::string& algorithm, const void* data, size_t n);
// Streams the file in 1 MiB pieces; a missing or unreadable file throws kiln::Error naming it.
std::string file_digest_hex(const std::string& algorithm, const std::string& path);
// gzip files: the digest of the decompressed bytes (for copies recompressed by a distribution).
std::string gunzip_digest_hex(const std::string& algorithm, const std::string& path);

// Writes `bytes` to `path` through a temporary file in the same directory, fsync, rename, and an
// fsync of the directory, so readers see the old file or the new one, never a part.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace kiln::io
