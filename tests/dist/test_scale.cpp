// The scaling model of `kiln scale` (dist/scale.h) on a synthetic profile: one GPU has no
// communication, infinite bandwidth gives efficiency 1, overlap never loses, bigger buckets mean
// fewer messages, the ring formula exactly for one bucket, monotone in bandwidth; profile JSON
// round trip; errors naming a bad network or a malformed profile; the published tables parse;
// fit_effects recovers effects a table was made with. Against the published tables: the error
// in-sample (the effects were fitted to those rows) and held out (refitted on the rows on at most
// two nodes, predicting the larger runs).
//   ctest --test-dir build -R dist.test_scale
#include "tests/support/testing.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "dist/scale.h"

using namespace kiln;
using namespace kiln::dist;

namespace {

// Ten layers, 4 MB of gradients each, backward 2 ms per layer, forward 1 ms.
DeviceProfile synthetic(int layers = 10, int64_t bytes = 4 << 20) {
  DeviceProfile p;
  p.model = "synthetic";
  p.device = "test";
  p.batch = 32;
  p.other_ms = 0.5;
  p.optimizer_ms = 1.5;
  for (int i = 0; i < layers; ++i) p.layers.push_back(LayerProfile{"l" + std::to_string(i), 1.0, 2.0, bytes});
  return p;
}

Network net_of(double intra_gb, double inter_gb, double lat_us = 5) {
  return Network{Link{intra_gb, lat_us}, Link{inter_gb, lat_us}};
}

}  // namespace

TEST_CASE("scale: one GPU has no communication") {
  const DeviceProfile p = synthetic();
  const StepPrediction s = simulate_step(p, 1, 1, net_of(10, 1), ScaleOptions{});
  CHECK(s.comm_ms == 0);
  CHECK(s.exposed_comm_ms == 0);
  CHECK(s.step_ms == doctest::Approx(p.step_ms()));
  CHECK(s.images_per_s == doctest::Approx(32 * 1000.0 / p.step_ms()));
}

TEST_CASE("scale: infinite bandwidth and no latency give efficiency 1") {
  const DeviceProfile p = synthetic();
  const Network fast = Network{Link{1e12, 0}, Link{1e12, 0}};
  const double one = simulate_step(p, 1, 1, fast, ScaleOptions{}).images_per_s;
  for (Algorithm a : {Algorithm::ring, Algorithm::hierarchical, Algorithm::tree, Algorithm::ps, Algorithm::ps_hier}) {
    ScaleOptions o;
    o.algorithm = a;
    for (int n : {2, 8, 64}) {
      const StepPrediction s = simulate_step(p, n, std::max(1, n / 8), fast, o);
      CHECK_MESSAGE(s.images_per_s / (n * one) == doctest::Approx(1.0).epsilon(1e-6), algorithm_name(a), " n=", n);
    }
  }
}

TEST_CASE("scale: overlap is never slower than no overlap") {
  const DeviceProfile p = synthetic();
  for (double bw : {0.1, 1.0, 10.0, 100.0})
    for (int n : {2, 4, 16, 64})
      for (double mb : {1.0, 8.0, 25.0, 100.0}) {
        ScaleOptions on, off;
        on.bucket_mb = off.bucket_mb = mb;
        off.overlap = false;
        const int nodes = (n + 3) / 4;
        const double t_on = simulate_step(p, n, nodes, net_of(10, bw), on).step_ms;
        const double t_off = simulate_step(p, n, nodes, net_of(10, bw), off).step_ms;
        CHECK(t_on <= t_off + 1e-9);
      }
  // Without overlap the communication is all exposed.
  ScaleOptions off;
  off.overlap = false;
  const StepPrediction s = simulate_step(p, 8, 2, net_of(10, 1), off);
  CHECK(s.exposed_comm_ms == doctest::Approx(s.comm_ms));
}

