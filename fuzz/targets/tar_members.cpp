// Tar archive headers (plain or gzip) through tar_members then check_tar_members, as
// `kiln data fetch` runs them on a downloaded archive before it calls tar. The reader takes a
// path, so the input is written to the temp dir first.
//   tools/fuzz tar_members -s 120     (replay: ctest --test-dir build -R '^fuzz\.tar_members$')
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/data/tar_members.h"

namespace {

void read_archive(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::write_temp("archive.tar", data, size);
  try {
    kiln::check_tar_members(kiln::tar_members(path), path);
  } catch (const kiln::Error&) {
  }
}

// A mutated header almost never keeps its checksum right, and a wrong one stops the reader at
// that header: the input is read a second time with the checksum of every 512-byte block that
// has the ustar magic recomputed, so the fields behind it (sizes, types, GNU long names, pax
// records) are fuzzed too. Returns "" when nothing changed.
std::string with_checksums(const uint8_t* data, size_t size) {
  if (size < 512) return "";
  std::string s(reinterpret_cast<const char*>(data), size);
  for (size_t off = 0; off + 512 <= s.size(); off += 512) {
    char* h = &s[off];
    if (std::memcmp(h + 257, "ustar", 5) != 0) continue;
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < 512; ++i) sum += static_cast<unsigned char>(h[i]);
    std::snprintf(h + 148, 8, "%06o", sum);  // tar's "%06o\0 ": at most 512 x 255 = 0377000
  }
  return std::memcmp(s.data(), data, size) == 0 ? std::string() : s;
}

}  // namespace

KILN_FUZZ_TARGET(tar_members) {
  read_archive(data, size);
  const std::string fixed = with_checksums(data, size);
  if (!fixed.empty()) read_archive(reinterpret_cast<const uint8_t*>(fixed.data()), fixed.size());
  return 0;
}
