// Tar member listing and containment check; see io/data/tar_members.h.
//   ctest --test-dir build -R io.test_hostile_files
#include "io/data/tar_members.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/error.h"
#include "io/formats/file_bytes.h"

namespace kiln {
namespace {

// A gzip or plain stream (zlib reads either), read in order.
class Stream {
 public:
  explicit Stream(const std::string& path) : path_(path) {
    io::RegularFile f(path);  // refuses FIFOs and devices before zlib opens it
    const int fd = ::dup(f.fd());
    KILN_CHECK(fd >= 0, "'", path, "': cannot open: ", std::strerror(errno));
    gz_ = gzdopen(fd, "rb");
    if (!gz_) ::close(fd);
    KILN_CHECK(gz_, "'", path, "': cannot open");
  }
  ~Stream() {
    if (gz_) gzclose(gz_);
  }
  // Fills n bytes; false at a clean end before the first byte.
  bool read(char* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      const int r = gzread(gz_, dst + done, unsigned(std::min<size_t>(n - done, 1 << 30)));
      int err = 0;
      const char* msg = r < 0 ? gzerror(gz_, &err) : "";
      KILN_CHECK(r >= 0, "'", path_, "': corrupt archive (", msg, ")");
      if (r == 0) break;
      done += size_t(r);
    }
    KILN_CHECK(done == 0 || done == n, "'", path_, "': the archive ends inside a member");
    return done == n;
  }
  void skip(uint64_t n) {
    char buf[1 << 16];
    while (n > 0) {
      const size_t k = size_t(std::min<uint64_t>(n, sizeof buf));
      KILN_CHECK(read(buf, k), "'", path_, "': the archive ends inside a member");
      n -= k;
    }
  }

 private:
  std::string path_;
  gzFile gz_ = nullptr;
};

std::string field(const char* h, size_t off, size_t len) {
  const char* p = h + off;
  return std::string(p, strnlen(p, len));
}

// Octal, or GNU base-256 (high bit of the first byte set) for sizes over 8 GiB.
uint64_t number(const char* h, size_t off, size_t len, const std::string& path) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(h + off);
  uint64_t v = 0;
  if (p[0] & 0x80) {
    KILN_CHECK(p[0] == 0x80 && len == 12 && p[1] == 0 && p[2] == 0 && p[3] == 0, "'", path,
               "': a tar header holds a size out of range");
    for (size_t i = 4; i < len; ++i) v = (v << 8) | p[i];
    // As for octal below: a size near 2^64 would wrap when padded to 512 bytes, and the headers
    // read after it would not be the ones tar reads.
    KILN_CHECK(v < (uint64_t(1) << 60), "'", path, "': a tar header holds a size out of range");
    return v;
  }
  size_t i = 0;
  while (i < len && p[i] == ' ') ++i;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    KILN_CHECK(v < (uint64_t(1) << 60), "'", path, "': a tar header holds a number out of range");
    v = v * 8 + (p[i] - '0');
  }
  return v;
}

// pax records "LEN key=value\n": the path and linkpath overrides.
void read_pax(const std::string& data, std::string* name, std::string* link, const std::string& path) {
  size_t pos = 0;
  while (pos < data.size()) {
    size_t sp = data.find(' ', pos);
    KILN_CHECK(sp != std::string::npos, "'", path, "': a malformed pax header");
    uint64_t len = 0;
    for (size_t i = pos; i < sp; ++i) {
      KILN_CHECK(data[i] >= '0' && data[i] <= '9' && len < (uint64_t(1) << 40), "'", path,
                 "': a malformed pax header");
      len = len * 10 + uint64_t(data[i] - '0');
    }
    KILN_CHECK(len > sp - pos + 1 && pos + len <= data.size() && data[pos + len - 1] == '\n', "'", path,
               "': a malformed pax header");
    const std::string rec = data.substr(sp + 1, pos + len - 1 - (sp + 1));
    const size_t eq = rec.find('=');
    KILN_CHECK(eq != std::string::npos, "'", path, "': a malformed pax header");
    if (rec.compare(0, eq, "path") == 0) *name = rec.substr(eq + 1);
    if (rec.compare(0, eq, "linkpath") == 0) *link = rec.substr(eq + 1);
    pos += len;
  }
}

