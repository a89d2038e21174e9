// Overflow-checked sizes: element counts and byte sizes computed from untrusted numbers (file
// headers, command-line specs, shapes) go through these, so a product that wraps 2^64 or leaves
// int64 becomes a kiln::Error naming what was being sized instead of a small allocation that is
// then overrun. Every io/ reader, the synthetic-data spec and Tensor construction use them.
//   ctest --test-dir build -R engine.test_tensor
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln {

namespace detail {
[[noreturn]] void throw_size_overflow(std::string_view what, const char* op, uint64_t a, uint64_t b);
[[noreturn]] void throw_negative_dim(std::string_view what, const std::vector<int64_t>& dims, size_t i);
[[noreturn]] void throw_numel_overflow(std::string_view what, const std::vector<int64_t>& dims);
}  // namespace detail

// The largest count or byte size kiln accepts: sizes are int64_t, so 2^63 - 1.
constexpr uint64_t kMaxSize = uint64_t(INT64_MAX);

// a * b and a + b, throwing "<what>: a * b overflows ..." when the result exceeds kMaxSize.
// `what` names the quantity and where it came from ("data.npy: shape at offset 10").
inline uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxSize) detail::throw_size_overflow(what, "*", a, b);
  return r;
}
inline uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r) || r > kMaxSize) detail::throw_size_overflow(what, "+", a, b);
  return r;
}

// The element count of `dims`: every dim >= 0, the product within kMaxSize; the error names
// `what` and the shape.
inline int64_t checked_numel(const std::vector<int64_t>& dims, std::string_view what) {
  uint64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) detail::throw_negative_dim(what, dims, i);
    if (__builtin_mul_overflow(n, uint64_t(dims[i]), &n) || n > kMaxSize) detail::throw_numel_overflow(what, dims);
  }
  return int64_t(n);
}

// checked_numel(dims) * element_size bytes.
inline uint64_t checked_nbytes(const std::vector<int64_t>& dims, size_t element_size, std::string_view what) {
  return checked_mul(uint64_t(checked_numel(dims, what)), element_size, what);
}

// A bound on the bytes of any one tensor, for work whose sizes come from untrusted input (an
// imported ONNX graph's nodes, io/onnx): while a TensorBytesLimit lives on a thread, empty()
// there refuses a larger tensor before it allocates, and code that sizes work of its own (index
// tables, say) calls check_tensor_bytes first. Scopes nest; the innermost holds. `what` names the
// limit and how to change it, for the error: "the limit on one tensor of an imported ONNX graph
// (KILN_ONNX_MAX_TENSOR_BYTES)".
class TensorBytesLimit {
 public:
  TensorBytesLimit(uint64_t bytes, const char* what);
  ~TensorBytesLimit();
  TensorBytesLimit(const TensorBytesLimit&) = delete;
  TensorBytesLimit& operator=(const TensorBytesLimit&) = delete;

  uint64_t bytes() const { return bytes_; }
  const char* what() const { return what_; }
  // The innermost limit on this thread, or null.
  static const TensorBytesLimit* current();

 private:
  uint64_t bytes_;
  const char* what_;
  const TensorBytesLimit* prev_;
};

// Throws "<what>: shape [..] of E-byte elements needs N bytes (X GiB), over <limit>
// of Y GiB" when such a tensor exceeds the innermost limit on this thread; nothing without one.
void check_tensor_bytes(const std::vector<int64_t>& dims, size_t element_size, std::string_view what);

}  // namespace kiln
