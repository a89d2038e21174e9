// JSON nesting bound and bounded text reading; see io/formats/json_limits.h.
//   ctest --test-dir build -R io.test_hostile_files
#include "io/formats/json_limits.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "io/formats/file_bytes.h"

namespace kiln::io {

void check_json_depth(const std::string& text, const std::string& origin, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      KILN_CHECK(++depth <= max_depth, origin, ": JSON nested deeper than ", max_depth, " levels (at byte ", i, ")");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

std::string read_text_file(const std::string& path, const char* what, uint64_t max_bytes) {
  RegularFile f(path);
  const std::vector<uint8_t> bytes = f.read_all(max_bytes, what);
  return std::string(bytes.begin(), bytes.end());
}

namespace {

std::string clip(std::string s) { return s.size() > 80 ? s.substr(0, 77) + "..." : s; }

}  // namespace

std::string clip_json(const nlohmann::json& v) { return clip(v.dump()); }
std::string clip_json(const nlohmann::ordered_json& v) { return clip(v.dump()); }

bool is_hex_digits(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace kiln::io
