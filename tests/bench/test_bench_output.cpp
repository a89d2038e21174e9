// The outputs of `kiln bench` and its companions, on mnist-cnn at batch 2 with 1-10 iterations:
// JSON that parses back with every field, CSV with a header and one row per run,
// tf_cnn_benchmarks' exact log lines, per-layer rows that add up to the iteration time, conv and
// linear FLOP counts, `kiln compare` ratios, `kiln plot`'s gnuplot script (the drawing itself:
// test_bench_plot.cpp), and the up-front errors.
//   ctest --test-dir build -R bench.test_bench_output
#include "tests/support/testing.h"
#include "tests/bench/bench_testing.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include <sys/stat.h>
#include <unistd.h>
#include <sstream>

#include "bench/harness/convnet.h"
#include "bench/harness/flops.h"
#include "bench/harness/plot.h"
#include "bench/harness/progress.h"
#include "bench/harness/results.h"
#include "engine/version.h"
#include "bench/harness/tf_compat.h"
#include "nets/zoo.h"

using namespace kiln;
using namespace kiln::bench;
using kiln::test::synthetic;
namespace fs = std::filesystem;

namespace {

RunSpec small(bool train, int iters = 2) {
  RunSpec s;
  s.model = "mnist-cnn";
  s.batch = 2;
  s.train = train;
  s.iters = iters;
  s.warmup = 1;
  return s;
}

// A fresh directory under the system's temporary one, removed at scope end.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("kiln-test-bench-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}


}  // namespace

TEST_CASE("mnist-cnn MACs counted from the graph: conv and linear layers, per sample") {
  ModulePtr net = nets::build("mnist-cnn");
  net->assign_paths();
  MacCount m = count_macs(*net, {1, 28, 28});
  // conv1 26*26*32*9, conv2 24*24*64*(32*9), fc1 9216*128, fc2 128*10 (nets.md 7.2: 12.0 MMAC)
  CHECK(m.by_layer["conv1"] == doctest::Approx(26.0 * 26 * 32 * 9));
  CHECK(m.by_layer["conv2"] == doctest::Approx(24.0 * 24 * 64 * 288));
  CHECK(m.by_layer["fc1"] == doctest::Approx(9216.0 * 128));
  CHECK(m.by_layer["fc2"] == doctest::Approx(1280.0));
  CHECK(m.total == doctest::Approx(11992448.0));
  CHECK(net->is_training());  // restored
}

