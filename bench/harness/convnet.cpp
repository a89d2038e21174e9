// The convnet timing loop of `kiln bench`; see convnet.h.
#include "bench/harness/convnet.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "bench/harness/flops.h"
#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/cuda_allocator.h"
#include "engine/cuda_runtime.h"
#include "engine/dispatch.h"
#include "engine/ops/loss.h"
#include "engine/profiler.h"
#include "engine/random.h"
#include "engine/version.h"
#include "io/onnx/onnx.h"
#include "kernels/common/parallel.h"
#include "nets/zoo.h"


namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Class indices in [0, C) shaped like the logits without their class dimension, from a fixed
// seed so every run (and every framework) sees the same labels.
Tensor random_labels(const Tensor& logits) {
  KILN_CHECK(logits.dim() >= 2, "bench: the loss needs logits [N, C, ...], the net gave ", logits.str());
  Shape shape = logits.sizes();
  const int64_t classes = shape[1];
  shape.erase(shape.begin() + 1);
  std::mt19937_64 rng(4321);
  std::uniform_int_distribution<int64_t> pick(0, classes - 1);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& e : v) e = double(pick(rng));
  return from_vector(v, shape, DType::int64).to(logits.device());
}

// Fraction of positions (rows of [N, C], pixels of [N, C, H, W]) whose label has the top-1 / a
// top-5 logit; ties count against.
void accuracy(const Tensor& logits, const Tensor& labels, double& top1, double& top5) {
  const int64_t n = logits.size(0), c = logits.size(1), inner = logits.numel() / (n * c);
  std::vector<double> y = logits.to_vector(), t = labels.to_vector();
  int64_t hit1 = 0, hit5 = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < inner; ++p) {
      const double* base = y.data() + i * c * inner + p;
      const double mine = base[int64_t(t[size_t(i * inner + p)]) * inner];
      int64_t above = 0;
      for (int64_t j = 0; j < c; ++j) above += base[j * inner] > mine;
      hit1 += above == 0;
      hit5 += above < 5;
    }
  top1 = double(hit1) / double(n * inner);
  top5 = double(hit5) / double(n * inner);
}

// Layer paths of the leaves, as the profiler names them (the root by its repr when unnamed).
void collect_leaves(const Module& m, std::set<std::string>& leaves) {
  if (m.children().empty()) leaves.insert(m.path().empty() ? m.repr() : m.path());
  for (const auto& [name, child] : m.children()) collect_leaves(*child, leaves);
}

std::vector<LayerRow> layer_rows(const Module& net, const std::vector<profiler::Row>& rows, const MacCount& macs,
                                 const RunResult& r) {
  std::set<std::string> leaves;
  collect_leaves(net, leaves);
  const double iters = double(r.ms.size());
  const double passes = r.spec.train ? 3.0 : 1.0;
  const double flop_scale = 2.0 * double(r.spec.batch) * passes * 1e-9;
  const double act_bytes = r.spec.dtype == "float32" ? 4.0 : 2.0;
  auto gbytes_of = [&](const std::string& name) {
    auto a = macs.act_elems_by_layer.find(name);
    auto p = macs.param_elems_by_layer.find(name);
    const double act = a == macs.act_elems_by_layer.end() ? 0.0 : a->second;
    const double param = p == macs.param_elems_by_layer.end() ? 0.0 : p->second;
    return (act * double(r.spec.batch) * act_bytes + param * 4.0) * passes * 1e-9;
  };
  std::vector<LayerRow> out;
  LayerRow containers{"(containers)", "exclusive time of modules with children (cat, residual adds)"};
  bool any_container = false;
  double accounted = 0;
  for (const profiler::Row& row : rows) {
    const double f = row.forward_ms / iters, b = row.backward_ms / iters;
    auto m = macs.by_layer.find(row.name);
    const double gflop = m == macs.by_layer.end() ? 0.0 : m->second * flop_scale;
    accounted += f + b;
    if (leaves.count(row.name)) {
      LayerRow l{row.name, row.kind, f, b, 0, gflop};
      l.gbytes = gbytes_of(row.name);
      out.push_back(l);
    } else {
      any_container = true;
      containers.forward_ms += f;
      containers.backward_ms += b;
      containers.gflop += gflop;
      containers.gbytes += gbytes_of(row.name);
    }
  }
  if (any_container) out.push_back(containers);
  out.push_back(LayerRow{"(outside layers)", "loss, zero_grad, autograd bookkeeping",
                         std::max(0.0, r.ms_mean - accounted), 0, 0, 0});
  for (LayerRow& l : out) l.share = r.ms_mean > 0 ? (l.forward_ms + l.backward_ms) / r.ms_mean : 0;
  return out;
}

