// The throwing half of engine/checked_size.h, out of line so the checks stay small.
#include "engine/checked_size.h"

#include <cstdio>
#include <string>

#include "engine/error.h"

namespace kiln::detail {

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

void throw_size_overflow(std::string_view what, const char* op, uint64_t a, uint64_t b) {
  KILN_THROW(what, ": size ", a, " ", op, " ", b, " overflows (the limit is 2^63 - 1)");
}

void throw_negative_dim(std::string_view what, const std::vector<int64_t>& dims, size_t i) {
  KILN_THROW(what, ": negative size ", dims[i], " at dim ", i, " in shape ", dims_str(dims));
}

void throw_numel_overflow(std::string_view what, const std::vector<int64_t>& dims) {
  KILN_THROW(what, ": shape ", dims_str(dims), " has more than 2^63 - 1 elements");
}

}  // namespace kiln::detail

namespace kiln {

namespace {
thread_local const TensorBytesLimit* g_limit = nullptr;

std::string gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", double(bytes) / double(uint64_t(1) << 30));
  return b;
}
}  // namespace

TensorBytesLimit::TensorBytesLimit(uint64_t bytes, const char* what) : bytes_(bytes), what_(what), prev_(g_limit) {
  g_limit = this;
}
TensorBytesLimit::~TensorBytesLimit() { g_limit = prev_; }
const TensorBytesLimit* TensorBytesLimit::current() { return g_limit; }

void check_tensor_bytes(const std::vector<int64_t>& dims, size_t element_size, std::string_view what) {
  const TensorBytesLimit* l = g_limit;
  if (!l) return;
  // Counted in long double: a shape past 2^63 bytes is over any limit, not an overflow error.
  long double bytes = element_size;
  for (int64_t d : dims) bytes *= (long double)(d < 0 ? 0 : d);
  if (bytes <= (long double)l->bytes()) return;
  char b[48];
  std::snprintf(b, sizeof b, "%.4Lg bytes (%.4Lg GiB)", bytes, bytes / (long double)(uint64_t(1) << 30));
  KILN_THROW(what, ": shape ", detail::dims_str(dims), " of ", element_size, "-byte elements needs ", b,
             ", over ", l->what(), " of ", gib(l->bytes()));
}

}  // namespace kiln
