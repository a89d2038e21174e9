// Times a net as convnet-benchmarks did: synthetic input made once on the device, `warmup`
// untimed iterations, then `iters` timed ones of forward (inference, no graph) or
// forward+backward (no weight update). Backward is seeded with a fixed random output gradient,
// or, with `loss` (tf-compat mode), runs from a real cross-entropy of the logits against fixed
// random labels. Reports min/median/max ms per iteration, images/s from the median, the
// allocator's peak, the FLOPs of the conv and linear layers, and with `layers` a per-layer
// breakdown from the profiler (engine/profiler.h).
//   ctest --test-dir build -R bench.test_bench_output
//   build/tools/kiln bench --model mnist-cnn --batch 16,64 --layers
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/strategy.h"
#include "layers/module.h"

namespace kiln::nets {
struct NetInfo;  // nets/zoo.h
}

namespace kiln::bench {

struct RunSpec {
  std::string model;
  // The zoo entry of `model`, looked up once where the spec is made (find_net()); null for an
  // .onnx file, or for a spec whose maker did not resolve it (run() looks it up then).
  const nets::NetInfo* net = nullptr;
  int64_t batch = 16;
  bool train = false;  // false: forward only; true: forward + backward
  int warmup = 2;
  int iters = 10;
  std::string backend = "auto";  // "auto" or a comma list ("native", "ref", "native,ref")
  std::string device = "cpu";
  std::string dtype = "float32";
  // Memory format of 4-d activations: "nhwc" (channels-last: oneDNN and native convolutions run
  // it without reorders), "nchw", or "auto" (nhwc on CPUs).
  std::string layout = "auto";
  int threads = 0;      // 0: keep the current setting
  bool layers = false;  // per-layer breakdown (profiler on during the timed iterations)
  bool loss = false;    // cross-entropy against fixed random labels (tf-compat); per-step losses kept
  // Data parallel training steps (`kiln bench --strategy` under mpirun or srun): the job's ranks
  // and how they cooperate (dist::make_strategy; the parameter servers run the default
  // optimizer); each rank times its own steps (tools aggregate them). nullptr or strategy none:
  // this process alone.
  std::shared_ptr<dist::Communicator> comm;
  dist::DistConfig dist;
};

// One leaf layer (or a summary row) of the per-layer breakdown, per timed iteration.
struct LayerRow {
  std::string name;  // layer path ("features.3"), "(containers)" or "(outside layers)"
  std::string kind;  // module repr, empty for summary rows
  double forward_ms = 0;
  double backward_ms = 0;
  double share = 0;  // (forward_ms + backward_ms) / mean ms per iteration
  double gflop = 0;  // conv/linear FLOPs of this layer per iteration (0 for other layers)
  // Bytes its ops read and write per iteration, in GB (1e9): every input and output of each op
  // (flops.h), activations at the run's dtype (2 bytes for bfloat16/float16), parameters as
  // float32; train counts 3x forward, as the FLOPs do (backward-data and backward-weights each
  // move about what forward does). 0 for summary rows.
  double gbytes = 0;
  // The roofline (roofline.h, filled by apply_roofline; 0 until then): achieved GFLOP/s and its
  // fraction of the FMA peak, FLOPs per byte, and where the layer is memory-bound (its bytes at
  // the measured bandwidth take longer than its FLOPs at the peak) that floor in ms and the
  // fraction of it achieved (floor / time).
  double gflops = 0, of_peak = 0, intensity = 0;
  bool memory_bound = false;
  double bound_ms = 0, of_bound = 0;
};

struct RunResult {
  RunSpec spec;
  std::vector<double> ms;      // per timed iteration
  std::vector<double> losses;  // per timed iteration (spec.loss only)
  double ms_min = 0, ms_median = 0, ms_max = 0, ms_mean = 0;
  double images_per_s = 0;     // batch / median
  double wall_s = 0;           // wall time of the whole timed loop
  int64_t peak_bytes = 0;      // allocator peak during the timed loop
  int threads = 0;
  int64_t parameters = 0;
  double gflop_per_iter = 0;   // conv+linear FLOPs per iteration: 2 MACs x batch, x3 for train
  double gflops = 0;           // gflop_per_iter / median seconds
  // The machine's FMA peak for the run's threads and dtype and the triad bandwidth (peak.h),
  // and gflops / peak_gflops; 0 where not measured (GPU runs, results read from older files).
  double peak_gflops = 0, of_peak = 0, bandwidth_gbs = 0;
  std::vector<LayerRow> layers;  // spec.layers only: leaf layers in forward order, then summaries
  // Data parallel runs.
  bool server = false;           // a parameter-server rank: it served, timed nothing
  double comm_wait_ms = 0;       // sync: median wait for the gradient all-reduce after backward
  int ranks = 1;                 // ranks of the job (tools fill the aggregate fields)
  double aggregate_images_per_s = 0;       // sum over the training ranks
  std::vector<double> rank_images_per_s;   // per rank (0 for servers)
};

// Per-step report for observers (tf-compat printing).
struct StepInfo {
  int step = 0;  // 0-based index of the timed iteration
  double ms = 0;
  double loss = 0;                // spec.loss only
  double top1 = -1, top5 = -1;    // forward with spec.loss: accuracy against the random labels
};

// Follows a run as it goes. Every method may print; none is required.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void begin(const RunSpec& spec, const Module& net, const Shape& sample) {}
  virtual void warmup_done(const RunSpec& spec) {}
  virtual void step(const RunSpec& spec, const StepInfo& info, const std::vector<double>& ms_so_far) {}
  virtual void end(const RunResult& result) {}
};

// The zoo entry of `model` (nets::find: an unknown name fails, listing the known ones); null for
// an .onnx file. What RunSpec::net holds.
const nets::NetInfo* find_net(const std::string& model);
// spec.net, or the zoo entry of spec.model where the spec's maker did not look it up.
const nets::NetInfo& net_of(const RunSpec& spec);
// Fails (kiln::Error) on what this build cannot time: an unknown model, a device other than the
// CPU, a dtype other than float32, an unknown backend name, an unknown layout, non-positive batch
// or iterations.
void validate(const RunSpec& spec);

// True when `model` names an ONNX file (ends in .onnx): run() imports it (io/onnx/onnx.h) instead of
// building a zoo net; its input shape comes from the graph, the batch from spec.batch.
bool is_onnx_model(const std::string& model);
// Builds spec.model from the zoo (or imports an .onnx file) and times it.
RunResult run(const RunSpec& spec, RunObserver* observer = nullptr);
// Times an already built net on inputs of shape [batch, sample...].
RunResult run(Module& net, const Shape& sample, const RunSpec& spec, RunObserver* observer = nullptr);

// The batch size convnet-benchmarks (alexnet, overfeat, vgg11, googlenet), tf_cnn_benchmarks or
// the net's own example used for `model`; 64 for nets without one.
int64_t default_batch(const std::string& model);
// The convnet-benchmarks "ImageNet winners": the default model list of `kiln bench`.
const std::vector<std::string>& convnet_benchmarks_models();

std::string table_header();
std::string table_row(const RunResult& r);
// The per-layer breakdown as text, one line per row of r.layers.
std::string layer_table(const RunResult& r);

}  // namespace kiln::bench
