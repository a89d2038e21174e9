// The console progress bar of training:
//   "epoch 1/2  [=========>          ]  220/469  loss 0.4123  acc 0.8512  img/s 2510  ETA 1m05s"
// Interactive (a terminal): the line is rewritten in place with '\r' at most every 0.1 s, and
// finish() ends it with a newline. Otherwise (a batch job's log file) a plain line is written each
// time another `every_percent` of the steps is done, and at finish(), so logs stay short.
//   ctest --test-dir build -R io.test_logs
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

using NamedValues = std::vector<std::pair<std::string, double>>;

class ProgressBar {
 public:
  // total_steps <= 0: unknown (no bar, no ETA).
  ProgressBar(std::string label, int64_t total_steps, std::ostream& os, bool interactive, int every_percent = 10);
  // `step` steps done (1-based count, <= total). `values`: shown in order (loss, acc, img/s, ...).
  void update(int64_t step, const NamedValues& values);
  // The final line, with the total elapsed time in place of the ETA.
  void finish(const NamedValues& values);

  // The text of the line for `step` after `elapsed_s` seconds, without '\r' or newline.
  std::string line(int64_t step, const NamedValues& values, double elapsed_s, bool done = false) const;

 private:
  std::string label_;
  int64_t total_;
  std::ostream& os_;
  bool interactive_;
  int every_percent_;
  int64_t last_step_ = 0;
  int last_bucket_ = 0;  // non-interactive: percent buckets already printed
  size_t last_width_ = 0;
  std::chrono::steady_clock::time_point t0_, last_draw_;
  bool drawn_ = false;
};

// Whether stdout (fd 1) or stderr (fd 2) is a terminal, for `interactive`.
bool is_terminal(int fd);
// "45s", "2m10s", "1h05m".
std::string format_eta(double seconds);

}  // namespace kiln