// Turns the profiler off however the timed loop ends.
struct ProfilerSession {
  bool on;
  explicit ProfilerSession(bool enable) : on(enable) {
    if (on) {
      profiler::reset();
      profiler::enable(true);
    }
  }
  ~ProfilerSession() {
    if (on) profiler::enable(false);
  }
};

}  // namespace


// --- ONNX models (`kiln bench --model file.onnx`)
bool is_onnx_model(const std::string& model) {
  return model.size() > 5 && model.compare(model.size() - 5, 5, ".onnx") == 0;
}

namespace {
// Imports the graph as a kiln Module (io/onnx/onnx.h) and times it like a zoo net; the sample shape
// is the graph input's without its batch dim.
RunResult run_onnx(const RunSpec& spec, RunObserver* observer) {
  const onnx::Model m = onnx::load(spec.model);
  ModulePtr net = onnx::import_model(m);
  Shape sample = onnx::input_shape(m, spec.batch);
  sample.erase(sample.begin());
  CpuAllocator::instance().empty_cache();
  const Device device(spec.device);
  if (device.is_cuda()) net->to(device);
  RunResult r = run(*net, sample, spec, observer);
  net.reset();
  CpuAllocator::instance().empty_cache();
  return r;
}
}  // namespace

const nets::NetInfo* find_net(const std::string& model) {
  return is_onnx_model(model) ? nullptr : &nets::find(model);
}

const nets::NetInfo& net_of(const RunSpec& spec) { return spec.net ? *spec.net : nets::find(spec.model); }

namespace {

// What run(Module&, ...) itself needs of a spec (validate() checks it and the rest).
void check_run(const RunSpec& spec) {
  KILN_CHECK(spec.layout == "auto" || spec.layout == "nhwc" || spec.layout == "nchw", "--layout: 'auto', 'nhwc' or ",
             "'nchw', not '", spec.layout, "'");
  KILN_CHECK(spec.batch > 0 && spec.iters > 0 && spec.warmup >= 0, "bench: batch and iters must be positive (batch ",
             spec.batch, ", iters ", spec.iters, ", warmup ", spec.warmup, ")");
}
}  // namespace

void validate(const RunSpec& spec) {
  if (!is_onnx_model(spec.model)) net_of(spec);  // lists the known names when unknown
  const Device device(spec.device);
  if (device.is_cuda()) cuda::check_device(device);  // "built without CUDA", "no CUDA device", "no device N"
  KILN_CHECK(spec.dtype == "float32" || spec.dtype == "bfloat16" || spec.dtype == "float16", "--dtype ", spec.dtype,
             ": kiln bench times float32, or bfloat16/float16 (mixed precision: float32 weights, half activations)");
  check_backend_list(spec.backend, "--backend");
  check_run(spec);
}

