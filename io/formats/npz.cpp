// .npz reader. See npz.h. Zip layout (APPNOTE.TXT 6.3): local headers + data, then the central
// directory, then the end of central directory record (EOCD, possibly preceded by ZIP64 EOCD and
// its locator). We find the EOCD from the end, walk the central directory and, for each member,
// check the local header before inflating it with zlib (raw deflate, windowBits -15).
#include "io/formats/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "io/formats/file_bytes.h"
#include "io/formats/npy.h"

namespace kiln {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEocdSig = 0x06054b50;
constexpr uint32_t kEocd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;

using Bytes = io::ByteView;

struct Reader {
  Bytes b;
  const std::string& name;
  void need(uint64_t off, uint64_t n, const char* what) const {
    KILN_CHECK(off <= b.size() && n <= b.size() - off, name, ": truncated at offset ", off, ": ", what, " needs ", n,
               " bytes, file has ", b.size());
  }
  uint16_t u16(uint64_t off) const { return uint16_t(b[off] | (b[off + 1] << 8)); }
  uint32_t u32(uint64_t off) const { return uint32_t(u16(off)) | (uint32_t(u16(off + 2)) << 16); }
  uint64_t u64(uint64_t off) const { return uint64_t(u32(off)) | (uint64_t(u32(off + 4)) << 32); }
};

struct Member {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, local = 0;
  uint64_t central_at = 0;
};

// ZIP64 extended information (id 0x0001): the 64-bit values of the fields that were 0xFFFFFFFF,
// in the order usize, csize, offset.
void apply_zip64(const Reader& r, uint64_t extra, uint64_t extra_len, Member& m, bool has_offset) {
  uint64_t p = extra, end = extra + extra_len;
  while (p + 4 <= end) {
    uint16_t id = r.u16(p), len = r.u16(p + 2);
    KILN_CHECK(p + 4 + len <= end, r.name, ": extra field overruns its block at offset ", p);
    if (id == 0x0001) {
      uint64_t q = p + 4, qend = q + len;
      auto take = [&](uint64_t& field) {
        if (field != 0xFFFFFFFFu) return;
        KILN_CHECK(q + 8 <= qend, r.name, ": ZIP64 extra field too short at offset ", p);
        field = r.u64(q);
        q += 8;
      };
      take(m.usize);
      take(m.csize);
      if (has_offset) take(m.local);
      return;
    }
    p += 4 + len;
  }
}

std::vector<Member> central_directory(const Reader& r) {
  const auto& b = r.b;
  KILN_CHECK(b.size() >= 22, r.name, ": truncated at offset 0: ", b.size(), " bytes, too short for a zip (.npz) file");
  // The EOCD is 22 bytes plus a comment of up to 65535 bytes.
  uint64_t eocd = UINT64_MAX;
  uint64_t lowest = b.size() > 22 + 65535 ? b.size() - 22 - 65535 : 0;
  for (uint64_t p = b.size() - 22 + 1; p-- > lowest;)
    if (r.u32(p) == kEocdSig) {
      eocd = p;
      break;
    }
  KILN_CHECK(eocd != UINT64_MAX, r.name, ": no zip end of central directory record in the last ",
             b.size() - lowest, " bytes (offset ", lowest, "): not a .npz file or truncated");
  uint64_t count = r.u16(eocd + 10), cd_size = r.u32(eocd + 12), cd_at = r.u32(eocd + 16);
  KILN_CHECK(r.u16(eocd + 4) == 0 && r.u16(eocd + 6) == 0, r.name, ": multi-disk zip at offset ", eocd,
             " is not supported");
  if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_at == 0xFFFFFFFFu) {
    KILN_CHECK(eocd >= 20 && r.u32(eocd - 20) == kLocator64Sig, r.name, ": no ZIP64 locator before the end record at offset ",
               eocd);
    uint64_t e64 = r.u64(eocd - 20 + 8);
    r.need(e64, 56, "the ZIP64 end record");
    KILN_CHECK(r.u32(e64) == kEocd64Sig, r.name, ": bad ZIP64 end record signature at offset ", e64);
    count = r.u64(e64 + 32);
    cd_size = r.u64(e64 + 40);
    cd_at = r.u64(e64 + 48);
  }
  r.need(cd_at, cd_size, "the central directory");
  std::vector<Member> out;
  uint64_t p = cd_at;
  for (uint64_t i = 0; i < count; ++i) {
    r.need(p, 46, "a central directory entry");
    KILN_CHECK(r.u32(p) == kCentralSig, r.name, ": bad central directory signature at offset ", p);
    Member m;
    m.central_at = p;
    m.flags = r.u16(p + 8);
    m.method = r.u16(p + 10);
    m.crc = r.u32(p + 16);
    m.csize = r.u32(p + 20);
    m.usize = r.u32(p + 24);
    uint64_t nlen = r.u16(p + 28), elen = r.u16(p + 30), clen = r.u16(p + 32);
    m.local = r.u32(p + 42);
    r.need(p + 46, nlen + elen + clen, "a central directory name and extra field");
    m.name.assign(reinterpret_cast<const char*>(b.data() + p + 46), nlen);
    apply_zip64(r, p + 46 + nlen, elen, m, true);
    out.push_back(std::move(m));
    p += 46 + nlen + elen + clen;
  }
  KILN_CHECK(p <= cd_at + cd_size, r.name, ": central directory entries overrun its size at offset ", cd_at + cd_size);
  // Overlapping members would let a small file inflate the same compressed bytes many times.
  std::vector<const Member*> by_local;
  for (const Member& m : out) by_local.push_back(&m);
  std::sort(by_local.begin(), by_local.end(), [](const Member* a, const Member* c) { return a->local < c->local; });
  for (size_t i = 1; i < by_local.size(); ++i) {
    const Member& a = *by_local[i - 1];
    const Member& c = *by_local[i];
    KILN_CHECK(a.csize <= b.size() && c.local - a.local >= 30 + a.csize, r.name, ": members '", a.name, "' (offset ",
               a.local, ", ", a.csize, " compressed bytes) and '", c.name, "' (offset ", c.local, ") overlap");
  }
  return out;
}

