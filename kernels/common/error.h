// kiln::Error and the KILN_CHECK family: every recoverable failure in the library is thrown as an
// Error carrying file:line and a message built from the arguments (streamable values).
// Lives at the lowest floor because kernels check their descriptors and library statuses too;
// engine/error.h re-exports it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, const char* file, int line);
  explicit Error(const std::string& what) : std::runtime_error(what) {}
  // The message without the " (file:line)" suffix.
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (void)(os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace kiln

#define KILN_THROW(...) throw ::kiln::Error(::kiln::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

#define KILN_CHECK(cond, ...)                                   \
  do {                                                          \
    if (!(cond)) [[unlikely]] {                                 \
      KILN_THROW(__VA_ARGS__);                                  \
    }                                                           \
  } while (0)
