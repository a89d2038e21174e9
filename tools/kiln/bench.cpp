// `kiln bench`: times zoo nets the way convnet-benchmarks and tf_cnn_benchmarks did.
//   kiln bench                                   # alexnet, overfeat, vgg11, googlenet at their batch sizes
//   kiln bench --model vgg11 --batch 16,64 --mode forward,train --layers --out results.json
//   kiln bench --model resnet50 --batch 64 --mode train --tf-compat     # tf_cnn_benchmarks' log lines
//   kiln bench --model alexnet --batch 64 --vs-pytorch                  # kiln/peer ratio per row
// On the CPU it first measures the machine's FMA peak and triad bandwidth on its threads (~0.3 s,
// bench/harness/peak.h) and prints achieved/peak per row (with --layers the roofline per layer).
// The table goes to stdout, the progress line of a sweep to stderr.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <tuple>

#include "bench/harness/baseline.h"
#include "bench/harness/convnet.h"
#include "bench/harness/peak.h"
#include "bench/harness/progress.h"
#include "bench/harness/results.h"
#include "bench/harness/roofline.h"
#include "bench/harness/tf_compat.h"
#include "kernels/common/parallel.h"
#ifdef KILN_HAVE_CUDNN
#include "kernels/cuda/cudnn/handles.h"
#endif
#include "nets/zoo.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/dist_flags.h"
#include "tools/kiln/flag_checks.h"
#include "tools/kiln/runtime_flags.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR ""
#endif

