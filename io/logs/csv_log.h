// A CSV log of training values, one row per call: "step,loss,acc,...". The header is written with
// the first row; appending to an existing file (a resumed run) requires the same header. Every row
// is flushed, so a killed job leaves a complete file up to its last step.
//   ctest --test-dir build -R io.test_logs
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

class CsvLog {
 public:
  // append false: truncates `path`. append true: keeps its rows; the header of the first write()
  // must then equal the file's first line, else kiln::Error naming the file and both headers.
  CsvLog(const std::string& path, bool append);
  ~CsvLog();
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;

  // Values in shortest round-trip form; names must stay the same, in the same order, every call.
  void write(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::string existing_header_;  // first line of the appended file ("" if none)
  std::string header_;           // this log's header, set by the first write
};

}  // namespace kiln
