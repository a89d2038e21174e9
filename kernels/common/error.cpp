#include "kernels/common/error.h"

namespace kiln {

static std::string basename_of(const char* file) {
  std::string f(file);
  auto p = f.find_last_of('/');
  return p == std::string::npos ? f : f.substr(p + 1);
}

Error::Error(const std::string& what, const char* file, int line)
    : std::runtime_error(what + " (" + basename_of(file) + ":" + std::to_string(line) + ")"),
      message_(what) {}

}  // namespace kiln
