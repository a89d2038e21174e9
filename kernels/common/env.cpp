// Checked reads of KILN_* environment variables; see env.h.
#include "kernels/common/env.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kernels/common/error.h"

namespace kiln {

std::string env_choice(const char* name, std::initializer_list<const char*> valid) {
  const char* v = std::getenv(name);
  if (!v || !*v) return "";
  std::string list;
  for (const char* c : valid) {
    if (std::strcmp(v, c) == 0) return v;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  KILN_THROW(name, "='", v, "' is not one of: ", list, " (or unset)");
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  KILN_CHECK(std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0, name, "='", v, "' is not one of: 0, 1 (or unset)");
  return v[0] == '1';
}

int64_t env_int(const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  KILN_CHECK(end == v + std::strlen(v) && errno == 0 && x >= lo && x <= hi, name, "='", v,
             "' is not a whole number in [", lo, ", ", hi, "] (or unset)");
  return x;
}

}  // namespace kiln