TEST_CASE("scale: bigger buckets make fewer messages, bytes conserved") {
  const DeviceProfile p = synthetic();
  size_t last = SIZE_MAX;
  for (double mb : {1.0, 4.0, 8.0, 16.0, 25.0, 1000.0}) {
    const std::vector<Bucket> b = make_buckets(p, mb);
    int64_t bytes = 0;
    int layers = 0;
    for (const Bucket& x : b) {
      bytes += x.bytes;
      layers += x.layers;
    }
    CHECK(bytes == p.grad_bytes());
    CHECK(layers == 10);
    CHECK(b.size() <= last);
    last = b.size();
  }
  CHECK(make_buckets(p, 1.0).size() == 10);
  CHECK(make_buckets(p, 8.0).size() == 5);
  CHECK(make_buckets(p, 1000.0).size() == 1);
  // A bucket is ready when its last gradient is: 4 MB layers in pairs, backward 2 ms each.
  const std::vector<Bucket> pairs = make_buckets(p, 8.0);
  const double fwd = p.forward_ms() + p.other_ms;
  CHECK(pairs[0].ready_ms == doctest::Approx(fwd + 4));
  CHECK(pairs[4].ready_ms == doctest::Approx(fwd + 20));
  CHECK_THROWS_KILN(make_buckets(p, 0), "--bucket-mb");
}

TEST_CASE("scale: the ring cost formula, exactly, for one bucket") {
  const DeviceProfile p = synthetic();
  const double bytes = double(p.grad_bytes());
  ScaleOptions o;
  o.bucket_mb = 1e6;  // one bucket
  o.overlap = false;
  for (int n : {2, 3, 8}) {
    const Network net = net_of(12.5, 1, 7);
    const StepPrediction s = simulate_step(p, n, 1, net, o);
    REQUIRE(s.buckets.size() == 1);
    const double ring = 2.0 * (n - 1) / n * bytes / (12.5e9) * 1e3 + 2.0 * (n - 1) * 7e-3;
    CHECK(s.comm_ms == doctest::Approx(ring).epsilon(1e-12));
    CHECK(s.step_ms == doctest::Approx(p.step_ms() + ring).epsilon(1e-12));
  }
  // Across nodes the flat ring is paced by the slower link; the tree by 2 ceil(log2 n) steps.
  const Network two = Network{Link{50, 2}, Link{5, 9}};
  CHECK(allreduce_ms(int64_t(bytes), 16, 4, two, o) ==
        doctest::Approx(2.0 * 15 / 16 * bytes / 5e9 * 1e3 + 2.0 * 15 * 9e-3));
  ScaleOptions tree = o;
  tree.algorithm = Algorithm::tree;
  CHECK(allreduce_ms(int64_t(bytes), 16, 4, two, tree) == doctest::Approx(2.0 * 4 * (9e-3 + bytes / 5e9 * 1e3)));
  ScaleOptions hier = o;
  hier.algorithm = Algorithm::hierarchical;
  CHECK(allreduce_ms(int64_t(bytes), 16, 4, two, hier) ==
        doctest::Approx(2.0 * 3 / 4 * bytes / 50e9 * 1e3 + 6 * 2e-3 + 2.0 * 3 / 4 * bytes / 5e9 * 1e3 + 6 * 9e-3));
  // Parameter servers, one per node: a NIC carries g B (N-1)/N each way.
  ScaleOptions ps = o;
  ps.algorithm = Algorithm::ps;
  CHECK(allreduce_ms(int64_t(bytes), 16, 4, two, ps) ==
        doctest::Approx(2.0 * (std::max(4 * bytes / 4 * 3 / 5e9 * 1e3, 4 * bytes / 4 / 50e9 * 1e3) + 9e-3)));
}

TEST_CASE("scale: stragglers stretch the step by cv x E[max of n normals]") {
  CHECK(expected_max_normal(1) == 0);
  CHECK(expected_max_normal(2) == doctest::Approx(0.5642).epsilon(0.05));  // exact: 1/sqrt(pi)
  CHECK(expected_max_normal(64) == doctest::Approx(2.4).epsilon(0.03));
  const DeviceProfile p = synthetic();
  const Network fast = Network{Link{1e12, 0}, Link{1e12, 0}};
  ScaleOptions o;
  o.jitter = 0.05;
  CHECK(simulate_step(p, 1, 1, fast, o).step_ms == doctest::Approx(p.step_ms()));
  CHECK(simulate_step(p, 64, 8, fast, o).step_ms ==
        doctest::Approx(p.step_ms() * (1 + 0.05 * expected_max_normal(64))));
  double last = 1;
  for (int n : {2, 4, 16, 64}) {
    const double eff = simulate_step(p, n, 1, fast, o).images_per_s / (n * simulate_step(p, 1, 1, fast, o).images_per_s);
    CHECK(eff < last);
    last = eff;
  }
  // ps-hier: ring in the node, then parameter servers with one worker per node.
  ScaleOptions h;
  h.algorithm = Algorithm::ps_hier;
  const Network two = Network{Link{50, 2}, Link{5, 9}};
  const double b = 1e8;
  ScaleOptions ring;
  ScaleOptions ps;
  ps.algorithm = Algorithm::ps;
  CHECK(allreduce_ms(int64_t(b), 16, 4, two, h) ==
        doctest::Approx(allreduce_ms(int64_t(b), 4, 1, two, ring) + allreduce_ms(int64_t(b), 4, 4, two, ps)));
}