RunResult run(const RunSpec& spec, RunObserver* observer) {
  validate(spec);
  if (is_onnx_model(spec.model)) return run_onnx(spec, observer);
  const nets::NetInfo& info = net_of(spec);
  // Each run starts from an empty allocator cache, so one net's blocks neither serve nor
  // inflate the next one's (a sweep over many nets would otherwise hold the sum of their peaks).
  CpuAllocator::instance().empty_cache();
  const Device device(spec.device);
  ModulePtr net = info.build(nets::NetOptions{});  // built on the CPU (the same initial weights), then moved
  if (device.is_cuda()) net->to(device);
  RunResult r = run(*net, info.input, spec, observer);
  net.reset();
  CpuAllocator::instance().empty_cache();
  if (device.is_cuda()) cuda::CudaCachingAllocator::instance().empty_cache();
  return r;
}

namespace {

// The timed batch [batch, sample...]: random values in the spec's dtype, layout and device.
Tensor make_input(const Shape& sample, const RunSpec& spec, Generator& gen) {
  Shape shape = sample;
  shape.insert(shape.begin(), spec.batch);
  const Device device(spec.device);
  const bool half = spec.dtype != "float32";
  Tensor x = randn(shape, {}, &gen);
  // auto: channels-last on CPUs (the layout oneDNN and the native kernels take without
  // reorders) and for half types on GPUs (tensor-core convolutions in cuDNN are NHWC); float32
  // on GPUs stays NCHW, cuDNN's fastest float32 layout.
  const bool nhwc = spec.layout == "nhwc" || (spec.layout == "auto" && (!device.is_cuda() || half));
  if (x.dim() == 4 && nhwc) x = x.contiguous(MemoryFormat::channels_last);
  // Half types: the input and so every activation in bfloat16/float16; the weights stay float32
  // masters that Conv2d casts per step (Linear computes in float32), as PyTorch's autocast does.
  if (spec.dtype == "bfloat16") x = x.to(DType::bfloat16);
  if (spec.dtype == "float16") x = x.to(DType::float16);
  return device.is_cuda() ? x.to(device) : x;
}

// r's statistics from its per-step times r.ms (and the ranks' communication waits).
void summarize(RunResult& r, const std::vector<double>& waits, const MacCount& macs) {
  const RunSpec& spec = r.spec;
  std::vector<double> w(waits.end() - std::min(waits.size(), size_t(spec.iters)), waits.end());
  std::sort(w.begin(), w.end());
  r.comm_wait_ms = w.empty() ? 0 : w[w.size() / 2];
  if (spec.comm) r.ranks = spec.comm->size();
  std::vector<double> s = r.ms;
  std::sort(s.begin(), s.end());
  r.ms_min = s.front();
  r.ms_max = s.back();
  r.ms_median = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  r.ms_mean = std::accumulate(s.begin(), s.end(), 0.0) / double(s.size());
  r.images_per_s = double(spec.batch) * 1000.0 / r.ms_median;
  r.gflop_per_iter = 2.0 * macs.total * double(spec.batch) * (spec.train ? 3.0 : 1.0) * 1e-9;
  r.gflops = r.gflop_per_iter / (r.ms_median * 1e-3);
}

}  // namespace