namespace kiln::cli {
namespace {

const std::vector<std::string> kBenchLayouts = {"auto", "nhwc", "nchw"};

struct BenchOptions {
  std::string models, batches, modes = "forward,train";
  RuntimeFlags rt;  // --device, --backend, --threads, --dtype, --layout
  std::string data;
  int iters = 10, warmup = 2;
  bool layers = false, tf_compat = false, vs_pytorch = false, no_progress = false, no_peak = false;
  bool cudnn_benchmark = true;
  std::vector<std::string> outs;
  CLI::Option* iters_opt = nullptr;
  CLI::Option* warmup_opt = nullptr;
  DistFlags dist;
};

int64_t parse_batch(const std::string& b) { return parse_whole(b, "--batch", 1, kMaxBatch); }

std::vector<bench::RunSpec> make_specs(const BenchOptions& o) {
  std::vector<std::string> models = split_list(o.models);
  if (models.empty()) models = bench::convnet_benchmarks_models();
  std::vector<std::string> modes = split_list(o.modes);
  KILN_CHECK(!modes.empty(), "--mode: give forward, train or both");
  for (const std::string& mode : modes)
    KILN_CHECK(mode == "forward" || mode == "train", "--mode takes forward and/or train, got '", mode, "'");
  std::vector<bench::RunSpec> specs;
  for (const std::string& m : models) {
    // Looked up once: an unknown name fails here, before any run, listing the known ones.
    const nets::NetInfo* resolved = bench::find_net(m);
    std::vector<int64_t> batches;
    for (const std::string& b : split_list(o.batches)) batches.push_back(parse_batch(b));
    if (batches.empty()) batches.push_back(bench::default_batch(m));
    for (int64_t b : batches)
      for (const std::string& mode : modes) {
        bench::RunSpec s;
        s.model = m;
        s.net = resolved;
        s.batch = b;
        s.train = mode == "train";
        s.iters = o.iters;
        s.warmup = o.warmup;
        s.threads = o.rt.threads;
        s.backend = o.rt.backend;
        s.device = runtime_device_name(o.rt);
        s.dtype = o.rt.dtype;
        s.layout = o.rt.layout;
        s.layers = o.layers;
        s.loss = o.tf_compat;
        bench::validate(s);
        specs.push_back(s);
      }
  }
  return specs;
}

// Data parallel: every rank's images/s to all; rank 0 prints them and the job's sum.
void aggregate(bench::RunResult& r, dist::Communicator& comm) {
  const int n = comm.size();
  Tensor mine = from_vector(std::vector<double>{r.server ? 0.0 : r.images_per_s, r.comm_wait_ms}, {2}, DType::float64);
  Tensor all = zeros({2 * int64_t(n)}, DType::float64);
  comm.allgather(mine, all, "bench results");
  r.ranks = n;
  r.rank_images_per_s.clear();
  r.aggregate_images_per_s = 0;
  for (int i = 0; i < n; ++i) {
    r.rank_images_per_s.push_back(all.data<double>()[2 * i]);
    r.aggregate_images_per_s += all.data<double>()[2 * i];
  }
  if (comm.rank() != 0 || !r.spec.train) return;
  std::printf("  %d ranks, strategy %s:", n, dist::strategy_name(r.spec.dist.strategy));
  for (int i = 0; i < n; ++i) {
    if (r.rank_images_per_s[size_t(i)] <= 0) std::printf(" [rank %d: server]", i);
    else std::printf(" [rank %d: %.1f img/s, wait %.2f ms]", i, r.rank_images_per_s[size_t(i)], all.data<double>()[2 * i + 1]);
  }
  std::printf("\n  aggregate %.1f images/s\n", r.aggregate_images_per_s);
}

// kiln/peer per row, for each peer that ran; "-" where a peer has no such row.
void print_ratios(const bench::Results& kiln, const std::vector<std::pair<bench::Peer, bench::Results>>& peers) {
  using Key = std::tuple<std::string, int64_t, bool>;
  std::printf("\n%-12s %6s %-8s %12s", "model", "batch", "mode", "kiln img/s");
  std::vector<int> width;
  for (const auto& [peer, res] : peers) {
    const std::string rate = peer.backend + " img/s", ratio = "kiln/" + peer.backend;
    width.push_back(int(std::max(rate.size(), ratio.size())));
    std::printf(" %*s %*s", width.back(), rate.c_str(), int(ratio.size()), ratio.c_str());
  }
  std::printf("\n");
  std::vector<std::map<Key, double>> base(peers.size());
  for (size_t i = 0; i < peers.size(); ++i)
    for (const auto& r : peers[i].second.runs) base[i][Key{r.spec.model, r.spec.batch, r.spec.train}] = r.images_per_s;
  for (const auto& r : kiln.runs) {
    std::printf("%-12s %6lld %-8s %12.1f", r.spec.model.c_str(), static_cast<long long>(r.spec.batch),
                r.spec.train ? "train" : "forward", r.images_per_s);
    for (size_t i = 0; i < peers.size(); ++i) {
      const int ratio_w = int(("kiln/" + peers[i].first.backend).size());
      auto it = base[i].find(Key{r.spec.model, r.spec.batch, r.spec.train});
      if (it == base[i].end() || it->second <= 0)
        std::printf(" %*s %*s", width[i], "-", ratio_w, "-");
      else
        std::printf(" %*.1f %*.3f", width[i], it->second, ratio_w, r.images_per_s / it->second);
    }
    std::printf("\n");
  }
}

int run_specs(const BenchOptions& o, std::vector<bench::RunSpec>& specs, DistSession& session);

int run_bench(const BenchOptions& opts) {
  KILN_CHECK(opts.data.empty(), "--data ", opts.data,
             ": kiln bench times synthetic data; kiln train reads real data sets");
  for (const std::string& path : opts.outs) {
    check_output_path(path, "--out");
    KILN_CHECK(path.size() > 5 && (path.compare(path.size() - 5, 5, ".json") == 0 ||
                                   path.compare(path.size() - 4, 4, ".csv") == 0),
               "--out ", path, ": the format comes from the extension, use .json or .csv");
  }
  apply_runtime_flags(opts.rt, kBenchLayouts);
  BenchOptions o = opts;
  if (o.tf_compat) {  // tf_cnn_benchmarks' defaults: 100 timed steps after 10 warm-up steps
    if (o.iters_opt->count() == 0) o.iters = 100;
    if (o.warmup_opt->count() == 0) o.warmup = 10;
  }
  std::vector<bench::RunSpec> specs = make_specs(o);
  DistSession session(o.dist, runtime_device(o.rt));
  return session.guard([&] { return run_specs(o, specs, session); });
}

int run_specs(const BenchOptions& o, std::vector<bench::RunSpec>& specs, DistSession& session) {
  const bool chief = session.rank() == 0;
  if (session.active()) {
    KILN_CHECK(!o.vs_pytorch, "--vs-pytorch runs one process; leave it out under mpirun/srun");
    for (auto& s : specs) {
      s.comm = session.comm();
      s.dist = session.config();
    }
  }

  std::string pytorch_script, ort_script;
  bench::PeerPlan plan;
  if (o.vs_pytorch) {  // fail before the sweep, not after it
    pytorch_script = bench::find_baseline_script(bench::executable_dir(), KILN_SOURCE_DIR, "pytorch_bench.py");
    ort_script = bench::find_baseline_script(bench::executable_dir(), KILN_SOURCE_DIR, "onnxruntime_bench.py");
    plan = bench::plan_peers(bench::baseline_python(KILN_SOURCE_DIR), bench::baseline_venv(KILN_SOURCE_DIR),
                             bench::kDebianPython);
  }
  // The roofline of this machine for the threads the runs use: one process on the CPU only (ranks
  // sharing a node would measure each other).
  bench::MachinePeak peak;
  const Device device = runtime_device(o.rt);
  if (!o.no_peak && !session.active() && !device.is_cuda()) {
    peak = bench::measure_machine_peak(num_threads(), bench::quick_peak_config());
    if (!o.tf_compat) {
      std::printf("peak: %s FMA %.1f GFLOP/s", peak.isa.c_str(), peak.gflops);
      if (peak.bf16_isa != peak.isa) std::printf(", %s %.1f GFLOP/s", peak.bf16_isa.c_str(), peak.bf16_gflops);
      std::printf(", triad %.1f GB/s on %d thread%s (quick measurement; build/bench/bench_peak for the full one)\n",
                  peak.bandwidth_gbs, peak.threads, peak.threads == 1 ? "" : "s");
    }
  }
#ifdef KILN_HAVE_CUDNN
  // cuDNN algorithms timed once per shape, as convnet-benchmarks and tf_cnn_benchmarks ran (and
  // the PyTorch baseline's torch.backends.cudnn.benchmark).
  cudnn::set_benchmark(o.cudnn_benchmark);
#endif

  bench::Results results;
  results.machine = bench::machine_info();
  std::unique_ptr<bench::TfCompatPrinter> tf;
  if (o.tf_compat) tf = std::make_unique<bench::TfCompatPrinter>(std::cout);
  bench::Progress progress(specs, o.no_progress || specs.size() < 2 || !chief ? nullptr : stderr);
  if (!tf && chief) std::printf("%s\n", bench::table_header().c_str());
  std::fflush(stdout);
  for (size_t i = 0; i < specs.size(); ++i) {
    progress.start(i);
    bench::RunResult r = bench::run(specs[i], chief ? tf.get() : nullptr);
    progress.finish();
    if (peak.threads > 0) bench::apply_roofline(r, peak);
    if (chief && !r.server) {
      if (!tf) std::printf("%s\n", bench::table_row(r).c_str());
      if (o.layers) std::printf("%s", bench::layer_table(r).c_str());
    }
    if (session.active()) aggregate(r, *session.comm());
    std::fflush(stdout);
    results.runs.push_back(std::move(r));
  }
  if (!chief) return 0;

  bool peer_failed = false;
  if (o.vs_pytorch) {
    std::vector<std::pair<bench::Peer, bench::Results>> ran;
    std::vector<std::string> notes = plan.notes;
    for (const bench::Peer& peer : plan.peers) {
      if (peer.backend == "pytorch-debian-cl" && device.is_cuda()) {
        notes.push_back("pytorch-debian-cl: left out on " + o.rt.device + " (Debian's PyTorch is built without CUDA)");
        continue;
      }
      std::fflush(stdout);
      std::fprintf(stderr, "kiln: running %s (%s %s, %s)\n", peer.backend.c_str(),
                   peer.kind == bench::PeerKind::pytorch ? "PyTorch" : "onnxruntime", peer.version.c_str(),
                   peer.python.c_str());
      try {
        bench::Results res =
            peer.kind == bench::PeerKind::pytorch
                ? bench::run_pytorch_peer(peer, pytorch_script, specs, num_threads())
                : bench::run_onnxruntime_peer(peer, ort_script, specs, num_threads(), &notes);
        if (peer.kind == bench::PeerKind::onnxruntime && res.runs.empty())
          notes.push_back("onnxruntime: no rows (it runs the forward float32 CPU rows only)");
        else
          ran.emplace_back(peer, std::move(res));
      } catch (const Error& e) {
        notes.push_back(peer.backend + ": failed: " + e.what());
        peer_failed = true;
      }
    }
    std::printf("\n");
    for (const auto& [peer, res] : ran)
      std::printf("%s: %s %s (%s)%s\n", peer.backend.c_str(),
                  peer.kind == bench::PeerKind::pytorch ? "PyTorch" : "onnxruntime", peer.version.c_str(),
                  peer.python.c_str(),
                  peer.kind == bench::PeerKind::onnxruntime ? ", forward float32 rows, kiln's ONNX export"
                  : peer.channels_last                      ? ", channels-last, tuned malloc"
                                                            : ", as installed");
    for (const std::string& n : notes) std::printf("%s\n", n.c_str());
    print_ratios(results, ran);
    // Peer rows held against the same roofline: the FLOPs of kiln's row of the same net (the
    // onnxruntime script counts none), their rate, and its fraction of the peak.
    std::map<std::tuple<std::string, int64_t, bool>, double> gflop;
    for (const auto& r : results.runs) gflop[{r.spec.model, r.spec.batch, r.spec.train}] = r.gflop_per_iter;
    for (auto& [peer, res] : ran)
      for (auto& r : res.runs) {
        auto it = gflop.find({r.spec.model, r.spec.batch, r.spec.train});
        if (r.gflop_per_iter <= 0 && it != gflop.end() && r.ms_median > 0) {
          r.gflop_per_iter = it->second;
          r.gflops = r.gflop_per_iter / (r.ms_median * 1e-3);
        }
        if (peak.threads > 0) bench::apply_roofline(r, peak);
        results.runs.push_back(r);
      }
  }
  results.machine.threads = num_threads();
  results.machine.peak = peak;
  for (const std::string& path : o.outs) {
    bench::write_results(results, path);
    std::fprintf(stderr, "kiln: wrote %s\n", path.c_str());
  }
  return peer_failed ? 1 : 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "time forward and forward+backward of zoo nets on synthetic data");
  sub->add_option("--model", o->models,
                  "comma-separated zoo names or .onnx files (default: the convnet-benchmarks four, "
                  "alexnet,overfeat,vgg11,googlenet)");
  sub->add_option("--batch", o->batches,
                  "comma-separated batch sizes (default: each model's convnet-benchmarks / tf_cnn_benchmarks batch)")
      ->check(whole_list(1, kMaxBatch));
  sub->add_option("--mode", o->modes, "forward, train, or both")->capture_default_str();
  add_runtime_flags(sub, &o->rt, kBenchLayouts);
  o->iters_opt = sub->add_option("--iters", o->iters, "timed iterations (--tf-compat: 100)")
                     ->capture_default_str()
                     ->check(whole(1, 1000000));
  o->warmup_opt = sub->add_option("--warmup", o->warmup, "untimed iterations first (--tf-compat: 10)")
                      ->capture_default_str()
                      ->check(whole(0, 1000000));
  sub->add_option("--data", o->data, "not supported yet: kiln bench times synthetic data (kiln train reads real data)");
  sub->add_option("--cudnn-benchmark", o->cudnn_benchmark,
                  "GPUs: time cuDNN's algorithms once per shape (true) or take its heuristics (false)")
      ->capture_default_str();
  sub->add_flag("--layers", o->layers, "per-layer forward/backward breakdown (profiler on while timing) with each layer's roofline");
  sub->add_option("--out", o->outs, "write results: .json (every field) or .csv (one row per run); repeatable");
  sub->add_flag("--tf-compat", o->tf_compat,
                "print tf_cnn_benchmarks' log lines (real cross-entropy loss against fixed random labels)");
  sub->add_flag("--vs-pytorch", o->vs_pytorch,
                "also run the peers and print kiln/peer per row: the venv's PyTorch 2.x (as installed, and "
                "channels-last with tuned malloc), Debian's PyTorch 1.13 (channels-last, tuned malloc) and, for "
                "forward float32 rows, onnxruntime on kiln's ONNX export; a peer not installed is a note");
  sub->add_flag("--no-peak", o->no_peak, "skip the ~0.3 s FMA peak and bandwidth measurement (no achieved/peak)");
  sub->add_flag("--no-progress", o->no_progress, "no progress line on stderr");
  add_dist_flags(sub, &o->dist, false);
  return Command{sub, [o] { return run_bench(*o); }};
}

}  // namespace kiln::cli
