// Internal to dist/: text through collectives. A string goes out as a NUL-padded uint8 tensor of
// a width all ranks agree on, and comes back from a gathered buffer by offset; fnv1a hashes it so
// ranks compare a number before they compare text.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/tensor.h"

namespace kiln::dist {

inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// `s` in a zeroed uint8 tensor of `n` bytes (cut at n).
inline Tensor bytes_tensor(const std::string& s, size_t n) {
  Tensor t = zeros({int64_t(n)}, DType::uint8);
  std::memcpy(t.data_ptr(), s.data(), std::min(n, s.size()));
  return t;
}

// The NUL-terminated text at bytes [offset, offset + n) of `t`.
inline std::string tensor_string(const Tensor& t, int64_t offset, int64_t n) {
  const char* p = static_cast<const char*>(t.data_ptr()) + offset;
  return std::string(p, strnlen(p, size_t(n)));
}

}  // namespace kiln::dist