RunResult run(Module& net, const Shape& sample, const RunSpec& spec, RunObserver* observer) {
  check_run(spec);
  if (spec.threads > 0) set_num_threads(spec.threads);
  BackendGuard backend(spec.backend == "auto" ? "" : spec.backend);
  net.assign_paths();
  const MacCount macs = count_macs(net, sample);

  Generator gen(1234);
  const Device device(spec.device);
  const bool cuda = device.is_cuda();
  std::optional<cuda::DeviceGuard> on_device;  // kernels launch on the current device
  if (cuda) on_device.emplace(device.index);
  const Tensor x = make_input(sample, spec, gen);
  // Device work is asynchronous: each timed step ends when the device is done.
  auto sync = [&] {
    if (cuda) cuda::synchronize();
  };
  net.train(spec.train);
  Tensor grad_out, labels;

  // Data parallel: the gradients of every step all-reduced (sync) or pushed to parameter servers
  // (their default optimizer updates the weights); forward-only runs time each rank alone.
  const optim::OptimizerConfig server_optimizer;
  std::unique_ptr<dist::Strategy> strategy =
      dist::make_strategy(spec.train ? spec.dist : dist::DistConfig{}, spec.comm.get(), net, server_optimizer);
  if (strategy->is_server()) {
    strategy->serve();
    RunResult served;
    served.spec = spec;
    served.server = true;
    return served;
  }
  std::vector<double> waits;
  if (observer) observer->begin(spec, net, sample);

  auto step = [&](StepInfo& info) {
    if (spec.train) {
      strategy->begin_step(true);
      Tensor y = net(x);
      if (spec.loss) {
        if (!labels.defined()) labels = random_labels(y);
        Tensor loss = ops::cross_entropy(y, labels);
        loss.backward();
        info.loss = loss.item();
      } else {
        if (!grad_out.defined())
          grad_out = randn(y.sizes(), {}, &gen).to(y.dtype()).contiguous(y.suggest_memory_format()).to(y.device());
        y.backward(grad_out);
      }
      strategy->finish_gradients();
      waits.push_back(strategy->report().last_wait_s * 1e3);
      strategy->step(nullptr, server_optimizer.lr);  // no update here; the servers' one (async, ps)
      net.zero_grad();
    } else {
      NoGradGuard ng;
      Tensor y = net(x);
      if (spec.loss) {
        if (!labels.defined()) labels = random_labels(y);
        info.loss = ops::cross_entropy(y, labels).item();
        accuracy(y, labels, info.top1, info.top5);
      }
    }
  };

  for (int i = 0; i < spec.warmup; ++i) {
    StepInfo ignored;
    step(ignored);
  }
  sync();
  if (observer) observer->warmup_done(spec);

  RunResult r;
  r.spec = spec;
  r.threads = num_threads();
  r.parameters = net.num_parameters();
  std::vector<profiler::Row> rows;
  {
    ProfilerSession profiling(spec.layers);
    CpuAllocator::instance().reset_peak();
    if (cuda) cuda::CudaCachingAllocator::instance().reset_peak(device.index);
    const auto loop0 = Clock::now();
    for (int i = 0; i < spec.iters; ++i) {
      StepInfo info;
      info.step = i;
      const auto t0 = Clock::now();
      step(info);
      sync();
      info.ms = ms_since(t0);
      r.ms.push_back(info.ms);
      if (spec.loss) r.losses.push_back(info.loss);
      if (observer) observer->step(spec, info, r.ms);
    }
    r.wall_s = ms_since(loop0) * 1e-3;
    r.peak_bytes = cuda ? cuda::CudaCachingAllocator::instance().stats(device.index).peak
                        : CpuAllocator::instance().stats().peak;
    if (spec.layers) {
      profiler::enable(false);
      rows = profiler::rows();
      profiler::reset();
    }
  }

  strategy->finish();
  summarize(r, waits, macs);
  if (spec.layers) r.layers = layer_rows(net, rows, macs, r);
  if (observer) observer->end(r);
  return r;
}

int64_t default_batch(const std::string& model) {
  // convnet-benchmarks (nets.md 1.1) for its four nets; tf_cnn_benchmarks' per-model defaults
  // (nets.md 2.1) for the other ImageNet nets and the CIFAR ResNets; the Keras examples' own
  // batch sizes for their nets; the RAMP kit's 32 for the UNet.
  static const std::map<std::string, int64_t> batches = {
      {"alexnet", 128},   {"overfeat", 128},  {"vgg11", 64},       {"googlenet", 128}, {"vgg16", 64},
      {"vgg19", 64},      {"inception3", 32}, {"resnet18", 64},    {"resnet50", 64},   {"resnet101", 32},
      {"resnet56", 128},  {"cifar10-cnn", 32}, {"mnist-cnn", 128}, {"unet", 32},
  };
  auto it = batches.find(model);
  return it == batches.end() ? 64 : it->second;
}

