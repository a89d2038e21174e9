// The `kiln` command-line tool.
//   kiln bench --model mnist-cnn --batch 16,64 --mode forward,train
//   kiln info
// Exit codes: 0 success, 1 a kiln::Error (message on stderr), 2 bad command line.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "bench/harness/convnet.h"
#include "engine/allocator.h"
#include "engine/dispatch.h"
#include "kernels/common/parallel.h"
#include "nets/zoo.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int cmd_bench(const std::string& models, const std::string& batches, const std::string& modes, int iters, int warmup,
              int threads, const std::string& backend, const std::string& device) {
  using namespace kiln;
  KILN_CHECK(Device(device).is_cpu(), "bench: device ", device, " is not available in this build");
  std::vector<bench::RunSpec> specs;
  for (const auto& m : split(models))
    for (const auto& b : split(batches))
      for (const auto& mode : split(modes)) {
        KILN_CHECK(mode == "forward" || mode == "train", "bench: --mode takes forward and/or train, got '", mode, "'");
        bench::RunSpec s;
        s.model = m;
        s.batch = std::stoll(b);
        s.train = mode == "train";
        s.iters = iters;
        s.warmup = warmup;
        s.threads = threads;
        s.backend = backend;
        nets::find(m);  // fail early on unknown names
        specs.push_back(s);
      }
  std::printf("%s\n", bench::table_header().c_str());
  for (const auto& s : specs) {
    bench::RunResult r = bench::run(s);
    std::printf("%s\n", bench::table_row(r).c_str());
    std::fflush(stdout);
  }
  return 0;
}

int cmd_info() {
  using namespace kiln;
  std::printf("kiln %s\n", "0.1.0");
  std::printf("threads: %d\n", num_threads());
  std::printf("backend preference: %s\n", backend_preference().c_str());
  std::printf("ops:\n");
  for (const OpTableBase* op : registry().ops()) {
    std::string c;
    for (auto& s : op->candidates()) c += (c.empty() ? "" : ", ") + s;
    std::printf("  %-24s %s\n", op->name().c_str(), c.c_str());
  }
  std::printf("models:");
  for (const auto& n : nets::zoo()) std::printf(" %s", n.name.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: a deep-learning engine for HPC centres"};
  app.require_subcommand(1);

  auto* bench = app.add_subcommand("bench", "time forward and forward+backward of zoo nets on synthetic data");
  std::string models = "mnist-cnn", batches = "64", modes = "forward,train", backend = "auto", device = "cpu";
  int iters = 10, warmup = 2, threads = 0;
  bench->add_option("--model", models, "comma-separated model names")->capture_default_str();
  bench->add_option("--batch", batches, "comma-separated batch sizes")->capture_default_str();
  bench->add_option("--mode", modes, "forward, train, or both")->capture_default_str();
  bench->add_option("--iters", iters, "timed iterations")->capture_default_str()->check(CLI::PositiveNumber);
  bench->add_option("--warmup", warmup, "untimed iterations first")->capture_default_str()->check(CLI::NonNegativeNumber);
  bench->add_option("--threads", threads, "threads inside ops (0: KILN_NUM_THREADS or all cores)")->capture_default_str();
  bench->add_option("--backend", backend, "auto, native, ref (comma list = preference)")->capture_default_str();
  bench->add_option("--device", device, "cpu")->capture_default_str();

  auto* info = app.add_subcommand("info", "version, threads, registered kernels, models");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (*bench) return cmd_bench(models, batches, modes, iters, warmup, threads, backend, device);
    if (*info) return cmd_info();
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
