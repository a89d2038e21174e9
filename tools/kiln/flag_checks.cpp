// Range checks for numeric flags; see flag_checks.h.
//   ctest --test-dir build -R cli.bad_args
#include "tools/kiln/flag_checks.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "engine/error.h"

namespace kiln::cli {
namespace {

// "" when `text` is a whole decimal number in [lo, hi], else what is wrong with it.
std::string whole_error(const std::string& text, int64_t lo, int64_t hi, int64_t* value) {
  char* end = nullptr;
  errno = 0;
  const long long v = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || v < lo || v > hi)
    return "'" + text + "' is not a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (value) *value = v;
  return "";
}

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

CLI::Validator whole(int64_t lo, int64_t hi) {
  return CLI::Validator([lo, hi](std::string& s) { return whole_error(s, lo, hi, nullptr); },
                        "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator real(double lo, double hi, bool lo_open, bool hi_open) {
  const std::string range =
      (lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + (hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
        const bool ok = !s.empty() && end == s.c_str() + s.size() && errno == 0 && std::isfinite(v) &&
                        (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
        return ok ? "" : "'" + s + "' is not a finite number in " + range;
      },
      range);
}

CLI::Validator whole_list(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        std::stringstream ss(s);
        std::string item;
        while (std::getline(ss, item, ','))
          if (!item.empty())
            if (std::string e = whole_error(item, lo, hi, nullptr); !e.empty()) return e;
        return "";
      },
      "list of [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

void check_output_path(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  KILN_CHECK(!path.empty(), flag, ": an empty path");
  std::error_code ec;
  KILN_CHECK(!fs::is_directory(path, ec), flag, " ", path, ": is a folder, not a file name");
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  KILN_CHECK(fs::is_directory(dir, ec), flag, " ", path, ": the folder ", dir, " does not exist");
  KILN_CHECK(::access(dir.c_str(), W_OK) == 0, flag, " ", path, ": the folder ", dir, " is not writable");
}

int64_t parse_whole(const std::string& text, const std::string& flag, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const std::string e = whole_error(text, lo, hi, &v);
  KILN_CHECK(e.empty(), flag, ": ", e);
  return v;
}

}  // namespace kiln::cli