// A relative name with no ".." component: resolved from a folder, it stays at or below it.
bool contained(const std::string& name) {
  if (name.empty() || name[0] == '/') return false;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t slash = name.find('/', pos);
    if (slash == std::string::npos) slash = name.size();
    if (slash - pos == 2 && name.compare(pos, 2, "..") == 0) return false;
    pos = slash + 1;
  }
  return true;
}

}  // namespace

std::vector<TarMember> tar_members(const std::string& path) {
  Stream in(path);
  std::vector<TarMember> out;
  std::string long_name, long_link, pax_name, pax_link;
  char h[512];
  constexpr uint64_t kMaxMeta = 1 << 20;  // a long name or pax header larger than this is not real
  while (in.read(h, sizeof h)) {
    bool zero = true;
    for (char c : h) zero = zero && c == 0;
    if (zero) break;  // end-of-archive blocks
    uint64_t sum = 0;
    for (size_t i = 0; i < sizeof h; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    KILN_CHECK(sum == number(h, 148, 8, path), "'", path, "': not a tar archive (header checksum of member ",
               out.size(), " does not match)");
    KILN_CHECK(std::memcmp(h + 257, "ustar", 5) == 0, "'", path, "': not a ustar/GNU/pax tar archive");
    const char type = h[156];
    const uint64_t size = number(h, 124, 12, path);
    const uint64_t padded = (size + 511) / 512 * 512;
    if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
      const char* what = type == 'L' ? "GNU long name" : type == 'K' ? "GNU long link" : "pax";
      KILN_CHECK(size <= kMaxMeta, "'", path, "': the ", what, " header of member ", out.size(), " ('",
                 field(h, 0, 100), "') declares ", size, " bytes, over the ", kMaxMeta,
                 "-byte limit on a tar metadata record");
      std::string data(size_t(padded), '\0');
      KILN_CHECK(in.read(&data[0], data.size()), "'", path, "': the archive ends inside a member");
      data.resize(size_t(size));
      if (type == 'L') long_name = std::string(data.c_str());
      else if (type == 'K') long_link = std::string(data.c_str());
      else if (type == 'x') read_pax(data, &pax_name, &pax_link, path);
      // 'g' (global pax) sets defaults for later members; a global path is not used by tar.
      continue;
    }
    TarMember m;
    const std::string prefix = field(h, 345, 155);
    m.name = field(h, 0, 100);
    if (!prefix.empty() && std::memcmp(h + 257, "ustar\0", 6) == 0) m.name = prefix + "/" + m.name;
    m.link = field(h, 157, 100);
    if (!long_name.empty()) m.name = long_name;
    if (!long_link.empty()) m.link = long_link;
    if (!pax_name.empty()) m.name = pax_name;
    if (!pax_link.empty()) m.link = pax_link;
    long_name.clear(), long_link.clear(), pax_name.clear(), pax_link.clear();
    m.type = type == '\0' ? '0' : type;
    m.size = size;
    out.push_back(m);
    // Links and directories carry no data whatever their size field says.
    if (m.type != '1' && m.type != '2' && m.type != '5') in.skip(padded);
  }
  return out;
}

void check_tar_members(const std::vector<TarMember>& members, const std::string& archive) {
  for (const TarMember& m : members) {
    std::string name = m.name;
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    KILN_CHECK(contained(name), "'", archive, "': member '", m.name,
               "' would land outside the folder it is unpacked in (absolute, or with '..')");
    switch (m.type) {
      case '0':
      case '7':
      case '5':
        break;
      case '1':
        KILN_CHECK(contained(m.link), "'", archive, "': member '", m.name, "' is a hard link to '", m.link,
                   "', outside the folder it is unpacked in");
        break;
      case '2':
        // Targets that only descend (relative, no ".."): a chain of such links cannot leave the folder.
        KILN_CHECK(contained(m.link), "'", archive, "': member '", m.name, "' is a symlink to '", m.link,
                   "', which is absolute or climbs with '..'");
        break;
      default:
        KILN_THROW("'", archive, "': member '", m.name, "' is of tar type '", m.type,
                   "' (a device, FIFO or other special file); only files, directories and links are unpacked");
    }
  }
}

}  // namespace kiln
