// The progress line of long `kiln bench` sweeps, on stderr so stdout stays a clean table (or a
// clean tf_cnn_benchmarks log): "run 3/12  vgg11  batch 64  train  ETA 2m10s". On a terminal the
// line is rewritten in place with '\r' and cleared at the end; otherwise (a batch job's log) each
// run gets a plain line. The ETA weighs runs by batch x iterations x (3 for train, 1 for
// forward), scaled by the time the finished runs took.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/harness/convnet.h"

namespace kiln::bench {

class Progress {
 public:
  // `out` null: silent. `tty` < 0: ask isatty() about `out`.
  Progress(const std::vector<RunSpec>& specs, std::FILE* out = stderr, int tty = -1);
  ~Progress();
  // Announces run `index` (0-based) as starting.
  void start(size_t index);
  // Clears the in-place line (terminal only).
  void finish();
  // The text start(index) shows, without '\r' or newline (for tests).
  std::string line(size_t index) const;

 private:
  static double work(const RunSpec& s);
  std::vector<RunSpec> specs_;
  std::FILE* out_;
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point t0_;
};

// "45s", "2m10s", "1h05m".
std::string format_duration(double seconds);

}  // namespace kiln::bench
