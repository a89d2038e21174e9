// The throwing half of engine/checked_size.h, out of line so the checks stay small.
#include "engine/checked_size.h"

#include <string>

#include "engine/error.h"

namespace kiln::detail {

namespace {
std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}
}  // namespace

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
