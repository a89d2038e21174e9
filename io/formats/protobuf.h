// The protobuf wire format, by hand: just what ONNX files need (varints, 64-bit and 32-bit fixed
// fields, length-delimited fields, packed and unpacked repeated scalars). Hand-written because no
// protobuf library is a kiln dependency and ONNX needs only these few encodings; messages are
// built and read field by field by io/onnx/onnx.cpp.
//   ctest --test-dir build -R onnx
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::pb {

enum class WireType : uint8_t { varint = 0, fixed64 = 1, bytes = 2, fixed32 = 5 };

// Appends fields to a byte string. Nested messages: encode them into their own Writer and add
// its bytes with bytes().
class Writer {
 public:
  void varint(int field, uint64_t v);
  void int64(int field, int64_t v) { varint(field, uint64_t(v)); }
  void fixed32(int field, uint32_t v);
  void float32(int field, float v);
  void bytes(int field, const std::string& b);
  void bytes(int field, const void* data, size_t n);
  void string(int field, const std::string& s) { bytes(field, s); }
  // Repeated int64 / float as one packed field.
  void packed_int64(int field, const std::vector<int64_t>& v);
  void packed_float(int field, const std::vector<float>& v);
  const std::string& data() const { return out_; }

 private:
  void tag(int field, WireType t);
  void raw_varint(uint64_t v);
  std::string out_;
};

// One field read from a message: its number and wire type, the varint or fixed value, or the
// bytes of a length-delimited field (a view into the message's buffer).
struct Field {
  int number = 0;
  WireType type = WireType::varint;
  uint64_t value = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string str() const { return std::string(reinterpret_cast<const char*>(data), size); }
  float as_float() const;  // fixed32 as IEEE float
};

// Walks the fields of one message; throws kiln::Error (naming `what` and the offset) on a
// truncated or malformed buffer.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, std::string what);
  explicit Reader(const Field& f, std::string what) : Reader(f.data, f.size, std::move(what)) {}
  bool next(Field& f);

 private:
  uint64_t read_varint();
  const uint8_t* data_;
  size_t size_, pos_ = 0;
  std::string what_;
};

// Repeated int64 that may come packed (a bytes field) or as one varint per field; appends to out.
void append_int64s(const Field& f, std::vector<int64_t>& out, const std::string& what);
// Repeated float, packed or one fixed32 per field.
void append_floats(const Field& f, std::vector<float>& out, const std::string& what);

}  // namespace kiln::pb
