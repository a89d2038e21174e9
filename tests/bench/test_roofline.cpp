// The roofline of `kiln bench`: the peak measurement gives positive figures below a theoretical
// bound (no timing is asserted: only that the numbers are sane), the roofline arithmetic on
// hand-computed layers, the bytes the MAC-counting pass finds per layer, the new result fields
// through JSON, and the notes for peers that are not installed.
//   ctest --test-dir build -R bench.test_roofline
#include "tests/support/testing.h"

#include <algorithm>
#include <thread>

#include "bench/harness/baseline.h"
#include "bench/harness/flops.h"
#include "bench/harness/peak.h"
#include "bench/harness/results.h"
#include "bench/harness/roofline.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "nets/zoo.h"

using namespace kiln;
using namespace kiln::bench;

namespace {
// Tiny and short: sanity, not a measurement.
PeakConfig tiny_config() {
  PeakConfig c;
  c.fma_seconds = 0.005;
  c.fma_repeats = 1;
  c.array_bytes = 4 << 20;
  c.bw_repeats = 1;
  return c;
}
}  // namespace

TEST_CASE("every multiply-add loop the CPU has gives a positive figure below the theoretical bound") {
  const std::vector<std::string> isas = peak_isas();
  REQUIRE(!isas.empty());
  CHECK(isas.back() == "portable");
  const int all = std::max(1, int(std::thread::hardware_concurrency()));
  for (const std::string& isa : isas)
    for (int threads : {1, all}) {
      CAPTURE(isa);
      CAPTURE(threads);
      const double g = measure_fma_gflops(isa, threads, tiny_config());
      CHECK(g > 0);
      CHECK(g < theoretical_bound_gflops(isa, threads));
    }
  // The figure is FLOPs counted over seconds: each loop does the FLOPs a step is counted as,
  // read back from its own result (exact in float32), not taken on trust.
  for (const std::string& isa : isas) {
    CAPTURE(isa);
    CHECK(count_flops_per_step(isa) == flops_per_step(isa));
  }
  CHECK(std::find(isas.begin(), isas.end(), best_fma_isa()) != isas.end());
  CHECK(best_fma_isa() != "avx512_bf16");
  CHECK_THROWS_KILN(measure_fma_gflops("avx1024", 1, tiny_config()), "no 'avx1024' multiply-add loop");
  CHECK_THROWS_KILN(measure_fma_gflops("portable", 0, tiny_config()), "threads must be at least 1");
}

TEST_CASE("the triad bandwidth is positive and below any memory system's") {
  // measure_bandwidth_gbs checks every element of its result itself (a kiln::Error otherwise).
  const double gbs = measure_bandwidth_gbs(1, tiny_config());
  CHECK(gbs > 0);
  CHECK(gbs < 1e5);  // 100 TB/s
  PeakConfig small = tiny_config();
  small.array_bytes = 8;
  CHECK_THROWS_KILN(measure_bandwidth_gbs(2, small), "too small");
}

TEST_CASE("the machine peak takes the bfloat16 loop for bfloat16 runs only") {
  const MachinePeak p = measure_machine_peak(1, tiny_config());
  CHECK(p.threads == 1);
  CHECK(p.gflops > 0);
  CHECK(p.bf16_gflops > 0);
  CHECK(p.bandwidth_gbs > 0);
  CHECK(p.peak_for("float32") == p.gflops);
  CHECK(p.peak_for("bfloat16") == p.bf16_gflops);
  if (p.bf16_isa == p.isa) CHECK(p.bf16_gflops == p.gflops);
}

TEST_CASE("roofline arithmetic on hand-computed layers") {
  // 2 GFLOP moving 4 GB in 500 ms on a 100 GFLOP/s, 10 GB/s machine: 0.4 s at the bandwidth
  // against 0.02 s at the peak, memory-bound; floor 400 ms, 80% of it achieved.
  RooflinePoint m = roofline_point(2, 4, 500, 100, 10);
  CHECK(m.gflops == doctest::Approx(4));
  CHECK(m.of_peak == doctest::Approx(0.04));
  CHECK(m.intensity == doctest::Approx(0.5));
  CHECK(m.memory_bound);
  CHECK(m.bound_ms == doctest::Approx(400));
  CHECK(m.of_bound == doctest::Approx(0.8));
  // 10 GFLOP moving 0.1 GB in 200 ms: 0.1 s at the peak against 0.01 s at the bandwidth.
  RooflinePoint c = roofline_point(10, 0.1, 200, 100, 10);
  CHECK(c.gflops == doctest::Approx(50));
  CHECK(c.of_peak == doctest::Approx(0.5));
  CHECK(c.intensity == doctest::Approx(100));
  CHECK_FALSE(c.memory_bound);
  CHECK(c.bound_ms == 0);
  CHECK(c.of_bound == 0);
  // A layer with no counted FLOPs (ReLU, pooling) is memory-bound wherever it moves bytes.
  RooflinePoint relu = roofline_point(0, 0.02, 4, 100, 10);
  CHECK(relu.memory_bound);
  CHECK(relu.bound_ms == doctest::Approx(2));
  CHECK(relu.of_bound == doctest::Approx(0.5));
  // Unknown machine figures leave what needs them at 0.
  RooflinePoint none = roofline_point(2, 4, 500, 0, 0);
  CHECK(none.gflops == doctest::Approx(4));
  CHECK(none.of_peak == 0);
  CHECK_FALSE(none.memory_bound);
}