std::vector<uint8_t> member_bytes(const Reader& r, const Member& m) {
  const auto& b = r.b;
  std::string where = r.name + ":" + m.name;
  r.need(m.local, 30, "a local file header");
  KILN_CHECK(r.u32(m.local) == kLocalSig, where, ": bad local header signature at offset ", m.local);
  KILN_CHECK(!(m.flags & 1), where, ": encrypted member at offset ", m.local, " is not supported");
  uint16_t lmethod = r.u16(m.local + 8);
  uint64_t nlen = r.u16(m.local + 26), elen = r.u16(m.local + 28);
  r.need(m.local + 30, nlen + elen, "a local header name and extra field");
  std::string lname(reinterpret_cast<const char*>(b.data() + m.local + 30), nlen);
  KILN_CHECK(lname == m.name && lmethod == m.method, where, ": local header at offset ", m.local,
             " disagrees with the central directory (name '", lname, "', method ", lmethod, " vs ", m.method, ")");
  uint64_t data_at = m.local + 30 + nlen + elen;
  r.need(data_at, m.csize, "member data");
  KILN_CHECK(m.usize <= (uint64_t(1) << 40), where, ": uncompressed size ", m.usize, " at offset ", m.central_at,
             " is implausible");
  // Deflate expands at most about 1032:1, so a larger size is corrupt, not a huge allocation.
  KILN_CHECK(m.usize <= (m.method == 0 ? m.csize : m.csize * 1032 + 1024), where, ": uncompressed size ", m.usize,
             " at offset ", m.central_at, " cannot come from ", m.csize, " compressed bytes");
  std::vector<uint8_t> out(m.usize);
  if (m.method == 0) {
    KILN_CHECK(m.csize == m.usize, where, ": stored member at offset ", m.local, " has compressed size ", m.csize,
               " != size ", m.usize);
    if (m.usize) std::memcpy(out.data(), b.data() + data_at, m.usize);
  } else if (m.method == 8) {
    z_stream z{};
    KILN_CHECK(inflateInit2(&z, -15) == Z_OK, where, ": zlib inflateInit2 failed");
    // zlib counts in uInt: feed input and output in slices of at most 1 GiB.
    uint64_t in_fed = 0, out_given = 0;
    uint8_t dummy = 0;
    z.next_out = m.usize ? out.data() : &dummy;
    int rc;
    do {
      if (z.avail_in == 0 && in_fed < m.csize) {
        uInt c = uInt(std::min<uint64_t>(m.csize - in_fed, 1u << 30));
        z.next_in = const_cast<Bytef*>(b.data() + data_at + in_fed);
        z.avail_in = c;
        in_fed += c;
      }
      if (z.avail_out == 0 && out_given < m.usize) {
        uInt c = uInt(std::min<uint64_t>(m.usize - out_given, 1u << 30));
        z.next_out = out.data() + out_given;
        z.avail_out = c;
        out_given += c;
      }
      rc = inflate(&z, Z_NO_FLUSH);
    } while (rc == Z_OK);
    uint64_t consumed = z.total_in, produced = z.total_out;
    std::string zmsg = z.msg ? z.msg : (rc == Z_BUF_ERROR ? "stream ends early or is longer than its size" : "error");
    inflateEnd(&z);
    KILN_CHECK(rc == Z_STREAM_END, where, ": corrupt deflate data at offset ", data_at + consumed, " (zlib: ", zmsg,
               ")");
    KILN_CHECK(produced == m.usize, where, ": inflated ", produced, " bytes, the directory at offset ", m.central_at,
               " says ", m.usize);
  } else {
    KILN_THROW(where, ": compression method ", m.method, " at offset ", m.local,
               " is not supported (stored 0 and deflate 8 are)");
  }
  uLong crc = 0;
  for (uint64_t at = 0; at < out.size(); at += 1u << 30)
    crc = crc32(crc, out.data() + at, uInt(std::min<uint64_t>(out.size() - at, 1u << 30)));
  KILN_CHECK(crc == m.crc, where, ": CRC-32 mismatch for the data at offset ", data_at, " (got ", crc, ", expected ",
             m.crc, ")");
  return out;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path) {
  std::vector<uint8_t> bytes = io::read_raw_bytes(path);
  return parse_npz(bytes.data(), bytes.size(), io::base_name(path));
}

