// Whole-file reading shared by the io/ readers: every reader loads the file (decompressed when
// gzip) into memory and then checks sizes against it, so no reader can read past the end.
//   ctest --test-dir build -R test_readers
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::io {

// The file's bytes; gzip files (by their magic, whatever the name) are decompressed with zlib.
// Missing or unreadable files and corrupt gzip streams throw kiln::Error naming the path.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// "dir/sub/name.ext" -> "name.ext", for messages.
std::string base_name(const std::string& path);

bool file_exists(const std::string& path);

// Big-endian 32-bit at `offset` (caller checked the bounds).
inline uint32_t read_be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace kiln::io
