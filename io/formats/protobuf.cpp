// The protobuf wire format (io/formats/protobuf.h).
//   ctest --test-dir build -R onnx
#include "io/formats/protobuf.h"

#include <cstring>

#include "engine/error.h"

namespace kiln::pb {

void Writer::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out_.push_back(char(uint8_t(v)));
}

void Writer::tag(int field, WireType t) { raw_varint((uint64_t(field) << 3) | uint64_t(t)); }

void Writer::varint(int field, uint64_t v) {
  tag(field, WireType::varint);
  raw_varint(v);
}

void Writer::fixed32(int field, uint32_t v) {
  tag(field, WireType::fixed32);
  for (int i = 0; i < 4; ++i) out_.push_back(char(uint8_t(v >> (8 * i))));  // little-endian on the wire
}

void Writer::float32(int field, float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  fixed32(field, u);
}

void Writer::bytes(int field, const void* data, size_t n) {
  tag(field, WireType::bytes);
  raw_varint(n);
  out_.append(static_cast<const char*>(data), n);
}

void Writer::bytes(int field, const std::string& b) { bytes(field, b.data(), b.size()); }

void Writer::packed_int64(int field, const std::vector<int64_t>& v) {
  Writer inner;
  for (int64_t x : v) inner.raw_varint(uint64_t(x));
  bytes(field, inner.data());
}

void Writer::packed_float(int field, const std::vector<float>& v) {
  std::string b(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int k = 0; k < 4; ++k) b[4 * i + size_t(k)] = char(uint8_t(u >> (8 * k)));
  }
  bytes(field, b);
}

float Field::as_float() const {
  uint32_t u = uint32_t(value);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Reader::Reader(const uint8_t* data, size_t size, std::string what) : data_(data), size_(size), what_(std::move(what)) {}

uint64_t Reader::read_varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    KILN_CHECK(pos_ < size_, "protobuf: truncated varint in ", what_, " at byte ", pos_);
    const uint8_t b = data_[pos_++];
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  KILN_THROW("protobuf: varint longer than 10 bytes in ", what_, " at byte ", pos_);
}

bool Reader::next(Field& f) {
  if (pos_ >= size_) return false;
  const uint64_t key = read_varint();
  f.number = int(key >> 3);
  f.type = WireType(key & 7);
  f.data = nullptr;
  f.size = 0;
  f.value = 0;
  switch (f.type) {
    case WireType::varint: f.value = read_varint(); break;
    case WireType::fixed64:
    case WireType::fixed32: {
      const size_t n = f.type == WireType::fixed64 ? 8 : 4;
      KILN_CHECK(pos_ + n <= size_, "protobuf: truncated fixed field ", f.number, " in ", what_);
      for (size_t i = 0; i < n; ++i) f.value |= uint64_t(data_[pos_ + i]) << (8 * i);
      pos_ += n;
      break;
    }
    case WireType::bytes: {
      const uint64_t n = read_varint();
      KILN_CHECK(n <= size_ - pos_, "protobuf: field ", f.number, " of ", what_, " claims ", n, " bytes, ",
                 size_ - pos_, " left");
      f.data = data_ + pos_;
      f.size = size_t(n);
      pos_ += size_t(n);
      break;
    }
    default: KILN_THROW("protobuf: unsupported wire type ", int(key & 7), " (field ", f.number, ") in ", what_);
  }
  return true;
}

void append_int64s(const Field& f, std::vector<int64_t>& out, const std::string& what) {
  if (f.type == WireType::varint) {
    out.push_back(int64_t(f.value));
    return;
  }
  KILN_CHECK(f.type == WireType::bytes, "protobuf: repeated int64 field ", f.number, " of ", what, " has wire type ",
             int(f.type));
  // A packed run is a plain concatenation of varints: read them as field-less values.
  size_t pos = 0;
  while (pos < f.size) {
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
      KILN_CHECK(pos < f.size && shift < 64, "protobuf: bad packed varint in ", what);
      const uint8_t b = f.data[pos++];
      v |= uint64_t(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    out.push_back(int64_t(v));
  }
}

void append_floats(const Field& f, std::vector<float>& out, const std::string& what) {
  if (f.type == WireType::fixed32) {
    out.push_back(f.as_float());
    return;
  }
  KILN_CHECK(f.type == WireType::bytes && f.size % 4 == 0, "protobuf: repeated float field ", f.number, " of ", what,
             " is neither fixed32 nor a packed run of 4-byte values");
  for (size_t i = 0; i < f.size; i += 4) {
    uint32_t u = 0;
    for (size_t k = 0; k < 4; ++k) u |= uint32_t(f.data[i + k]) << (8 * k);
    float v;
    std::memcpy(&v, &u, 4);
    out.push_back(v);
  }
}

}  // namespace kiln::pb