TEST_CASE("scale: faster links never predict fewer images/s") {
  const DeviceProfile p = synthetic(20, 3 << 20);
  for (Algorithm a : {Algorithm::ring, Algorithm::hierarchical, Algorithm::tree, Algorithm::ps, Algorithm::ps_hier}) {
    ScaleOptions o;
    o.algorithm = a;
    double last = 0;
    for (double bw : {0.01, 0.1, 0.5, 1.0, 5.0, 12.5, 50.0, 1e4}) {
      const double ips = simulate_step(p, 32, 4, net_of(20, bw), o).images_per_s;
      CHECK(ips >= last);
      last = ips;
    }
  }
}

TEST_CASE("scale: calibration rescales to the published one-device figure") {
  const DeviceProfile p = synthetic();
  const DeviceProfile c = calibrated(p, 250);
  CHECK(simulate_step(c, 1, 1, net_of(10, 1), ScaleOptions{}).images_per_s == doctest::Approx(250));
  // The shape of backward is kept: every layer by the same factor.
  CHECK(c.layers[3].backward_ms / c.layers[3].forward_ms == doctest::Approx(2.0));
  const DeviceProfile half = at_batch(p, 16);
  CHECK(half.forward_ms() == doctest::Approx(p.forward_ms() / 2));
  CHECK_THROWS_KILN(calibrated(p, 0), "--device-images-per-s");
}

TEST_CASE("scale: profile JSON round trip") {
  DeviceProfile p = synthetic(3);
  p.layers[1].grad_bytes = 123456789;
  p.layers[2].forward_ms = 0.125;
  const DeviceProfile q = profile_from_json(profile_to_json(p), "mem");
  CHECK(q.model == p.model);
  CHECK(q.device == p.device);
  CHECK(q.batch == p.batch);
  CHECK(q.other_ms == p.other_ms);
  CHECK(q.optimizer_ms == p.optimizer_ms);
  REQUIRE(q.layers.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(q.layers[i].name == p.layers[i].name);
    CHECK(q.layers[i].forward_ms == p.layers[i].forward_ms);
    CHECK(q.layers[i].backward_ms == p.layers[i].backward_ms);
    CHECK(q.layers[i].grad_bytes == p.layers[i].grad_bytes);
  }
  const std::string path = "test_scale_profile.json";
  save_profile(p, path);
  CHECK(load_profile(path).grad_bytes() == p.grad_bytes());
  std::remove(path.c_str());
}

TEST_CASE("scale: errors name what is wrong") {
  CHECK_THROWS_KILN(link_preset("infiniband-xdr"), "unknown network 'infiniband-xdr' (known: nvlink-p100");
  CHECK_THROWS_KILN(algorithm_from_name("butterfly"), "'butterfly'");
  CHECK_THROWS_KILN(profile_from_json("{not json", "p.json"), "p.json: not JSON");
  CHECK_THROWS_KILN(profile_from_json("{\"format\": \"other\"}", "p.json"), "p.json: not a kiln scale profile");
  CHECK_THROWS_KILN(profile_from_json(R"({"format": "kiln-scale-profile", "batch": 8, "other_ms": 0,
      "optimizer_ms": 1, "layers": [{"name": "fc", "forward_ms": 1, "backward_ms": "slow", "grad_bytes": 4}]})",
                                      "p.json"),
                    "p.json: layers[0]: \"backward_ms\" must be a number");
  CHECK_THROWS_KILN(profile_from_json(R"({"format": "kiln-scale-profile", "batch": 8, "other_ms": 0,
      "optimizer_ms": 1, "layers": []})", "p.json"), "\"layers\" must be a non-empty array");
  CHECK_THROWS_KILN(load_profile("/nonexistent/p.json"), "/nonexistent/p.json");
  CHECK_THROWS_KILN(allreduce_ms(1, 2, 3, net_of(1, 1), ScaleOptions{}), "2 GPUs on 3 nodes");
  CHECK_THROWS_KILN(reference_from_csv("header\nt,s,m,g,x,1,1,1,a,b,ring,\n", "r.csv"), "r.csv:2");
}

