// safetensors reading and writing; see io/formats/safetensors.h for the format and guarantees.
//   ctest --test-dir build -R io.test_safetensors
#include "io/formats/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/autograd.h"
#include "engine/error.h"
#include "io/formats/file_bytes.h"
#include "io/formats/json_limits.h"

namespace kiln {
namespace {

using Json = nlohmann::ordered_json;  // keeps tensors in the order they were written

constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

// The data is copied byte for byte, so the host must store numbers as the file does.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

const char* dtype_tag(DType t) {
  switch (t) {
    case DType::float32: return "F32";
    case DType::float64: return "F64";
    case DType::float16: return "F16";
    case DType::bfloat16: return "BF16";
    case DType::int32: return "I32";
    case DType::int64: return "I64";
    case DType::uint8: return "U8";
    case DType::boolean: return "BOOL";
  }
  KILN_THROW("safetensors: unsupported dtype ", int(t));
}

bool dtype_from_tag(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> tags[] = {
      {"F32", DType::float32}, {"F64", DType::float64}, {"F16", DType::float16}, {"BF16", DType::bfloat16},
      {"I32", DType::int32},   {"I64", DType::int64},   {"U8", DType::uint8}, {"BOOL", DType::boolean}};
  for (auto& [tag, t] : tags)
    if (s == tag) { *out = t; return true; }
  return false;
}

// Writes all of [p, p + n) or throws.
void write_all(int fd, const void* p, size_t n, const std::string& tmp) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    KILN_CHECK(w > 0, "write to '", tmp, "' failed: ", std::strerror(errno));
    c += w;
    n -= size_t(w);
  }
}