TEST_CASE("the MAC-counting pass counts each layer's activation and parameter elements") {
  // Linear(8, 4): reads x (8) and writes y (4) per sample; reads w (32) and b (4).
  // Linear(4, 2): 4 + 2 per sample; 8 + 2.
  Sequential net{std::make_shared<Linear>(8, 4), std::make_shared<Linear>(4, 2)};
  net.assign_paths();
  MacCount m = count_macs(net, {8});
  CHECK(m.by_layer["0"] == 32);
  CHECK(m.by_layer["1"] == 8);
  CHECK(m.act_elems_by_layer["0"] == 12);
  CHECK(m.param_elems_by_layer["0"] == 36);
  CHECK(m.act_elems_by_layer["1"] == 6);
  CHECK(m.param_elems_by_layer["1"] == 10);

  // Conv2d(2, 3, 3) on 2x5x5: input 50, output 3x3x3 = 27; weight 54, bias 3; 27 x 18 MACs.
  Sequential conv{std::make_shared<Conv2d>(2, 3, 3)};
  conv.assign_paths();
  MacCount c = count_macs(conv, {2, 5, 5});
  CHECK(c.by_layer["0"] == 486);
  CHECK(c.act_elems_by_layer["0"] == 77);
  CHECK(c.param_elems_by_layer["0"] == 57);

  // Timed with --layers: bytes per iteration from those counts (float32, batch 3; train x3), and
  // the roofline fields filled from the machine's figures.
  for (bool train : {false, true}) {
    RunSpec s;
    s.model = "two-linear";
    s.batch = 3;
    s.train = train;
    s.iters = 1;
    s.warmup = 0;
    s.layers = true;
    RunResult r = run(net, {8}, s);
    const auto it = std::find_if(r.layers.begin(), r.layers.end(), [](const LayerRow& l) { return l.name == "0"; });
    REQUIRE(it != r.layers.end());
    const double passes = train ? 3 : 1;
    CHECK(it->gbytes == doctest::Approx((12 * 3 * 4 + 36 * 4) * passes * 1e-9));
    CHECK(it->gflop == doctest::Approx(2 * 32 * 3 * passes * 1e-9));
    MachinePeak peak;
    peak.threads = 1;
    peak.gflops = peak.bf16_gflops = 100;
    peak.bandwidth_gbs = 10;
    apply_roofline(r, peak);
    CHECK(r.peak_gflops == 100);
    CHECK(r.of_peak == doctest::Approx(r.gflops / 100));
    CHECK(it->intensity == doctest::Approx(it->gflop / it->gbytes));
    // 64 FLOPs against 288 bytes a sample: memory-bound on this machine.
    CHECK(it->memory_bound);
    CHECK(it->bound_ms == doctest::Approx(it->gbytes / 10 * 1e3));
    CHECK(table_row(r).find('%') != std::string::npos);
    CHECK(layer_table(r).find("flop/B") != std::string::npos);

    // The new fields survive JSON.
    Results res;
    res.machine = machine_info();
    res.machine.peak = peak;
    res.runs.push_back(r);
    const Results back = results_from_json(to_json(res));
    CHECK(back.machine.peak.gflops == 100);
    CHECK(back.machine.peak.bandwidth_gbs == 10);
    REQUIRE(back.runs.size() == 1);
    CHECK(back.runs[0].peak_gflops == 100);
    CHECK(back.runs[0].bandwidth_gbs == 10);
    const auto bl = std::find_if(back.runs[0].layers.begin(), back.runs[0].layers.end(),
                                 [](const LayerRow& l) { return l.name == "0"; });
    REQUIRE(bl != back.runs[0].layers.end());
    CHECK(bl->gbytes == doctest::Approx(it->gbytes));
    CHECK(bl->memory_bound);
    CHECK(bl->bound_ms == doctest::Approx(it->bound_ms));
    CHECK(bl->of_bound == doctest::Approx(it->of_bound));
  }
}

TEST_CASE("peers that are not installed are notes naming the venv and the install step") {
  test::TempDir dir("peers");
  const std::string venv = (dir.path / "venv").string();
  const std::string missing = venv + "/bin/python";
  PeerPlan plan = plan_peers(missing, venv, (dir.path / "no-python3").string());
  CHECK(plan.peers.empty());
  REQUIRE(plan.notes.size() == 3);
  std::string all;
  for (const std::string& n : plan.notes) all += n + "\n";
  CHECK(all.find("pytorch, pytorch-cl: PyTorch not installed in " + missing + " (not found)") != std::string::npos);
  CHECK(all.find("pytorch-debian-cl: ") != std::string::npos);
  CHECK(all.find("onnxruntime: not installed in") != std::string::npos);
  CHECK(all.find("tools/install-deps.sh --baseline") != std::string::npos);
  CHECK(python_module_version(missing, "torch").empty());
  // The same interpreter for both PyTorch slots: no Debian column of its own.
  CHECK(plan_peers(missing, venv, missing).notes.size() == 2);
}

TEST_CASE("MACs of a ResNet match PyTorch's count of the same net") {
  // bench/baselines/pytorch_bench.py's count_macs (forward hooks on Conv2d and Linear) gives
  // 125,485,696 for its resnet56.
  ModulePtr net = nets::build("resnet56");
  net->assign_paths();
  const MacCount m = count_macs(*net, nets::find("resnet56").input);
  CHECK(m.total == 125485696);
  double act = 0;
  for (const auto& [layer, n] : m.act_elems_by_layer) act += n;
  CHECK(act > 0);
}