// Issue 18: counts past the model's range (an int overflow in nodes = (gpus + per_node - 1) /
// per_node, a vector of a billion nodes) and half-numbers in the tables are refused, naming them.
TEST_CASE("scale: absurd GPU counts and malformed table numbers are refused") {
  const DeviceProfile p = synthetic(3);
  const Network net = net_of(10, 10);
  CHECK_THROWS_KILN(simulate_step(p, 2147483647, 268435456, net, ScaleOptions{}), "2147483647 GPUs on 268435456 nodes");
  CHECK_THROWS_KILN(simulate_step(p, kMaxGpus + 1, 1, net, ScaleOptions{}), "(need 1 <= nodes <= GPUs <= 1048576)");
  CHECK_THROWS_KILN(simulate_step(p, 0, 1, net, ScaleOptions{}), "0 GPUs on 1 nodes");
  ScaleOptions ps;
  ps.algorithm = Algorithm::ps;
  ps.ps_servers = 2000000000;
  CHECK_THROWS_KILN(allreduce_ms(1 << 20, 8, 1, net, ps), "2000000000 parameter servers for 8 GPUs");
  ScaleOptions nan_jitter;
  nan_jitter.jitter = std::nan("");
  CHECK_THROWS_KILN(simulate_step(p, 8, 1, net, nan_jitter), "--jitter must be in [0, 10], not nan");
  const std::string head = "table,source,model,gpu,batch,nodes,gpus,images_per_s,intra,inter,algorithm,notes\n";
  CHECK_THROWS_KILN(reference_from_csv(head + "t,s,m,g,64,1,99999999999,100,a,b,ring,\n", "r.csv"),
                    "r.csv:2: gpus '99999999999' is not a whole number in [1, 1048576]");
  CHECK_THROWS_KILN(reference_from_csv(head + "t,s,m,g,64x,1,8,100,a,b,ring,\n", "r.csv"),
                    "r.csv:2: batch '64x' is not a whole number");
  CHECK_THROWS_KILN(reference_from_csv(head + "t,s,m,g,64,9,8,100,a,b,ring,\n", "r.csv"),
                    "r.csv:2: nodes '9' is not a whole number in [1, 8]");
  CHECK_THROWS_KILN(reference_from_csv(head + "t,s,m,g,64,1,8,nan,a,b,ring,\n", "r.csv"),
                    "r.csv:2: images_per_s 'nan' is not a finite number > 0");
  CHECK_THROWS_KILN(profile_from_json(R"({"format": "kiln-scale-profile", "batch": 1e300, "other_ms": 0,
      "optimizer_ms": 1, "layers": [{"name": "fc", "forward_ms": 1, "backward_ms": 1, "grad_bytes": 4}]})", "p.json"),
                    "p.json: \"batch\" is 1e+300, not a whole number in [1, 2^30]");
  CHECK_THROWS_KILN(profile_from_json("{\"format\": " + std::string(100, '[') + std::string(100, ']') + "}", "p.json"),
                    "p.json: JSON nested deeper than 64 levels");
  // Fields of the wrong JSON type are refused by name, not thrown as the JSON library's type_error
  // (tools/fuzz scale found "format": 2638500000286 aborting the process).
  CHECK_THROWS_KILN(profile_from_json(R"({"format": 2638500000286, "layers": []})", "p.json"),
                    "p.json: not a kiln scale profile");
  CHECK_THROWS_KILN(profile_from_json(R"({"format": "kiln-scale-profile", "model": 50, "batch": 8, "other_ms": 0,
      "optimizer_ms": 1, "layers": [{"name": "fc", "forward_ms": 1, "backward_ms": 1, "grad_bytes": 4}]})", "p.json"),
                    "p.json: \"model\" must be a string, not 50");
  CHECK_THROWS_KILN(profile_from_json(R"({"format": "kiln-scale-profile", "device": [1], "batch": 8, "other_ms": 0,
      "optimizer_ms": 1, "layers": [{"name": "fc", "forward_ms": 1, "backward_ms": 1, "grad_bytes": 4}]})", "p.json"),
                    "p.json: \"device\" must be a string, not [1]");
}