// Removes the temp file (and closes it) when the write does not reach the rename.
struct TempFile {
  std::string path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!committed) ::unlink(path.c_str());
  }
};

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Contiguous CPU copies, detached so no graph is recorded.
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  Json header = Json::object();
  uint64_t offset = 0;
  std::set<std::string> seen;
  for (auto& [name, t] : tensors) {
    KILN_CHECK(t.defined(), "save_safetensors '", path, "': tensor '", name, "' is undefined");
    KILN_CHECK(name != "__metadata__", "save_safetensors '", path, "': '__metadata__' is reserved");
    KILN_CHECK(seen.insert(name).second, "save_safetensors '", path, "': duplicate tensor name '", name, "'");
    Tensor c = t.detach().to(Device()).contiguous();
    uint64_t nbytes = uint64_t(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype_tag(c.dtype())}, {"shape", c.sizes()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    host.push_back(c);
  }
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  TempFile tmp;
  tmp.path = path + ".tmp." + std::to_string(::getpid());
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  KILN_CHECK(tmp.fd >= 0, "save_safetensors '", path, "': cannot create '", tmp.path, "': ", std::strerror(errno));
  try {
    write_all(tmp.fd, len, 8, tmp.path);
    write_all(tmp.fd, text.data(), text.size(), tmp.path);
    for (auto& c : host)
      if (c.numel() > 0) write_all(tmp.fd, c.data_ptr(), size_t(c.numel()) * c.element_size(), tmp.path);
    KILN_CHECK(::fsync(tmp.fd) == 0, "fsync of '", tmp.path, "' failed: ", std::strerror(errno));
    int rc = ::close(tmp.fd);
    tmp.fd = -1;
    KILN_CHECK(rc == 0, "close of '", tmp.path, "' failed: ", std::strerror(errno));
    KILN_CHECK(::rename(tmp.path.c_str(), path.c_str()) == 0, "rename of '", tmp.path, "' failed: ",
               std::strerror(errno));
    tmp.committed = true;
  } catch (const Error& e) {
    KILN_THROW("save_safetensors '", path, "': ", e.message());
  }
  // Make the rename itself durable; a failure here leaves a complete file, so it is not an error.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

namespace {

// The header's JSON, refusing what nlohmann would accept silently (a duplicate tensor name: it
// keeps the last) or fail on later (nesting deep enough to overflow the stack).
Json parse_header(const std::string& path, const std::string& text) {
  // nlohmann keeps the last of duplicate keys silently; the callback sees every top-level key.
  std::string duplicate;
  std::set<std::string> keys;
  auto on_event = [&](int depth, Json::parse_event_t ev, Json& parsed) {
    if (ev == Json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!keys.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  // Deep nesting parses but overflows the stack when dumped or destroyed (io/formats/json_limits.h).
  io::check_json_depth(text, "load_safetensors '" + path + "': header");
  Json header;
  try {
    header = Json::parse(text, on_event);
  } catch (const Json::parse_error& e) {
    KILN_THROW("load_safetensors '", path, "': invalid JSON header at byte ", 8 + e.byte - (e.byte > 0 ? 1 : 0),
               ": ", e.what());
  } catch (const Json::exception& e) {
    // A number out of range (out_of_range.406: "1E400") is not a parse_error (found by fuzz/targets/safetensors.cpp).
    KILN_THROW("load_safetensors '", path, "': invalid JSON header: ", e.what());
  }
  KILN_CHECK(duplicate.empty(), "load_safetensors '", path, "': duplicate tensor name '", duplicate, "'");
  return header;
}

}  // namespace

NamedTensors load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  // A FIFO or device is refused at once (io/formats/file_bytes.h); the header is read whole, the
  // data tensor by tensor, each size checked against the file's real size first.
  std::unique_ptr<io::RegularFile> file;
  try {
    file = std::make_unique<io::RegularFile>(path);
  } catch (const Error& e) {
    KILN_THROW("load_safetensors '", path, "': cannot open: ", e.message());
  }
  const uint64_t file_size = file->size();
  KILN_CHECK(file_size >= 8, "load_safetensors '", path, "': file is ", file_size,
             " bytes, shorter than the 8-byte header length at byte 0");
  unsigned char len[8];
  file->read_at(0, len, 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(len[i]) << (8 * i);
  KILN_CHECK(n <= file_size - 8, "load_safetensors '", path, "': header length ", n,
             " (at byte 0) runs past the end of the file (", file_size, " bytes)");
  // The reference implementation's limit: a parsed JSON header costs tens of times its text.
  KILN_CHECK(n <= kMaxHeaderBytes, "load_safetensors '", path, "': header length ", n, " (at byte 0) is over the ",
             kMaxHeaderBytes, "-byte limit");
  std::string text(n, '\0');
  if (n) file->read_at(8, &text[0], n);
  const uint64_t data_start = 8 + n, data_size = file_size - data_start;

  const Json header = parse_header(path, text);
  KILN_CHECK(header.is_object(), "load_safetensors '", path, "': header at byte 8 is not a JSON object");

  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  if (metadata) metadata->clear();
  for (auto& item : header.items()) {
    // Named references, not a structured binding: C++17 lambdas cannot capture one (clang refuses).
    const std::string& name = item.key();
    auto& v = item.value();
    auto fail = [&](const std::string& what) {
      KILN_THROW("load_safetensors '", path, "': tensor '", name, "': ", what);
    };
    if (name == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) fail("__metadata__ value '" + k + "' is not a string");
        if (metadata) (*metadata)[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) fail("entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail("missing or non-string dtype");
    Entry e{name, DType::float32, {}, 0, 0};
    std::string tag = v["dtype"].get<std::string>();
    if (!dtype_from_tag(tag, &e.dtype)) fail("unknown dtype '" + tag + "' (known: F32 F64 F16 BF16 I32 I64 U8)");
    if (!v.contains("shape") || !v["shape"].is_array()) fail("missing or non-array shape");
    // numel * itemsize, checked for overflow so a huge shape cannot wrap around to a small size.
    uint64_t nbytes = element_size(e.dtype);
    for (auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail("shape has a non-integer or negative size");
      uint64_t s = d.get<uint64_t>();
      if (s > uint64_t(std::numeric_limits<int64_t>::max())) fail("shape size too large");
      if (s != 0 && nbytes > std::numeric_limits<uint64_t>::max() / s) fail("shape too large");
      nbytes *= s;
      e.shape.push_back(int64_t(s));
    }
    auto& off = v.contains("data_offsets") ? v["data_offsets"] : v;
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("data_offsets missing or not two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      fail("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
           "] out of range (data section is " + std::to_string(data_size) + " bytes, from byte " +
           std::to_string(data_start) + ")");
    if (e.end - e.begin != nbytes)
      fail("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] span " +
           std::to_string(e.end - e.begin) + " bytes but dtype and shape need " + std::to_string(nbytes));
    entries.push_back(std::move(e));
  }
  std::vector<const Entry*> by_offset;
  for (auto& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& a = *by_offset[i - 1];
    const Entry& b = *by_offset[i];
    KILN_CHECK(b.begin >= a.end || a.begin == a.end || b.begin == b.end, "load_safetensors '", path,
               "': tensors '", a.name, "' [", a.begin, ", ", a.end, ") and '", b.name, "' [", b.begin, ", ", b.end,
               ") overlap");
  }

  NamedTensors out;
  out.reserve(entries.size());
  for (auto& e : entries) {
    Tensor t = empty(e.shape, TensorOptions(e.dtype));
    if (e.end > e.begin) {
      file->read_at(data_start + e.begin, t.data_ptr(), size_t(e.end - e.begin));
      if (e.dtype == DType::boolean) {  // any nonzero byte is true (a C++ bool holds 0 or 1)
        auto* p = static_cast<uint8_t*>(t.data_ptr());
        for (uint64_t i = 0; i < e.end - e.begin; ++i) p[i] = p[i] != 0;
      }
    }
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

void save_module(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, module.state_dict(), metadata);
}

void load_module(Module& module, const std::string& path, bool strict) {
  NamedTensors state = load_safetensors(path);
  try {
    NoGradGuard ng;
    module.load_state_dict(state, strict);
  } catch (const Error& e) {
    KILN_THROW("load_module '", path, "': ", e.message());
  }
}

}  // namespace kiln
