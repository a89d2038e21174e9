// tf_cnn_benchmarks' log format; see tf_compat.h.
#include "bench/harness/tf_compat.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/version.h"

namespace kiln::bench {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What tf_cnn_benchmarks would call the data set of a net with this input, and its size (0:
// none, the epochs line then shows 0.00). Inputs of no such data set are named by their shape.
void dataset_of(const Shape& sample, std::string& name, double& examples) {
  examples = 0;
  if (sample == Shape{3, 32, 32}) {
    name = "cifar10";
    examples = 50000;
  } else if (sample == Shape{1, 28, 28}) {
    name = "mnist";
    examples = 60000;
  } else if (sample.size() == 3 && sample[0] == 3 && sample[1] >= 200 && sample[2] >= 200) {
    name = "imagenet";
    examples = 1281167;
  } else {
    name.clear();
    for (int64_t d : sample) name += (name.empty() ? "" : "x") + std::to_string(d);
  }
}

}  // namespace

std::string tf_step_line(int step1, int64_t batch, const std::vector<double>& ms, double loss, double top1,
                         double top5) {
  // benchmark_cnn.py get_perf_timing: speeds = batch / times; mean = batch / mean(times);
  // uncertainty = np.std(speeds) / sqrt(n) (population std); jitter = 1.4826 MAD.
  const size_t n = ms.size();
  std::vector<double> speeds(n);
  double time_sum = 0, speed_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    speeds[i] = double(batch) / (ms[i] * 1e-3);
    time_sum += ms[i] * 1e-3;
    speed_sum += speeds[i];
  }
  const double mean = n ? double(batch) / (time_sum / double(n)) : 0;
  double var = 0;
  for (double s : speeds) var += (s - speed_sum / double(n)) * (s - speed_sum / double(n));
  const double uncertainty = n ? std::sqrt(var / double(n)) / std::sqrt(double(n)) : 0;
  double jitter = 0;
  if (n) {
    const double med = median(speeds);
    std::vector<double> dev(n);
    for (size_t i = 0; i < n; ++i) dev[i] = std::fabs(speeds[i] - med);
    jitter = 1.4826 * median(dev);
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "%d\timages/sec: %.1f +/- %.1f (jitter = %.1f)\t%.3f", step1, mean, uncertainty, jitter,
                loss);
  std::string line = buf;
  if (top1 >= 0) {
    std::snprintf(buf, sizeof buf, "\t%.3f\t%.3f", top1, top5);
    line += buf;
  }
  return line;
}

std::string tf_total_lines(double images_per_s) {
  const std::string dashes(64, '-');
  char buf[64];
  std::snprintf(buf, sizeof buf, "total images/sec: %.2f", images_per_s);
  return dashes + "\n" + buf + "\n" + dashes + "\n";
}

void TfCompatPrinter::begin(const RunSpec& spec, const Module& net, const Shape& sample) {
  std::string dataset;
  double examples = 0;
  dataset_of(sample, dataset, examples);
  int major = 0, minor = 0;
  std::sscanf(kiln::version(), "%d.%d", &major, &minor);
  const long long batch = static_cast<long long>(spec.batch);
  char epochs[32];
  std::snprintf(epochs, sizeof epochs, "%.2f", examples > 0 ? double(spec.iters) * double(spec.batch) / examples : 0.0);
  out_ << "TensorFlow:  " << major << "." << minor << "\n"
       << "Model:       " << spec.model << "\n"
       << "Dataset:     " << dataset << " (synthetic)\n"
       << "Mode:        " << (spec.train ? "training" : "forward only") << "\n"
       << "SingleSess:  False\n"
       << "Batch size:  " << batch << " global\n"
       << "             " << batch << " per device\n"
       << "Num batches: " << spec.iters << "\n"
       << "Num epochs:  " << epochs << "\n"
       << "Devices:     ['/" << spec.device << ":0']\n"
       << "Data format: NCHW\n"
       // kiln times gradients without applying them; tf_cnn_benchmarks would print its optimizer.
       << "Optimizer:   none\n"
       << "Variables:   parameter_server\n"
       << "==========\n"
       << (spec.train ? "Generating training model\n" : "Generating model\n")
       << "Initializing graph\n"
       << "Running warm up\n";
  out_.flush();
}

void TfCompatPrinter::warmup_done(const RunSpec& spec) {
  out_ << "Done warm up\n" << "Step\tImg/sec\ttotal_loss" << (spec.train ? "" : "\ttop_1_accuracy\ttop_5_accuracy")
       << "\n";
  out_.flush();
}

void TfCompatPrinter::step(const RunSpec& spec, const StepInfo& info, const std::vector<double>& ms_so_far) {
  if (info.step == 0 || (info.step + 1) % display_every_ == 0) {
    out_ << tf_step_line(info.step + 1, spec.batch, ms_so_far, info.loss, info.top1, info.top5) << "\n";
    out_.flush();
  }
}

void TfCompatPrinter::end(const RunResult& r) {
  const double total = r.wall_s > 0 ? double(r.spec.iters) * double(r.spec.batch) / r.wall_s : 0;
  out_ << tf_total_lines(total);
  out_.flush();
}

}  // namespace kiln::bench
