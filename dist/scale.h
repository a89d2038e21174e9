// The scaling model behind `kiln scale`: predicts images/s and efficiency of synchronous data
// parallelism on N GPUs over M nodes from a one-device profile (per-layer forward and backward
// times, gradient bytes per layer in backward order, optimizer time) and a network (bandwidth
// and latency within and between nodes). One step is simulated as DDP and Horovod run it:
// forward, then backward layer by layer in reverse; gradients fill fusion buckets (25 MB by
// default, reverse registration order), or, as Horovod does, at the ticks of a cycle (5 ms before
// Horovod 0.21) up to a fusion threshold; a bucket is ready when its last gradient is; buckets are
// all-reduced one at a time on one communication channel, overlapped with the rest of backward
// (or all after it with overlap off); then the optimizer. Parameter servers pull the variables
// back before the next forward, which nothing overlaps. Stragglers (per GPU and per node) stretch
// the step; a per-step fixed cost does not scale with the batch. No MPI needed: pure arithmetic.
// The effects no publication gives are fitted to published rows by fit_effects, which also lets
// the tests fit on some rows and check the model on the others (held out).
//
//   DeviceProfile p = load_profile("resnet50.json");
//   Network net{link_preset("pcie3"), link_preset("ib-edr"), 4};
//   StepPrediction s = simulate_step(p, 16, 4, net, ScaleOptions{});   // 16 GPUs on 4 nodes
//
// Times are milliseconds, sizes bytes, bandwidths GB/s (1e9 bytes/s, one direction), latencies
// microseconds. Test: ctest --test-dir build -R dist.test_scale
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::dist {

struct LayerProfile {
  std::string name;
  double forward_ms = 0, backward_ms = 0;
  int64_t grad_bytes = 0;  // gradients this layer produces in backward (parameters x 4 for fp32)
};

struct DeviceProfile {
  std::string model, device;  // what was measured, where ("resnet50", "cpu (2 threads)")
  int64_t batch = 0;          // per device
  std::vector<LayerProfile> layers;  // backward order: the last layer of forward first
  double other_ms = 0;        // per step outside the layers (loss, bookkeeping), before backward
  double optimizer_ms = 0;
  double forward_ms() const;
  double backward_ms() const;
  double step_ms() const;     // one device: forward + other + backward + optimizer
  int64_t grad_bytes() const;
};

// JSON: {"format": "kiln-scale-profile", "version": 1, "model", "device", "batch", "other_ms",
// "optimizer_ms", "layers": [{"name", "forward_ms", "backward_ms", "grad_bytes"}, ...]}.
// A malformed profile is a kiln::Error naming `origin` and the field.
std::string profile_to_json(const DeviceProfile& p);
DeviceProfile profile_from_json(const std::string& text, const std::string& origin = "profile");
DeviceProfile load_profile(const std::string& path);
void save_profile(const DeviceProfile& p, const std::string& path);

// Every time multiplied by `factor` (gradient bytes unchanged).
DeviceProfile scaled(const DeviceProfile& p, double factor);
// The profile at another batch per device: times scale linearly with the batch (an assumption:
// small batches use a GPU less well).
DeviceProfile at_batch(const DeviceProfile& p, int64_t batch);
// Rescales every time uniformly so that one device gives `images_per_s` at p.batch: the
// calibration to a published single-GPU figure. The per-layer shape of backward (when each
// gradient becomes ready) stays that of the measurement.
DeviceProfile calibrated(const DeviceProfile& p, double images_per_s);

struct Link {
  double gb_per_s = 0;   // achieved bandwidth, one direction
  double latency_us = 0; // per message step, software included
};
struct LinkPreset {
  std::string name;
  Link link;
  std::string basis;  // the nominal rate and efficiency factor it comes from
};
const std::vector<LinkPreset>& link_presets();
// kiln::Error naming `name` and listing the presets when unknown.
Link link_preset(const std::string& name);

struct Network {
  Link intra;  // between GPUs of one node
  Link inter;  // between nodes (one NIC per node)
};

// ring: one flat ring over all GPUs, paced by its slowest link (NCCL's ring across nodes).
// hierarchical: reduce-scatter in the node, ring over nodes on the node's share, allgather in the
// node. tree: binary reduce then broadcast, 2 ceil(log2 n) (lat + B/bw), not pipelined.
// ps: parameter servers (TensorFlow's), one per node unless ScaleOptions::ps_servers: each worker
// pushes B/K to each server and pulls it back; a NIC carries what crosses nodes.
// ps-hier: ring all-reduce within the node first, then one push and pull per node (tf_cnn_benchmarks'
// distributed_replicated).
// The schemes of the modelled jobs (published ones included), not dist/comm.h's
// AllreduceAlgorithm (--allreduce: how kiln's communicator all-reduces): its "library" has no one
// cost, and parameter servers are a strategy of kiln's (dist/ps.h), not an all-reduce.
enum class Algorithm { ring, hierarchical, tree, ps, ps_hier };
Algorithm algorithm_from_name(const std::string& name);  // kiln::Error naming it when unknown
const char* algorithm_name(Algorithm a);

struct ScaleOptions {
  double bucket_mb = 25;  // fusion buffer, MiB (DDP's bucket_cap_mb, HOROVOD_FUSION_THRESHOLD)
  bool overlap = true;    // all-reduce buckets while backward runs
  Algorithm algorithm = Algorithm::ring;
  int ps_servers = 0;     // ps: server count, 0 = one per node
  // Stragglers: per-rank compute time varies with this coefficient of variation (0: none); a
  // synchronous step waits for the slowest of n ranks, whose compute is longer by cv x E[max of n
  // standard normals].
  double jitter = 0;
  // Stragglers among nodes (a node's network, host or input pipeline): the same with the node
  // count; it adds to `jitter`'s stretch.
  double node_jitter = 0;
  // Fusion cycle (Horovod's HOROVOD_CYCLE_TIME): gradients ready by each tick of this period are
  // fused, up to bucket_mb, and reduced; 0 = a bucket goes as soon as it is full (DDP). The
  // ticks' phase against the step is unknown: the prediction is the mean over 64 phases.
  double cycle_ms = 0;
  // Per-step cost that does not scale with the batch (session and launch overhead, the input
  // pipeline's step barrier), in ms of one step at any GPU count.
  double fixed_ms = 0;
};

// What a published table's runs had and the bare model leaves out ("#% table | name=value |
// source" lines of the reference CSV): jitter, node_jitter, cycle_ms, bucket_mb, fixed_ms,
// overlap (0 or 1).
struct TableEffect {
  std::string name;
  double value = 0;
  std::string source;  // where the value comes from (a default documented by the framework, or "fitted ...")
};
// Sets the option `name` to `value`; a kiln::Error naming the effect when unknown or out of range.
void apply_effect(ScaleOptions& o, const std::string& name, double value);

// The largest job the model takes: a million GPUs, 1,024 per node. Counts past them are input
// errors (a typo, an overflow), and they keep every product of counts inside int and double range.
constexpr int kMaxGpus = 1 << 20;
constexpr int kMaxGpusPerNode = 1024;

// E[max of n independent standard normals] (Blom's approximation; 0 for n = 1).
double expected_max_normal(int n);

// Time to all-reduce `bytes` over `gpus` GPUs spread evenly over `nodes` nodes. 0 for one GPU.
double allreduce_ms(int64_t bytes, int gpus, int nodes, const Network& net, const ScaleOptions& o);

struct Bucket {
  int64_t bytes = 0;
  int layers = 0;          // layers whose gradients it holds
  double ready_ms = 0;     // when its last gradient is final (from the start of the step)
  double start_ms = 0, end_ms = 0;  // its all-reduce on the communication channel
};

struct StepPrediction {
  int gpus = 1, nodes = 1;
  double backward_end_ms = 0;  // forward + other + backward
  double comm_ms = 0;          // sum of the buckets' all-reduce times
  double exposed_comm_ms = 0;  // step time added by communication
  double step_ms = 0;
  double images_per_s = 0;     // gpus x batch / step
  std::vector<Bucket> buckets;
};

// Buckets in the order they are reduced (layers in backward order, filled up to bucket_mb; with a
// cycle, what is ready at each tick, in pieces of at most bucket_mb; ticks at phase_ms + k cycle_ms).
std::vector<Bucket> make_buckets(const DeviceProfile& p, double bucket_mb, double cycle_ms = 0, double phase_ms = 0);
StepPrediction simulate_step(const DeviceProfile& p, int gpus, int nodes, const Network& net, const ScaleOptions& o);

// A published measurement (dist/reference/scaling.csv, one line per row).
struct ReferenceRow {
  std::string table;       // "horovod-p100", "kit-980ti", ... : the rows compared together
  std::string source;      // where it is published (seed file or reference source id)
  std::string publication; // who published it, what and when (the CSV's "#@ source | publication" lines)
  std::string model;       // kiln zoo name ("resnet50")
  std::string gpu;
  int64_t batch = 0;       // per GPU
  int nodes = 1, gpus = 1;
  double images_per_s = 0;
  std::string intra, inter;  // link presets
  std::string algorithm;     // ring | hierarchical | tree | ps
  std::string notes;
  std::vector<TableEffect> effects;  // its table's, in the order the CSV gives them
};
// CSV with a header line; '#' lines are comments, except "#@ <source> | <publication>", which names
// the publication behind a source id, and "#% <table> | <name>=<value> | <source>", an effect of
// that table; notes (last column) may hold commas.
std::vector<ReferenceRow> reference_from_csv(const std::string& text, const std::string& origin = "reference");
std::vector<ReferenceRow> load_reference(const std::string& path);

// Predicted beside published for one table, with the table's effects applied over `o`: the
// profile is calibrated once, so that the prediction matches the table's base row (its fewest
// GPUs): the device speed is solved for by bisection. Efficiency, for both, is images/s per GPU
// relative to the base row's per GPU (a row at another batch so carries the batch's effect).
struct Comparison {
  ReferenceRow row;
  StepPrediction predicted;
  double predicted_efficiency = 0, published_efficiency = 0;
  // The base row: predicted as published by construction, so its error is no evidence.
  bool calibration = false;
  // 100 x (predicted - published efficiency): the model's error in points of scaling efficiency.
  double error_points() const { return 100 * (predicted_efficiency - published_efficiency); }
};
struct ComparisonResult {
  std::vector<Comparison> rows;
  double device_images_per_s = 0;  // calibrated one-device throughput at the base row's batch
  ScaleOptions options;            // what was used: the caller's with the table's effects applied
};
ComparisonResult compare_table(const DeviceProfile& measured, const std::vector<ReferenceRow>& table,
                               const ScaleOptions& o);

// The rows with each effect of `effects` set to its value (added to a row that lacks it).
std::vector<ReferenceRow> with_effects(std::vector<ReferenceRow> rows, const std::vector<TableEffect>& effects);

// The values of the effects `names` (jitter, node_jitter, fixed_ms: those no publication gives)
// that minimise the RMS error, in points of efficiency, of compare_table over `tables`' rows, the
// calibration rows left out. Several tables share one value per effect (the KIT tables: one
// machine); each table's other effects stay. To validate on held-out rows, pass only the rows to
// fit on, including each table's calibration row (its fewest GPUs) so that a later compare_table
// of the whole table calibrates alike. The search: each effect in turn over its range (jitter and
// node_jitter [0, 0.5], fixed_ms [0, 200] ms) by a grid then golden-section search, sweeping until
// none moves by 1e-3 of its range (20 sweeps at most). An effect the rows cannot determine stays 0 and is listed:
// fixed_ms without two batch sizes among the rows, node_jitter without two GPU counts on one node
// count and a row on several nodes. A kiln::Error for an effect it cannot fit, or no row to fit
// besides the calibration rows.
struct EffectFit {
  std::vector<TableEffect> effects;  // in the order named; source "fitted by fit_effects to N rows"
  std::vector<std::string> undetermined;  // those left at 0
  int rows = 0;                      // rows fitted to, calibration rows not counted
  double rms_points = 0, worst_points = 0;  // the error on them with the fitted values
};
EffectFit fit_effects(const DeviceProfile& measured, const std::vector<std::vector<ReferenceRow>>& tables,
                      const std::vector<std::string>& names, const ScaleOptions& o = ScaleOptions{});

}  // namespace kiln::dist