TEST_CASE("scale: the published tables parse, name known presets and compare") {
  const std::vector<ReferenceRow> rows = load_reference(std::string(KILN_SOURCE_DIR) + "/dist/reference/scaling.csv");
  std::vector<ReferenceRow> p100;
  for (const ReferenceRow& r : rows) {
    link_preset(r.intra);
    link_preset(r.inter);
    algorithm_from_name(r.algorithm);
    if (r.table == "horovod-p100") p100.push_back(r);
  }
  REQUIRE(p100.size() == 6);
  CHECK(p100.back().gpus == 64);
  CHECK(p100.back().images_per_s == 9318.20);
  // The calibration solves for the device speed that reproduces the base row (2 GPUs): a check of
  // the bisection, not evidence for the model, which is why that row is left out of every error.
  const ComparisonResult c = compare_table(synthetic(40, 2 << 20), p100, ScaleOptions{});
  CHECK(c.rows[0].calibration);
  CHECK(std::none_of(c.rows.begin() + 1, c.rows.end(), [](const Comparison& x) { return x.calibration; }));
  CHECK(c.rows[0].predicted.images_per_s == doctest::Approx(322.93).epsilon(1e-3));  // Horovod's cycle: see below
  CHECK(c.rows[0].predicted_efficiency == doctest::Approx(1.0));
  CHECK(c.rows[5].published_efficiency == doctest::Approx(9318.20 / 32 / 322.93));
}

// Issue 21: the effects the published runs had and the bare model left out.
TEST_CASE("scale: a fusion cycle sends what is ready at each tick, up to the threshold") {
  const DeviceProfile p = synthetic();  // gradients final at 12.5, 14.5, ..., 30.5 ms
  const std::vector<Bucket> b = make_buckets(p, 1000.0, 5.0);
  REQUIRE(b.size() == 5);
  const int layers[] = {2, 2, 3, 2, 1};
  for (size_t i = 0; i < b.size(); ++i) {
    CHECK(b[i].ready_ms == doctest::Approx(15.0 + 5.0 * double(i)));
    CHECK(b[i].layers == layers[i]);
  }
  // The tick at 25 ms holds three 4 MB gradients; an 8 MB threshold splits them 2 + 1, both then.
  const std::vector<Bucket> capped = make_buckets(p, 8.0, 5.0);
  REQUIRE(capped.size() == 6);
  CHECK(capped[2].layers == 2);
  CHECK(capped[3].layers == 1);
  CHECK(capped[3].ready_ms == doctest::Approx(25.0));
  CHECK_THROWS_KILN(make_buckets(p, 25, -1), "--cycle-ms must be >= 0");
}

TEST_CASE("scale: parameter servers pull before the next forward, even for one GPU") {
  const DeviceProfile p = synthetic();
  ScaleOptions ps;
  ps.algorithm = Algorithm::ps;
  ps.bucket_mb = 1e6;  // one bucket
  const Network net = net_of(10, 1);
  // One GPU: its 40 MB go to the host's server and come back over the node's link.
  const StepPrediction one = simulate_step(p, 1, 1, net, ps);
  const double bytes = double(p.grad_bytes());
  const double push = bytes / 10e9 * 1e3 + 5e-3;
  CHECK(one.comm_ms == doctest::Approx(2 * push));
  // The push starts when the last gradient is final (one bucket) and the pull follows it.
  CHECK(one.exposed_comm_ms == doctest::Approx(2 * push));
  // With many buckets the pushes hide under backward but the pulls never do.
  ps.bucket_mb = 4;
  const StepPrediction s = simulate_step(p, 8, 2, net, ps);
  CHECK(s.exposed_comm_ms >= s.comm_ms / 2 - 1e-9);
  CHECK(allreduce_ms(1 << 20, 1, 1, net, ScaleOptions{}) == 0);  // a ring of one sends nothing
}

TEST_CASE("scale: node stragglers and a fixed per-step cost") {
  const DeviceProfile p = synthetic();
  const Network fast = Network{Link{1e12, 0}, Link{1e12, 0}};
  ScaleOptions o;
  o.jitter = 0.02;
  o.node_jitter = 0.1;
  CHECK(simulate_step(p, 32, 4, fast, o).step_ms ==
        doctest::Approx(p.step_ms() * (1 + 0.02 * expected_max_normal(32) + 0.1 * expected_max_normal(4))));
  CHECK(simulate_step(p, 8, 1, fast, o).step_ms == doctest::Approx(p.step_ms() * (1 + 0.02 * expected_max_normal(8))));
  ScaleOptions f;
  f.fixed_ms = 7;
  CHECK(simulate_step(p, 1, 1, fast, f).step_ms == doctest::Approx(p.step_ms() + 7));
  // It does not shrink with the batch: half the batch, more than half the throughput lost per image.
  const DeviceProfile half = at_batch(p, 16);
  CHECK(simulate_step(half, 1, 1, fast, f).step_ms == doctest::Approx(half.step_ms() + 7));
  ScaleOptions bad;
  bad.node_jitter = -1;
  CHECK_THROWS_KILN(simulate_step(p, 2, 1, fast, bad), "--node-jitter must be in [0, 10], not -1");
  bad = ScaleOptions{};
  bad.fixed_ms = std::nan("");
  CHECK_THROWS_KILN(simulate_step(p, 2, 1, fast, bad), "--fixed-ms must be >= 0, not nan");
}

