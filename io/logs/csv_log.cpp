// CSV training log; see io/logs/csv_log.h.
//   ctest --test-dir build -R io.test_logs
#include "io/logs/csv_log.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

#include "engine/error.h"

namespace kiln {
namespace {

// Shortest text that reads back as the same double.
std::string shortest(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// RFC 4180 quoting, only when a name needs it.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

CsvLog::CsvLog(const std::string& path, bool append) : path_(path) {
  if (append) {
    std::ifstream in(path);
    if (in) std::getline(in, existing_header_);
    if (!existing_header_.empty() && existing_header_.back() == '\r') existing_header_.pop_back();
  }
  file_ = std::fopen(path.c_str(), append ? "ab" : "wb");
  KILN_CHECK(file_ != nullptr, "CsvLog: cannot open '", path, "': ", std::strerror(errno));
}

CsvLog::~CsvLog() {
  if (file_) std::fclose(file_);
}

void CsvLog::write(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string header = "step";
  for (auto& [name, v] : values) header += "," + csv_field(name);
  if (header_.empty()) {
    if (existing_header_.empty()) {
      KILN_CHECK(std::fputs((header + "\n").c_str(), file_) >= 0, "CsvLog: write to '", path_, "' failed: ",
                 std::strerror(errno));
    } else {
      KILN_CHECK(existing_header_ == header, "CsvLog: cannot append to '", path_, "': its header is '",
                 existing_header_, "' but this run logs '", header, "'");
    }
    header_ = header;
  } else {
    KILN_CHECK(header == header_, "CsvLog '", path_, "': columns changed from '", header_, "' to '", header, "'");
  }
  std::string row = std::to_string(step);
  for (auto& [name, v] : values) row += "," + shortest(v);
  row += "\n";
  KILN_CHECK(std::fputs(row.c_str(), file_) >= 0 && std::fflush(file_) == 0, "CsvLog: write to '", path_,
             "' failed: ", std::strerror(errno));
}

}  // namespace kiln
