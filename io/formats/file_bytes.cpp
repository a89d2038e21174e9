// Whole-file reading with zlib for gzip. See file_bytes.h.
#include "io/formats/file_bytes.h"

#include <zlib.h>

#include <sys/stat.h>

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

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  KILN_CHECK(file_exists(path), base_name(path), ": no such file (", path, ")");
  // gzopen reads plain files as they are (transparent mode), so one path serves both.
  gzFile f = gzopen(path.c_str(), "rb");
  KILN_CHECK(f != nullptr, base_name(path), ": cannot open (", path, ")");
  gzbuffer(f, 1 << 17);
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    int n = gzread(f, chunk.data(), unsigned(chunk.size()));
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      size_t at = out.size();
      gzclose(f);
      KILN_THROW(base_name(path), ": corrupt gzip stream after ", at, " decompressed bytes: ", msg);
    }
    if (n == 0) break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  // A truncated gzip stream ends without an error from gzread; gzclose/gzerror report it.
  int errnum = 0;
  const char* msg = gzerror(f, &errnum);
  std::string err = (errnum != Z_OK && errnum != Z_STREAM_END && msg) ? msg : "";
  int rc = gzclose(f);
  KILN_CHECK(err.empty() && rc == Z_OK, base_name(path), ": corrupt or truncated gzip stream after ",
             out.size(), " decompressed bytes", err.empty() ? "" : ": ", err);
  return out;
}

}  // namespace kiln::io