TEST_CASE("scale: a table's effects come with their source and are checked") {
  const std::string head = "table,source,model,gpu,batch,nodes,gpus,images_per_s,intra,inter,algorithm,notes\n";
  const std::string rows = "t,s,resnet50,g,64,1,1,100,pcie3,ib-edr,ring,\nt,s,resnet50,g,64,2,8,700,pcie3,ib-edr,ring,\n";
  const std::vector<ReferenceRow> r =
      reference_from_csv("#% t | jitter=0.05 | fitted\n#% t | cycle_ms = 5 | Horovod's default\n" + head + rows, "r.csv");
  REQUIRE(r.size() == 2);
  REQUIRE(r[1].effects.size() == 2);
  CHECK(r[1].effects[0].name == "jitter");
  CHECK(r[1].effects[0].value == 0.05);
  CHECK(r[1].effects[1].name == "cycle_ms");
  CHECK(r[1].effects[1].value == 5);
  CHECK(r[1].effects[1].source == "Horovod's default");
  CHECK_THROWS_KILN(reference_from_csv("#% t | warp=2 | x\n" + head + rows, "r.csv"), "r.csv:1: scale: unknown effect 'warp'");
  CHECK_THROWS_KILN(reference_from_csv("#% t | jitter=11 | x\n" + head + rows, "r.csv"),
                    "r.csv:1: scale: effect jitter=11 is not in [0, 10]");
  CHECK_THROWS_KILN(reference_from_csv("#% t | jitter=x | x\n" + head + rows, "r.csv"), "value 'x', not a number");
  CHECK_THROWS_KILN(reference_from_csv("#% t | jitter=0.1 |\n" + head + rows, "r.csv"), "effect jitter names no source");
  CHECK_THROWS_KILN(reference_from_csv("#% t jitter=0.1\n" + head + rows, "r.csv"), "'#% table | name=value | source'");
  CHECK_THROWS_KILN(reference_from_csv("#% u | jitter=0.1 | x\n" + head + rows, "r.csv"),
                    "effect jitter is for table 'u', which has no rows");
  // compare_table applies them: the stragglers cost the 8-GPU row, not the calibrated base.
  ScaleOptions none;
  std::vector<ReferenceRow> bare = r;
  for (ReferenceRow& x : bare) x.effects.clear();
  const DeviceProfile p = synthetic();
  const double with = compare_table(p, r, none).rows[1].predicted_efficiency;
  const double without = compare_table(p, bare, none).rows[1].predicted_efficiency;
  CHECK(with < without - 0.03);
  // The fusion cycle makes the step a staircase in the device speed (finely, over 64 phases): the
  // calibration meets the base row to within a step of it.
  CHECK(compare_table(p, r, none).rows[0].predicted.images_per_s == doctest::Approx(100).epsilon(1e-3));
}

