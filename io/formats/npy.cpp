// .npy reader. See npy.h. The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a newline; we parse just those three keys.
#include "io/formats/npy.h"

#include <cctype>
#include <cstring>

#include "engine/checked_size.h"
#include "io/formats/file_bytes.h"

namespace kiln {

namespace {

struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

// Position just after "'key':" (or "\"key\":"), skipping spaces; npos when absent.
size_t value_of(const std::string& h, const std::string& key) {
  for (const char* q : {"'", "\""}) {
    std::string k = std::string(q) + key + q;
    size_t p = h.find(k);
    if (p == std::string::npos) continue;
    p += k.size();
    while (p < h.size() && std::isspace((unsigned char)h[p])) ++p;
    if (p >= h.size() || h[p] != ':') return std::string::npos;
    ++p;
    while (p < h.size() && std::isspace((unsigned char)h[p])) ++p;
    return p;
  }
  return std::string::npos;
}

Header parse_header(const std::string& h, const std::string& name, size_t off) {
  Header out;
  auto bad = [&](const std::string& why) {
    KILN_THROW(name, ": malformed .npy header at offset ", off, ": ", why, " in ",
               h.size() > 200 ? h.substr(0, 200) + "..." : h);
  };
  size_t p = value_of(h, "descr");
  if (p == std::string::npos || p >= h.size() || (h[p] != '\'' && h[p] != '"')) bad("no 'descr' string");
  size_t e = h.find(h[p], p + 1);
  if (e == std::string::npos) bad("unterminated 'descr'");
  out.descr = h.substr(p + 1, e - p - 1);

  p = value_of(h, "fortran_order");
  if (p == std::string::npos) bad("no 'fortran_order'");
  if (h.compare(p, 4, "True") == 0) out.fortran = true;
  else if (h.compare(p, 5, "False") != 0) bad("'fortran_order' is neither True nor False");

  p = value_of(h, "shape");
  if (p == std::string::npos || h[p] != '(') bad("no 'shape' tuple");
  e = h.find(')', p);
  if (e == std::string::npos) bad("unterminated 'shape'");
  size_t i = p + 1;
  while (i < e) {
    while (i < e && (std::isspace((unsigned char)h[i]) || h[i] == ',')) ++i;
    if (i >= e) break;
    if (!std::isdigit((unsigned char)h[i])) bad("non-integer in 'shape'");
    int64_t v = 0;
    while (i < e && std::isdigit((unsigned char)h[i])) {
      v = v * 10 + (h[i] - '0');
      if (v > (int64_t(1) << 40)) bad("dim over 2^40 in 'shape'");
      ++i;
    }
    out.shape.push_back(v);
  }
  return out;
}

}  // namespace

Tensor read_npy(const std::string& path) {
  std::vector<uint8_t> bytes = io::read_file_bytes(path);
  return parse_npy(bytes.data(), bytes.size(), io::base_name(path));
}

Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name) {
  const io::ByteView b{data, size};
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  KILN_CHECK(b.size() >= 10, name, ": truncated at offset 0: expected a 10-byte .npy preamble, file has ",
             b.size(), " bytes");
  KILN_CHECK(std::memcmp(b.data(), magic, 6) == 0, name, ": bad .npy magic at offset 0 (expected \\x93NUMPY)");
  int major = b[6], minor = b[7];
  KILN_CHECK((major == 1 || major == 2 || major == 3) && minor == 0, name, ": unsupported .npy version ",
             major, ".", minor, " at offset 6 (1.0, 2.0 and 3.0 are read)");
  size_t len_at = 8, len_size = major == 1 ? 2 : 4;
  KILN_CHECK(b.size() >= len_at + len_size, name, ": truncated at offset 8: expected a ", len_size,
             "-byte header length, file has ", b.size(), " bytes");
  uint64_t hlen = b[8] | (uint64_t(b[9]) << 8);
  if (len_size == 4) hlen |= (uint64_t(b[10]) << 16) | (uint64_t(b[11]) << 24);
  size_t hstart = len_at + len_size;
  KILN_CHECK(b.size() - hstart >= hlen, name, ": truncated at offset ", hstart, ": header length ", hlen,
             ", file has ", b.size() - hstart, " bytes after offset ", hstart);
  std::string text(reinterpret_cast<const char*>(b.data()) + hstart, hlen);
  Header h = parse_header(text, name, hstart);

  DType dt;
  const std::string& d = h.descr;
  if (d == "<f4") dt = float32;
  else if (d == "<f8") dt = float64;
  else if (d == "<i4") dt = int32;
  else if (d == "<i8") dt = int64;
  else if (d == "|u1" || d == "<u1") dt = uint8;
  else if (d == "|b1" || d == "<b1") dt = boolean;
  else if (!d.empty() && d[0] == '>')
    KILN_THROW(name, ": big-endian dtype '", d, "' at offset ", hstart, " is not supported (little-endian only)");
  else
    KILN_THROW(name, ": unsupported dtype '", d, "' at offset ", hstart,
               " (supported: <f4 <f8 <i4 <i8 |u1 |b1)");
  KILN_CHECK(!h.fortran, name, ": Fortran-order array at offset ", hstart,
             " is not supported; save it with numpy.ascontiguousarray first");

  // Each dim is below 2^40 but their product can wrap 2^64: checked as it is formed, then the
  // bytes must be in the file before anything is allocated.
  uint64_t nbytes = checked_nbytes(h.shape, element_size(dt), name + ": shape at offset " + std::to_string(hstart));
  size_t data_at = hstart + hlen;
  uint64_t have = b.size() - data_at;
  KILN_CHECK(have >= nbytes, name, ": truncated at offset ", data_at, " + ", have, ": expected ", nbytes,
             " bytes of ", d, " data, file has ", have);
  KILN_CHECK(have == nbytes, name, ": ", have - nbytes, " trailing bytes at offset ", data_at, " + ", nbytes,
             ": shape gives ", nbytes, " bytes of data, file has ", have);
  Tensor t = empty(h.shape, dt);
  if (nbytes) std::memcpy(t.data_ptr(), b.data() + data_at, nbytes);
  if (dt == boolean) {  // a file's booleans are bytes: any nonzero one is true (a C++ bool holds 0 or 1)
    auto* p = static_cast<uint8_t*>(t.data_ptr());
    for (uint64_t i = 0; i < nbytes; ++i) p[i] = p[i] != 0;
  }
  return t;
}

}  // namespace kiln
