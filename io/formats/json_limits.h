// Limits on JSON read from files (checkpoint sidecars, the data catalogue, result files, scaling
// profiles). nlohmann::json parses iteratively but dumps and compares recursively, so a value
// nested a million levels deep parses fine and then overflows the stack when it is written back
// out: the nesting is bounded before parsing. kiln's own files nest at most 5 levels.
//   ctest --test-dir build -R io.test_hostile_files
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace kiln::io {

constexpr int kMaxJsonDepth = 64;

// Throws kiln::Error "<origin>: JSON nested deeper than <max_depth> levels (at byte N)" when an
// array or object opens at a depth over max_depth. Brackets inside strings do not count.
void check_json_depth(const std::string& text, const std::string& origin, int max_depth = kMaxJsonDepth);

// The file's text, read from a regular file only (a FIFO, device or directory is refused naming
// the path: it would block or never end) and at most max_bytes long (an error naming `what` and
// the path beyond it). For the small JSON and CSV files kiln reads whole.
std::string read_text_file(const std::string& path, const char* what, uint64_t max_bytes = uint64_t(64) << 20);

// A value as JSON text for an error message, cut to 80 characters: a megabyte string from a
// hostile file stays out of the message.
std::string clip_json(const nlohmann::json& v);
std::string clip_json(const nlohmann::ordered_json& v);

// Whether s is exactly n hexadecimal digits (a checksum as text).
bool is_hex_digits(const std::string& s, size_t n);

}  // namespace kiln::io