const std::vector<std::string>& convnet_benchmarks_models() {
  static const std::vector<std::string> models = {"alexnet", "overfeat", "vgg11", "googlenet"};
  return models;
}

std::string table_header() {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %-6s %-8s %6s %-8s %3s %9s %9s %9s %10s %9s %8s %7s", "model", "device",
                "backend", "batch", "mode", "thr", "ms min", "ms median", "ms max", "images/s", "peak MiB", "GFLOP/s",
                "of peak");
  return buf;
}

namespace {
// "54.3%", or "-" where the figure is unknown.
std::string percent(double fraction, bool known) {
  char buf[32] = "-";
  if (known) std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * fraction);
  return buf;
}
}  // namespace

std::string table_row(const RunResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %-6s %-8s %6lld %-8s %3d %9.2f %9.2f %9.2f %10.1f %9.1f %8.1f %7s",
                r.spec.model.c_str(), r.spec.device.c_str(), r.spec.backend.c_str(),
                static_cast<long long>(r.spec.batch), r.spec.train ? "train" : "forward", r.threads, r.ms_min,
                r.ms_median, r.ms_max, r.images_per_s, double(r.peak_bytes) / (1 << 20), r.gflops,
                percent(r.of_peak, r.peak_gflops > 0 && r.gflops > 0).c_str());
  return buf;
}

std::string layer_table(const RunResult& r) {
  // The roofline columns: achieved/peak where the layer does counted FLOPs; FLOPs per byte; and
  // where the bytes at the measured bandwidth are the floor (memory-bound), that floor and the
  // fraction of it achieved.
  std::string out;
  char buf[512];
  const bool roof = r.peak_gflops > 0;
  std::snprintf(buf, sizeof buf, "  %-36s %-34s %9s %9s %9s %6s %8s %7s %7s %9s %7s\n", "layer", "kind", "fwd ms",
                "bwd ms", "total ms", "share", "GFLOP/s", "of peak", "flop/B", "mem ms", "of mem");
  out += buf;
  double f = 0, b = 0;
  for (const LayerRow& l : r.layers) {
    std::string kind = l.kind.size() > 34 ? l.kind.substr(0, 31) + "..." : l.kind;
    const double total = l.forward_ms + l.backward_ms;
    char rate[32] = "", intensity[32] = "", bound[32] = "";
    std::string of_peak, of_bound;
    if (l.gflop > 0 && total > 0) {
      std::snprintf(rate, sizeof rate, "%8.1f", l.gflop / (total * 1e-3));
      if (roof) of_peak = percent(l.of_peak, true);
    }
    if (l.gbytes > 0) std::snprintf(intensity, sizeof intensity, "%7.1f", l.gflop / l.gbytes);
    if (roof && l.memory_bound) {
      std::snprintf(bound, sizeof bound, "%9.3f", l.bound_ms);
      of_bound = percent(l.of_bound, total > 0);
    }
    std::snprintf(buf, sizeof buf, "  %-36s %-34s %9.3f %9.3f %9.3f %5.1f%% %8s %7s %7s %9s %7s\n", l.name.c_str(),
                  kind.c_str(), l.forward_ms, l.backward_ms, total, 100.0 * l.share, rate, of_peak.c_str(), intensity,
                  bound, of_bound.c_str());
    out += buf;
    f += l.forward_ms;
    b += l.backward_ms;
  }
  const double total_rate = r.ms_mean > 0 ? r.gflop_per_iter / (r.ms_mean * 1e-3) : 0.0;
  std::snprintf(buf, sizeof buf, "  %-36s %-34s %9.3f %9.3f %9.3f %5.1f%% %8.1f %7s\n", "(total per iteration)", "", f,
                b, f + b, r.ms_mean > 0 ? 100.0 * (f + b) / r.ms_mean : 0.0, total_rate,
                roof ? percent(total_rate / r.peak_gflops, total_rate > 0).c_str() : "");
  out += buf;
  return out;
}

}  // namespace kiln::bench