TEST_CASE("JSON result file parses back with every field") {
  RunSpec s = small(true);
  s.layers = true;
  s.loss = true;
  Results res;
  res.machine = machine_info();
  res.runs.push_back(run(s));
  res.runs.push_back(run(small(false)));
  const std::string text = to_json(res);

  // Every field is in the file, under the names the PyTorch baseline writes too.
  nlohmann::json j = nlohmann::json::parse(text);
  CHECK(j["format"] == "kiln-bench-results/1");
  for (const char* key : {"framework", "version", "hostname", "cpu", "cores", "threads", "date"})
    CHECK_MESSAGE(j["machine"].contains(key), key);
  CHECK(j["machine"]["framework"] == "kiln");
  CHECK(j["machine"]["version"] == kiln::version());
  CHECK(std::regex_match(j["machine"]["date"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  REQUIRE(j["runs"].size() == 2);
  for (const char* key : {"model", "device", "backend", "dtype", "batch", "mode", "iters", "warmup", "threads", "loss",
                          "ms", "ms_min", "ms_median", "ms_max", "ms_mean", "images_per_s", "wall_s", "peak_bytes",
                          "parameters", "gflop_per_iter", "gflops"})
    CHECK_MESSAGE(j["runs"][0].contains(key), key);
  CHECK(j["runs"][0]["mode"] == "train");
  CHECK(j["runs"][0]["loss"] == "cross_entropy");
  CHECK(j["runs"][0]["ms"].size() == 2);
  CHECK(j["runs"][0]["losses"].size() == 2);
  CHECK(j["runs"][0]["layers"].size() >= 11);
  CHECK(j["runs"][1]["mode"] == "forward");
  CHECK(!j["runs"][1].contains("layers"));

  // And reads back into the same values.
  Results back = results_from_json(text);
  CHECK(back.machine.hostname == res.machine.hostname);
  CHECK(back.machine.cpu == res.machine.cpu);
  CHECK(back.machine.cores == res.machine.cores);
  REQUIRE(back.runs.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const RunResult &a = res.runs[i], &b = back.runs[i];
    CHECK(b.spec.model == a.spec.model);
    CHECK(b.spec.batch == a.spec.batch);
    CHECK(b.spec.train == a.spec.train);
    CHECK(b.spec.device == a.spec.device);
    CHECK(b.spec.backend == a.spec.backend);
    CHECK(b.spec.dtype == a.spec.dtype);
    CHECK(b.spec.iters == a.spec.iters);
    CHECK(b.spec.warmup == a.spec.warmup);
    CHECK(b.spec.loss == a.spec.loss);
    CHECK(b.threads == a.threads);
    CHECK(b.ms == a.ms);
    CHECK(b.losses == a.losses);
    CHECK(b.ms_min == a.ms_min);
    CHECK(b.ms_median == a.ms_median);
    CHECK(b.ms_max == a.ms_max);
    CHECK(b.ms_mean == a.ms_mean);
    CHECK(b.images_per_s == a.images_per_s);
    CHECK(b.wall_s == a.wall_s);
    CHECK(b.peak_bytes == a.peak_bytes);
    CHECK(b.parameters == 1199882);
    CHECK(b.gflop_per_iter == a.gflop_per_iter);
    CHECK(b.gflops == a.gflops);
    REQUIRE(b.layers.size() == a.layers.size());
    for (size_t k = 0; k < a.layers.size(); ++k) {
      CHECK(b.layers[k].name == a.layers[k].name);
      CHECK(b.layers[k].kind == a.layers[k].kind);
      CHECK(b.layers[k].forward_ms == a.layers[k].forward_ms);
      CHECK(b.layers[k].backward_ms == a.layers[k].backward_ms);
      CHECK(b.layers[k].share == a.layers[k].share);
      CHECK(b.layers[k].gflop == a.layers[k].gflop);
    }
  }
  // Training FLOPs are 3x forward: 2 x 11,992,448 MACs x batch 2 x 3.
  CHECK(res.runs[0].gflop_per_iter == doctest::Approx(2 * 11992448.0 * 2 * 3 * 1e-9));
  CHECK(res.runs[1].gflop_per_iter == doctest::Approx(2 * 11992448.0 * 2 * 1e-9));
}

TEST_CASE("CSV has the header and one row per run, with quoted lists") {
  Results res;
  res.machine = machine_info();
  res.runs.push_back(synthetic("mnist-cnn", 2, false, "auto", 10));
  res.runs.push_back(synthetic("mnist-cnn", 2, true, "native,ref", 5));
  res.runs.push_back(synthetic("mnist-cnn", 4, true, "ref", 7.5));
  std::vector<std::string> lines = lines_of(to_csv(res));
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == csv_header());
  CHECK(lines[0].rfind("model,device,backend,dtype,batch,mode,", 0) == 0);
  const size_t columns = size_t(std::count(lines[0].begin(), lines[0].end(), ',')) + 1;
  CHECK(columns == 22);  // ... hostname, then the roofline: peak_gflops, of_peak, bandwidth_gbs
  CHECK(lines[1].rfind("mnist-cnn,cpu,auto,float32,2,forward,", 0) == 0);
  CHECK(lines[2].rfind("mnist-cnn,cpu,\"native,ref\",float32,2,train,", 0) == 0);
  CHECK(lines[3].find(",7.5,") != std::string::npos);

  TempDir dir;
  write_results(res, (dir.path / "r.csv").string());
  std::ifstream in(dir.path / "r.csv");
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == to_csv(res));
  CHECK_THROWS_KILN(write_results(res, (dir.path / "r.txt").string()), "use .json or .csv");
}

TEST_CASE("tf-compat prints tf_cnn_benchmarks' exact lines") {
  // The step line's statistics against numpy's (benchmark_cnn.py get_perf_timing).
  CHECK(tf_step_line(3, 8, {10, 20, 40}, 2.3456) == "3\timages/sec: 342.9 +/- 144.0 (jitter = 296.5)\t2.346");
  CHECK(tf_step_line(1, 8, {10}, 0.5, 0.25, 0.75) == "1\timages/sec: 800.0 +/- 0.0 (jitter = 0.0)\t0.500\t0.250\t0.750");
  CHECK(tf_total_lines(432.164) == std::string(64, '-') + "\ntotal images/sec: 432.16\n" + std::string(64, '-') + "\n");

  for (bool train : {true, false}) {
    CAPTURE(train);
    std::ostringstream out;
    TfCompatPrinter printer(out);
    RunSpec s = small(train, 10);
    s.loss = true;
    RunResult r = run(s, &printer);
    const std::vector<std::string> lines = lines_of(out.str());
    const std::vector<std::string> header = {
        "TensorFlow:  0.1",
        "Model:       mnist-cnn",
        "Dataset:     mnist (synthetic)",
        train ? "Mode:        training" : "Mode:        forward only",
        "SingleSess:  False",
        "Batch size:  2 global",
        "             2 per device",
        "Num batches: 10",
        "Num epochs:  0.00",
        "Devices:     ['/cpu:0']",
        "Data format: NCHW",
        "Optimizer:   none",
        "Variables:   parameter_server",
        "==========",
        train ? "Generating training model" : "Generating model",
        "Initializing graph",
        "Running warm up",
        "Done warm up",
        train ? "Step\tImg/sec\ttotal_loss" : "Step\tImg/sec\ttotal_loss\ttop_1_accuracy\ttop_5_accuracy",
    };
    REQUIRE(lines.size() == header.size() + 2 + 3);  // steps 1 and 10, then the total block
    for (size_t i = 0; i < header.size(); ++i) CHECK(lines[i] == header[i]);
    const std::regex step(train ? R"((\d+)	images/sec: \d+\.\d \+/- \d+\.\d \(jitter = \d+\.\d\)	(\d+\.\d{3}))"
                                : R"((\d+)	images/sec: \d+\.\d \+/- \d+\.\d \(jitter = \d+\.\d\)	(\d+\.\d{3})	)"
                                  R"(\d\.\d{3}	\d\.\d{3})");
    std::smatch m;
    REQUIRE(std::regex_match(lines[header.size()], m, step));
    CHECK(m[1] == "1");
    const double loss = std::stod(m[2]);
    CHECK(loss > 1.0);  // cross-entropy of 10 classes near log(10) = 2.30 on random labels
    CHECK(loss < 4.0);
    REQUIRE(std::regex_match(lines[header.size() + 1], m, step));
    CHECK(m[1] == "10");
    CHECK(lines[header.size() + 2] == std::string(64, '-'));
    CHECK(std::regex_match(lines[header.size() + 3], std::regex(R"(total images/sec: \d+\.\d\d)")));
    CHECK(lines[header.size() + 4] == std::string(64, '-'));
    CHECK(r.losses.size() == 10);
    const double total = std::stod(lines[header.size() + 3].substr(18));
    CHECK(total == doctest::Approx(10 * 2 / r.wall_s).epsilon(0.01));
  }
}

TEST_CASE("per-layer rows add up to the iteration time") {
  for (bool train : {false, true}) {
    CAPTURE(train);
    RunSpec s = small(train);
    s.layers = true;
    RunResult r = run(s);
    REQUIRE(r.layers.size() == 13);  // 11 leaves of mnist-cnn, (containers), (outside layers)
    CHECK(r.layers.front().name == "conv1");
    CHECK(r.layers.front().kind.rfind("Conv2d(1, 32", 0) == 0);
    CHECK(r.layers[10].name == "fc2");
    CHECK(r.layers[11].name == "(containers)");
    CHECK(r.layers[12].name == "(outside layers)");
    double all = 0, leaves = 0, gflop = 0, share = 0;
    for (size_t i = 0; i < r.layers.size(); ++i) {
      const LayerRow& l = r.layers[i];
      CHECK(l.forward_ms >= 0);
      CHECK(l.backward_ms >= 0);
      all += l.forward_ms + l.backward_ms;
      share += l.share;
      gflop += l.gflop;
      if (i < 11) leaves += l.forward_ms + l.backward_ms;
    }
    CHECK(all == doctest::Approx(r.ms_mean).epsilon(0.02));
    CHECK(share == doctest::Approx(1.0).epsilon(0.02));
    // Shares of time depend on the machine's load (a tiny net's glue can outweigh its layers on
    // a busy CI host), so only the accounting is asserted: the rows add up to the step.
    CHECK(leaves > 0);
    CHECK(gflop == doctest::Approx(r.gflop_per_iter));
    CHECK(r.layers[2].gflop > 0);  // conv2
    CHECK(r.layers[1].gflop == 0);  // relu1
    if (train) CHECK(r.layers[2].backward_ms > 0);
    const std::string table = layer_table(r);
    CHECK(table.find("conv2") != std::string::npos);
    CHECK(table.find("(total per iteration)") != std::string::npos);
  }
}

TEST_CASE("compare: ratio b/a on rows in both files; loose matching across backends") {
  TempDir dir;
  Results a, b;
  a.runs = {synthetic("mnist-cnn", 16, false, "native", 100), synthetic("mnist-cnn", 16, true, "native", 50),
            synthetic("mnist-cnn", 64, true, "native", 80)};
  b.runs = {synthetic("mnist-cnn", 16, true, "native", 40), synthetic("mnist-cnn", 16, false, "native", 150),
            synthetic("alexnet", 16, false, "native", 9)};
  write_results(a, (dir.path / "a.json").string());
  write_results(b, (dir.path / "b.json").string());
  Comparison c = compare(read_results((dir.path / "a.json").string()), read_results((dir.path / "b.json").string()));
  CHECK(!c.loose);
  REQUIRE(c.rows.size() == 2);  // batch 64 only in a, alexnet only in b
  CHECK(c.rows[0].mode == "forward");
  CHECK(c.rows[0].ratio == doctest::Approx(1.5));
  CHECK(c.rows[1].mode == "train");
  CHECK(c.rows[1].ratio == doctest::Approx(0.8));
  CHECK(c.geomean_ratio == doctest::Approx(std::sqrt(1.5 * 0.8)));
  CHECK(comparison_table(c, "a.json", "b.json").find("1.500") != std::string::npos);

  // Another backend (PyTorch's file): nothing pairs strictly, so rows pair on model/batch/mode.
  Results pt;
  pt.runs = {synthetic("mnist-cnn", 16, false, "pytorch", 50), synthetic("mnist-cnn", 64, true, "pytorch", 160)};
  c = compare(a, pt);
  CHECK(c.loose);
  REQUIRE(c.rows.size() == 2);
  CHECK(c.rows[0].ratio == doctest::Approx(0.5));
  CHECK(c.rows[1].ratio == doctest::Approx(2.0));
  CHECK(c.rows[1].backend_b == "pytorch");

  // Two variants in one file cannot pair on model/batch/mode alone.
  pt.runs.push_back(synthetic("mnist-cnn", 16, false, "pytorch-cl", 70));
  CHECK_THROWS_KILN(compare(a, pt), "more than one run of mnist-cnn batch 16 forward");
  CHECK_THROWS_KILN(read_results((dir.path / "missing.json").string()), "cannot open");
  CHECK_THROWS_KILN(results_from_json("{\"runs\": [{\"model\": \"x\"}]}", "f.json"), "f.json: run 0: no 'batch'");
}

// Issue 18: a result file's wrong types and values are named (file, run, key, value), never a bare
// nlohmann type_error; a FIFO is refused at once; nesting is bounded.
TEST_CASE("result files: wrong types, bad values, FIFOs and deep nesting are refused naming them") {
  auto run = [](const std::string& fields) { return "{\"runs\": [{\"model\": \"m\", \"mode\": \"forward\", " + fields + "}]}"; };
  CHECK_THROWS_KILN(results_from_json(run("\"batch\": \"16\", \"images_per_s\": 1"), "f.json"),
                    "f.json: run 0: 'batch' is \"16\", not a number");
  CHECK_THROWS_KILN(results_from_json(run("\"batch\": 0, \"images_per_s\": 1"), "f.json"),
                    "f.json: run 0: 'batch' is 0, not a positive integer");
  CHECK_THROWS_KILN(results_from_json(run("\"batch\": 16, \"images_per_s\": -1"), "f.json"),
                    "f.json: run 0: 'images_per_s' is -1, not a finite number >= 0");
  CHECK_THROWS_KILN(results_from_json(run("\"batch\": 16, \"images_per_s\": 1, \"backend\": 7"), "f.json"),
                    "f.json: run 0: 'backend' is 7, not a string");
  CHECK_THROWS_KILN(results_from_json(run("\"batch\": 16, \"images_per_s\": 1, \"ms\": [1, \"x\"]"), "f.json"),
                    "f.json: run 0: 'ms' is [1,\"x\"], not a list of numbers");
  CHECK_THROWS_KILN(results_from_json("{\"machine\": {\"cores\": \"many\"}, \"runs\": []}", "f.json"),
                    "f.json: machine: 'cores' is \"many\", not a number");
  CHECK_THROWS_KILN(results_from_json("{\"runs\": [3]}", "f.json"), "f.json: run 0: not an object");
  CHECK_THROWS_KILN(results_from_json("{\"runs\": " + std::string(70, '[') + std::string(70, ']') + "}", "f.json"),
                    "f.json: JSON nested deeper than 64 levels");
  test::TempDir dir("results_fifo");
  REQUIRE(::mkfifo((dir / "r.json").c_str(), 0600) == 0);
  CHECK_THROWS_KILN(read_results(dir / "r.json"), "r.json: a FIFO, not a regular file");
}

TEST_CASE("plot: a data file with a titled line per model, backend and mode") {
  Results res;
  res.runs = {synthetic("mnist-cnn", 16, false, "native", 1000), synthetic("mnist-cnn", 64, false, "native", 1500),
              synthetic("mnist-cnn", 16, true, "native", 300), synthetic("mnist-cnn", 64, true, "pytorch", 400)};
  const GnuplotFiles f = gnuplot_files({{"r.json", res}});
  REQUIRE(f.data.size() == 3);
  CHECK(f.data[0] == "batch\tmnist-cnn kiln-native forward\n16\t1000\n64\t1500\n");
  CHECK(f.data[1].rfind("batch\tmnist-cnn kiln-native train\n", 0) == 0);
  CHECK(f.data[2].rfind("batch\tmnist-cnn pytorch train\n", 0) == 0);
  CHECK(f.script.find("title columnheader(2)") != std::string::npos);
  CHECK(f.script.find("dt 2") != std::string::npos);  // train lines dashed
  CHECK(f.script.find("mnist-cnn") == std::string::npos);  // names are data, not script text
}

TEST_CASE("what this build cannot time fails up front with a clear message") {
  RunSpec s = small(false);
  s.model = "nope";
  CHECK_THROWS_KILN(validate(s), "unknown model 'nope' (known: mnist-cnn");
  s = small(false);
  s.device = "cuda:0";
#ifdef KILN_HAVE_CUDA
  CHECK_THROWS_KILN(validate(s), "device cuda:0: no CUDA device is available");
#else
  CHECK_THROWS_KILN(validate(s), "device cuda:0: kiln was built without CUDA");
#endif
  s = small(false);
  s.dtype = "int8";
  CHECK_THROWS_KILN(validate(s), "--dtype int8: kiln bench times float32, or bfloat16/float16");
  s.dtype = "bfloat16";
  validate(s);
  s.dtype = "float16";
  validate(s);
  s = small(false);
  s.backend = "native,nope";
  // The known list comes from the registry: onednn (cudnn) appears when the build has it.
  CHECK_THROWS_KILN(validate(s), "unknown backend 'nope' (known: auto, ");
  CHECK_THROWS_KILN(validate(s), "native");
  s = small(false);
  s.backend = "ref,native";
  validate(s);
  CHECK(default_batch("alexnet") == 128);
  CHECK(default_batch("vgg11") == 64);
  CHECK(default_batch("googlenet") == 128);
  CHECK(default_batch("overfeat") == 128);
  CHECK(default_batch("something-new") == 64);
  CHECK(convnet_benchmarks_models() == std::vector<std::string>{"alexnet", "overfeat", "vgg11", "googlenet"});
}

TEST_CASE("progress lines: run i/n, model, batch, mode, ETA") {
  std::vector<RunSpec> specs = {small(false), small(true)};
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    Progress p(specs, f, /*tty=*/0);
    CHECK(p.line(0) == "run 1/2  mnist-cnn  batch 2  forward  ETA --");
    p.start(0);
    p.start(1);
  }
  std::rewind(f);
  char buf[256];
  std::string text;
  while (std::fgets(buf, sizeof buf, f)) text += buf;
  std::fclose(f);
  CHECK(text.find("run 1/2  mnist-cnn  batch 2  forward  ETA --\n") == 0);
  CHECK(std::regex_search(text, std::regex(R"(run 2/2  mnist-cnn  batch 2  train  ETA \d+s\n)")));
  CHECK(text.find('\r') == std::string::npos);
  CHECK(format_duration(130) == "2m10s");
  CHECK(format_duration(3900) == "1h05m");
}