// fit_effects on a table the model itself made, with known effects: it finds them again, from
// the rows on at most two nodes, and so predicts the larger rows exactly.
TEST_CASE("scale: fit_effects recovers the effects a table was made with") {
  // GPUs, nodes, batch
  const int kRows[][3] = {{1, 1, 32}, {4, 1, 32}, {8, 1, 32}, {16, 2, 32}, {8, 2, 16}, {32, 4, 32}};
  std::vector<ReferenceRow> t;
  for (const auto& g : kRows) {
    ReferenceRow r;
    r.table = "made";
    r.gpus = g[0], r.nodes = g[1], r.batch = g[2];
    r.images_per_s = 100;  // replaced below by the model's prediction
    r.intra = "pcie3", r.inter = "ib-edr", r.algorithm = "ring";
    t.push_back(r);
  }
  const DeviceProfile p = synthetic();
  const std::vector<TableEffect> truth = {
      {"jitter", 0.05, "made"}, {"node_jitter", 0.1, "made"}, {"fixed_ms", 6, "made"}};
  const ComparisonResult made = compare_table(p, with_effects(t, truth), ScaleOptions{});
  for (size_t i = 0; i < t.size(); ++i) t[i].images_per_s = made.rows[i].predicted.images_per_s;
  std::vector<ReferenceRow> small;
  for (const ReferenceRow& r : t)
    if (r.nodes <= 2) small.push_back(r);
  const EffectFit f = fit_effects(p, {small}, {"jitter", "node_jitter", "fixed_ms"});
  CHECK(f.rows == 4);  // the calibration row (1 GPU) not counted
  CHECK(f.undetermined.empty());
  REQUIRE(f.effects.size() == 3);
  CHECK(f.effects[0].value == doctest::Approx(0.05).epsilon(0.02));
  CHECK(f.effects[1].value == doctest::Approx(0.1).epsilon(0.02));
  CHECK(f.effects[2].value == doctest::Approx(6).epsilon(0.05));
  CHECK(f.worst_points < 0.05);
  const ComparisonResult held = compare_table(p, with_effects(t, f.effects), ScaleOptions{});
  CHECK(std::fabs(held.rows.back().error_points()) < 0.1);  // 32 GPUs on 4 nodes, held out
  // Without a second batch size the fixed cost cannot be told apart, nor node stragglers without
  // two GPU counts on one node count: they stay 0 and are named.
  std::vector<ReferenceRow> one_batch, eight_per_node;
  for (const ReferenceRow& r : t) {
    if (r.batch == 32) one_batch.push_back(r);
    if (r.gpus == 8 * r.nodes) eight_per_node.push_back(r);  // 8, 16, 32 GPUs on 1, 2, 4 nodes
  }
  const EffectFit g = fit_effects(p, {one_batch}, {"jitter", "fixed_ms"});
  CHECK(g.undetermined == std::vector<std::string>{"fixed_ms"});
  CHECK(g.effects[1].value == 0);
  CHECK(g.effects[1].source == "0: the rows cannot determine it");
  CHECK(fit_effects(p, {eight_per_node}, {"jitter", "node_jitter"}).undetermined ==
        std::vector<std::string>{"node_jitter"});
  // with_effects replaces an effect a row has and adds one it lacks.
  const std::vector<ReferenceRow> w =
      with_effects(with_effects(t, {{"jitter", 1, "a"}}), {{"jitter", 2, "b"}, {"cycle_ms", 5, "c"}});
  REQUIRE(w[0].effects.size() == 2);
  CHECK(w[0].effects[0].value == 2);
  CHECK(w[0].effects[1].name == "cycle_ms");
  CHECK_THROWS_KILN(fit_effects(p, {t}, {"cycle_ms"}),
                    "cannot fit effect 'cycle_ms' (fitted: jitter, node_jitter, fixed_ms)");
  const std::vector<ReferenceRow> base_only = {t[0]};
  CHECK_THROWS_KILN(fit_effects(p, {base_only}, {"jitter"}), "no row to fit besides the calibration rows");
  CHECK_THROWS_KILN(fit_effects(p, {t}, {}), "no effect named to fit");
  CHECK_THROWS_KILN(fit_effects(p, {t}, {"jitter", "jitter"}), "effect 'jitter' named twice");
}

namespace {

struct Published {
  DeviceProfile profile;  // the shipped ResNet-50 profile, as `kiln scale --compare` uses by default
  std::vector<ReferenceRow> rows;
  std::vector<std::string> tables;  // in the CSV's order
};

Published published() {
  const std::string root = std::string(KILN_SOURCE_DIR) + "/dist/reference";
  Published p{load_profile(root + "/profiles/resnet50-cpu-b32.json"), load_reference(root + "/scaling.csv"), {}};
  for (const ReferenceRow& r : p.rows)
    if (std::find(p.tables.begin(), p.tables.end(), r.table) == p.tables.end()) p.tables.push_back(r.table);
  return p;
}

std::vector<ReferenceRow> rows_of(const Published& p, const std::string& table) {
  std::vector<ReferenceRow> t;
  for (const ReferenceRow& r : p.rows)
    if (r.table == table) t.push_back(r);
  return t;
}

std::string describe(const Comparison& x) {
  return x.row.table + ": " + std::to_string(x.row.gpus) + " GPUs on " + std::to_string(x.row.nodes) +
         " nodes at batch " + std::to_string(x.row.batch) + ": predicted " +
         std::to_string(100 * x.predicted_efficiency) + "% against published " +
         std::to_string(100 * x.published_efficiency) + "%";
}

}  // namespace