std::vector<std::pair<std::string, Tensor>> parse_npz(const uint8_t* data, size_t size, const std::string& name) {
  Reader r{Bytes{data, size}, name};
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Member& m : central_directory(r)) {
    std::vector<uint8_t> data = member_bytes(r, m);
    std::string key = m.name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    out.emplace_back(key, parse_npy(data.data(), data.size(), name + ":" + m.name));
  }
  return out;
}

Tensor npz_inputs(Tensor x) {
  KILN_CHECK(x.dim() >= 2, "npz_inputs: expected [N, ...], got ", shape_str(x.sizes()));
  if (x.dim() == 3) return x.unsqueeze(1).contiguous();
  if (x.dim() == 4) {
    int64_t c_last = x.size(3), c_first = x.size(1);
    bool nhwc = (c_last == 1 || c_last == 3) && !(c_first == 1 || c_first == 3);
    if (nhwc) return x.permute({0, 3, 1, 2}).contiguous();
  }
  return x;
}

Tensor npz_targets(Tensor y) {
  KILN_CHECK(y.dim() >= 1, "npz_targets: expected [N, ...], got ", shape_str(y.sizes()));
  if (y.dim() == 1 && !y.is_floating_point()) return y.to(int64).contiguous();
  Tensor t = y.dim() == 3 ? y.unsqueeze(1) : y;
  return t.to(float32).contiguous();
}

namespace {

Tensor find_key(const std::vector<std::pair<std::string, Tensor>>& arrays, const std::string& key,
                const std::string& path) {
  std::string have;
  for (const auto& [k, t] : arrays) {
    if (k == key) return t;
    have += (have.empty() ? "" : ", ") + k;
  }
  KILN_THROW(io::base_name(path), ": no array '", key, "' (has: ", have, ")");
}

TensorDataset load_npz(const std::string& path, const std::string& input_key, const std::string& target_key) {
  auto arrays = read_npz(path);
  return TensorDataset(npz_inputs(find_key(arrays, input_key, path)), npz_targets(find_key(arrays, target_key, path)));
}

}  // namespace

NpzDataset::NpzDataset(const std::string& path, const std::string& input_key, const std::string& target_key)
    : TensorDataset(load_npz(path, input_key, target_key)) {}

}  // namespace kiln
