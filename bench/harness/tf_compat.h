// tf_cnn_benchmarks-compatible output (`kiln bench --tf-compat`), so the parsers HPC centres
// wrote for tensorflow/benchmarks logs keep working (strings as in nets.md 2.4 and
// benchmark_cnn.py): the header block (TensorFlow/Model/Dataset/Mode/... then "=========="),
// "Running warm up", "Done warm up", the table header "Step\tImg/sec\ttotal_loss", a line at step
// 1 and every `display_every` steps
//   10\timages/sec: 432.5 +/- 0.3 (jitter = 0.7)\t7.863
// (mean images/s over all steps so far = batch / mean(step time), +/- std(speeds)/sqrt(n),
// jitter = 1.4826 median|speed - median speed|, loss with 3 decimals), and the final block
//   ----------------------------------------------------------------
//   total images/sec: 432.16
//   ----------------------------------------------------------------
// where total = steps x batch / wall time of the timed loop. Forward-only runs add the
// top_1_accuracy / top_5_accuracy columns, as tf_cnn_benchmarks does with --forward_only.
// The "TensorFlow:" line carries kiln's major.minor version in TensorFlow's "%i.%i" format.
//   ctest --test-dir build -R bench.test_bench_output
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench/harness/convnet.h"

namespace kiln::bench {

// The step line for step `step1` (1-based) after the step times `ms` so far.
std::string tf_step_line(int step1, int64_t batch, const std::vector<double>& ms, double loss, double top1 = -1,
                         double top5 = -1);
// The closing block: 64 dashes, "total images/sec: N", 64 dashes; each line ends with '\n'.
std::string tf_total_lines(double images_per_s);

class TfCompatPrinter : public RunObserver {
 public:
  explicit TfCompatPrinter(std::ostream& out, int display_every = 10) : out_(out), display_every_(display_every) {}
  void begin(const RunSpec& spec, const Module& net, const Shape& sample) override;
  void warmup_done(const RunSpec& spec) override;
  void step(const RunSpec& spec, const StepInfo& info, const std::vector<double>& ms_so_far) override;
  void end(const RunResult& result) override;

 private:
  std::ostream& out_;
  int display_every_;
};

}  // namespace kiln::bench