// In-sample: with each table's effects as the CSV gives them, the rows are within 3 points of
// efficiency. The "fitted" effects were chosen on these same rows, so this says the model can be
// made to fit, not that it predicts (the held-out case below does); the calibration row of each
// table is matched by construction and left out. Measured: worst 2.8 (s1-k80, 16 GPUs), mean 0.7
// over 22 rows.
TEST_CASE("scale: in-sample: every published row but the calibration row within 3 points") {
  const Published pub = published();
  CHECK(pub.tables.size() >= 6);
  int rows = 0;
  for (const std::string& t : pub.tables) {
    const std::vector<ReferenceRow> table = rows_of(pub, t);
    CHECK_MESSAGE(!table.front().publication.empty(), t, " names no publication");
    const ComparisonResult c = compare_table(pub.profile, table, ScaleOptions{});
    CHECK(std::count_if(c.rows.begin(), c.rows.end(), [](const Comparison& x) { return x.calibration; }) == 1);
    for (const Comparison& x : c.rows) {
      if (x.calibration) continue;
      CHECK_MESSAGE(std::fabs(x.error_points()) <= 3.0, describe(x));
      ++rows;
    }
  }
  CHECK(rows >= 22);
}

// Held out: the effects no publication gives (the CSV's "fitted" ones: jitter, node_jitter,
// fixed_ms) are refitted by fit_effects on each table's rows on at most kFitNodes nodes, the
// calibration row among them, and the rows on more nodes are predicted: what a user does, measure
// on a node or two and ask about the cluster. The KIT tables share their values (one machine,
// one value each in the CSV), so they are fitted together. Measured: the 9 held-out rows at a
// batch among the fit rows' are within 1.48 points (mean 0.95), asserted within 2.5: a point of
// margin for changes elsewhere in the model, far below the bare model's 17. The KIT 24-GPU row at
// batch 32 is 5.25 points optimistic: fixed_ms, the only effect that slows batch 32 per image, is
// determined by that row alone, so held out it stays 0; asserted within 6, what it meets. On the
// fit rows themselves (in-sample again) the worst is 2.72 (s1-k80), asserted within 3.
TEST_CASE("scale: held-out: effects fitted on at most 2 nodes predict the larger runs") {
  constexpr int kFitNodes = 2;
  constexpr double kHeldOutPoints = 2.5, kOtherBatchPoints = 6.0, kFitPoints = 3.0;
  const Published pub = published();
  const std::vector<std::string> kit = {"kit-980ti-imagenet", "kit-980ti-horovod"};
  std::vector<std::vector<std::string>> groups = {kit};
  for (const std::string& t : pub.tables)
    if (std::find(kit.begin(), kit.end(), t) == kit.end()) groups.push_back({t});
  int held_out = 0;
  for (const std::vector<std::string>& group : groups) {
    std::vector<std::vector<ReferenceRow>> fit_rows;
    std::vector<std::string> names;
    for (const std::string& t : group) {
      fit_rows.emplace_back();
      for (const ReferenceRow& r : rows_of(pub, t)) {
        if (r.nodes <= kFitNodes) fit_rows.back().push_back(r);
        for (const TableEffect& e : r.effects) {
          const bool fitted = e.source.find("fitted") != std::string::npos;
          if (fitted && std::find(names.begin(), names.end(), e.name) == names.end()) names.push_back(e.name);
        }
      }
    }
    REQUIRE_MESSAGE(!names.empty(), group[0], " has no fitted effect");
    const EffectFit f = fit_effects(pub.profile, fit_rows, names);
    CHECK_MESSAGE(f.worst_points <= kFitPoints, group[0], ": in-sample on the fit rows ", f.worst_points);
    for (size_t i = 0; i < group.size(); ++i) {
      const std::vector<ReferenceRow> whole = with_effects(rows_of(pub, group[i]), f.effects);
      const ComparisonResult c = compare_table(pub.profile, whole, ScaleOptions{});
      for (const Comparison& x : c.rows) {
        if (x.calibration) REQUIRE_MESSAGE(x.row.nodes <= kFitNodes, group[i], ": calibration row not fitted on");
        if (x.row.nodes <= kFitNodes) continue;
        const bool batch_fitted = std::any_of(fit_rows[i].begin(), fit_rows[i].end(),
                                              [&](const ReferenceRow& r) { return r.batch == x.row.batch; });
        CHECK_MESSAGE(std::fabs(x.error_points()) <= (batch_fitted ? kHeldOutPoints : kOtherBatchPoints), "held out: ",
                      describe(x));
        ++held_out;
      }
    }
  }
  CHECK(held_out >= 10);
}
