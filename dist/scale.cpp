// The scaling model of `kiln scale` (dist/scale.h): profiles, link presets, all-reduce costs and
// the bucketed step simulation. The comparison with published tables and the fit of the effects no
// publication gives are in dist/scale_tables.cpp.
//   ctest --test-dir build -R dist.test_scale
#include "dist/scale.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dist/scale_detail.h"
#include "engine/error.h"
#include "io/formats/digest.h"
#include "io/formats/json_limits.h"

namespace kiln::dist {

double DeviceProfile::forward_ms() const {
  double s = 0;
  for (const LayerProfile& l : layers) s += l.forward_ms;
  return s;
}
double DeviceProfile::backward_ms() const {
  double s = 0;
  for (const LayerProfile& l : layers) s += l.backward_ms;
  return s;
}
double DeviceProfile::step_ms() const { return forward_ms() + other_ms + backward_ms() + optimizer_ms; }
int64_t DeviceProfile::grad_bytes() const {
  int64_t s = 0;
  for (const LayerProfile& l : layers) s += l.grad_bytes;
  return s;
}

// --- profiles ------------------------------------------------------------------------------

std::string profile_to_json(const DeviceProfile& p) {
  nlohmann::ordered_json j;
  j["format"] = "kiln-scale-profile";
  j["version"] = 1;
  j["model"] = p.model;
  j["device"] = p.device;
  j["batch"] = p.batch;
  j["other_ms"] = p.other_ms;
  j["optimizer_ms"] = p.optimizer_ms;
  j["layers"] = nlohmann::ordered_json::array();
  for (const LayerProfile& l : p.layers)
    j["layers"].push_back({{"name", l.name}, {"forward_ms", l.forward_ms}, {"backward_ms", l.backward_ms},
                           {"grad_bytes", l.grad_bytes}});
  return j.dump(2) + "\n";
}

namespace {

// A value as JSON text for a message, cut short: a megabyte string should not become one.
std::string clip(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  KILN_CHECK(j.is_object() && j.contains(key), where, ": missing \"", key, "\"");
  const nlohmann::json& v = j.at(key);
  KILN_CHECK(v.is_number(), where, ": \"", key, "\" must be a number, not ", clip(v));
  const double d = v.get<double>();
  KILN_CHECK(std::isfinite(d) && d >= 0, where, ": \"", key, "\" must be finite and >= 0, not ", clip(v));
  return d;
}

// An optional string field: "" when absent; the error names the key when it holds anything else.
std::string optional_text(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return "";
  const nlohmann::json& v = j.at(key);
  KILN_CHECK(v.is_string(), where, ": \"", key, "\" must be a string, not ", clip(v));
  return v.get<std::string>();
}

}  // namespace

namespace scale_detail {

// A regular file only (a FIFO would block), bounded in size; the error names the path.
std::string read_text(const std::string& path) {
  try {
    return io::read_text_file(path, "scaling file");
  } catch (const Error& e) {
    KILN_THROW("cannot open '", path, "': ", e.message().empty() ? std::string(e.what()) : e.message());
  }
}

}  // namespace scale_detail

using scale_detail::read_text;

DeviceProfile profile_from_json(const std::string& text, const std::string& origin) {
  io::check_json_depth(text, origin);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    KILN_THROW(origin, ": not JSON (", e.what(), ")");
  }
  KILN_CHECK(j.is_object() && j.contains("format") && j["format"] == "kiln-scale-profile", origin,
             ": not a kiln scale profile (\"format\": \"kiln-scale-profile\" missing)");
  DeviceProfile p;
  p.model = optional_text(j, "model", origin);
  p.device = optional_text(j, "device", origin);
  const double batch = number(j, "batch", origin);
  KILN_CHECK(batch >= 1 && batch <= double(int64_t(1) << 30) && batch == std::floor(batch), origin,
             ": \"batch\" is ", clip(j["batch"]), ", not a whole number in [1, 2^30]");
  p.batch = int64_t(batch);
  p.other_ms = number(j, "other_ms", origin);
  p.optimizer_ms = number(j, "optimizer_ms", origin);
  KILN_CHECK(j.contains("layers") && j["layers"].is_array() && !j["layers"].empty(), origin,
             ": \"layers\" must be a non-empty array");
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    const nlohmann::json& l = j["layers"][i];
    const std::string where = origin + ": layers[" + std::to_string(i) + "]";
    LayerProfile lp;
    KILN_CHECK(l.is_object() && l.contains("name") && l["name"].is_string(), where, ": missing \"name\"");
    lp.name = l["name"].get<std::string>();
    lp.forward_ms = number(l, "forward_ms", where);
    lp.backward_ms = number(l, "backward_ms", where);
    const double grad_bytes = number(l, "grad_bytes", where);
    KILN_CHECK(grad_bytes <= double(int64_t(1) << 50), where, ": \"grad_bytes\" is ", clip(l["grad_bytes"]),
               ", more than 2^50");
    lp.grad_bytes = int64_t(grad_bytes);
    p.layers.push_back(lp);
  }
  return p;
}

DeviceProfile load_profile(const std::string& path) { return profile_from_json(read_text(path), path); }

void save_profile(const DeviceProfile& p, const std::string& path) { io::write_file_atomic(path, profile_to_json(p)); }

DeviceProfile scaled(const DeviceProfile& p, double factor) {
  KILN_CHECK(factor > 0 && std::isfinite(factor), "scale: time factor must be positive, not ", factor);
  DeviceProfile q = p;
  for (LayerProfile& l : q.layers) {
    l.forward_ms *= factor;
    l.backward_ms *= factor;
  }
  q.other_ms *= factor;
  // The optimizer touches parameters, not activations, but a uniform factor keeps calibration one
  // number; it is a few percent of a step.
  q.optimizer_ms *= factor;
  return q;
}

DeviceProfile at_batch(const DeviceProfile& p, int64_t batch) {
  KILN_CHECK(batch > 0 && p.batch > 0, "scale: batch must be positive (profile ", p.batch, ", asked ", batch, ")");
  if (batch == p.batch) return p;
  DeviceProfile q = scaled(p, double(batch) / double(p.batch));
  q.optimizer_ms = p.optimizer_ms;  // per parameter, not per sample
  q.batch = batch;
  return q;
}

DeviceProfile calibrated(const DeviceProfile& p, double images_per_s) {
  KILN_CHECK(images_per_s > 0, "scale: --device-images-per-s must be positive, not ", images_per_s);
  KILN_CHECK(p.step_ms() > 0, "scale: the profile of ", p.model, " has no time to rescale");
  const double target_ms = double(p.batch) * 1000.0 / images_per_s;
  DeviceProfile q = scaled(p, target_ms / p.step_ms());
  q.device += " (calibrated)";
  return q;
}

// --- links ---------------------------------------------------------------------------------

const std::vector<LinkPreset>& link_presets() {
  // Achieved bandwidth = nominal one-direction rate x an efficiency factor: 0.75 for PCIe (TLP
  // and DMA overhead: x16 gen3 moves ~12 of 15.75 GB/s in cudaMemcpy / nccl-tests), 0.7 for
  // NVLink rings (nccl-tests busbw on DGX-1 class machines), 0.9 for InfiniBand verbs
  // (ib_write_bw reaches ~90% of the signalling rate), 0.85 for RoCE, 0.9 for 1 GbE TCP (~940
  // Mb/s goodput) and 0.7 for faster TCP Ethernet (one MPI/Gloo stream rarely fills 10-50 Gb/s).
  // Latency is per ring step with the software stack (NCCL/MPI), not the wire's: ~5 us over
  // NVLink/PCIe/IB, ~10 us RoCE, tens of us for kernel TCP.
  static const std::vector<LinkPreset> presets = {
      {"nvlink-p100", {4 * 20.0 * 0.7, 5}, "NVLink 1.0 on DGX-1 P100: 4 links x 20 GB/s per direction x 0.7"},
      {"nvlink-v100", {6 * 25.0 * 0.7, 5}, "NVLink 2.0 on DGX-1/SXM2 V100: 6 links x 25 GB/s per direction x 0.7"},
      {"pcie3", {15.75 * 0.75, 8}, "PCIe 3.0 x16: 15.75 GB/s per direction x 0.75"},
      {"pcie4", {31.5 * 0.75, 8}, "PCIe 4.0 x16: 31.5 GB/s per direction x 0.75"},
      {"ib-fdr", {7.0 * 0.9, 5}, "InfiniBand FDR 4x: 56 Gb/s = 7 GB/s x 0.9"},
      {"ib-edr", {12.5 * 0.9, 5}, "InfiniBand EDR 4x: 100 Gb/s = 12.5 GB/s x 0.9"},
      {"ipoib-edr", {12.5 * 0.25, 30}, "TCP over IPoIB on EDR (MPI with its openib transport off): 12.5 GB/s x 0.25"},
      {"ib-hdr", {25.0 * 0.9, 5}, "InfiniBand HDR 4x: 200 Gb/s = 25 GB/s x 0.9"},
      {"roce-25", {3.125 * 0.85, 10}, "RoCE over 25 GbE: 3.125 GB/s x 0.85"},
      {"roce-40", {5.0 * 0.85, 10}, "RoCE over 40 GbE: 5 GB/s x 0.85"},
      {"eth-1g", {0.125 * 0.9, 50}, "1 GbE TCP: 0.125 GB/s x 0.9"},
      {"eth-10g", {1.25 * 0.7, 30}, "10 GbE TCP: 1.25 GB/s x 0.7"},
      {"eth-25g", {3.125 * 0.7, 25}, "25 GbE TCP: 3.125 GB/s x 0.7"},
      {"eth-50g", {6.25 * 0.7, 25}, "50 GbE TCP: 6.25 GB/s x 0.7"},
  };
  return presets;
}

Link link_preset(const std::string& name) {
  std::string known;
  for (const LinkPreset& p : link_presets()) {
    if (p.name == name) return p.link;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  KILN_THROW("unknown network '", name, "' (known: ", known, ")");
}

Algorithm algorithm_from_name(const std::string& name) {
  if (name == "ring") return Algorithm::ring;
  if (name == "hierarchical" || name == "hier") return Algorithm::hierarchical;
  if (name == "tree") return Algorithm::tree;
  if (name == "ps") return Algorithm::ps;
  if (name == "ps-hier") return Algorithm::ps_hier;
  KILN_THROW("unknown all-reduce algorithm '", name, "' (known: ring, hierarchical, tree, ps, ps-hier)");
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::tree: return "tree";
    case Algorithm::ps: return "ps";
    case Algorithm::ps_hier: return "ps-hier";
  }
  return "?";
}

// --- costs ---------------------------------------------------------------------------------

namespace {

double transfer_ms(double bytes, const Link& l) {
  KILN_CHECK(l.gb_per_s > 0, "scale: a link's bandwidth must be positive, not ", l.gb_per_s, " GB/s");
  return bytes / (l.gb_per_s * 1e6);  // GB/s = 1e6 bytes per ms
}
double lat_ms(const Link& l) { return l.latency_us * 1e-3; }

// A ring of n over one kind of link: reduce-scatter then allgather, 2(n-1) steps of B/n each.
double ring_ms(double bytes, int n, const Link& l) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) / n * transfer_ms(bytes, l) + 2.0 * (n - 1) * lat_ms(l);
}

// The link a collective spanning nodes is paced by: the slower bandwidth, the larger latency.
Link slowest(const Network& net, int per_node, int nodes) {
  if (nodes <= 1) return net.intra;
  if (per_node <= 1) return net.inter;
  return Link{std::min(net.intra.gb_per_s, net.inter.gb_per_s), std::max(net.intra.latency_us, net.inter.latency_us)};
}

double ps_ms(double bytes, int gpus, int nodes, int per_node, const Network& net, int servers) {
  const int k = servers > 0 ? servers : nodes;
  // Servers are placed round-robin over nodes; workers fill nodes in order.
  std::vector<int> servers_on(size_t(nodes), 0), workers_on(size_t(nodes), 0);
  for (int s = 0; s < k; ++s) servers_on[size_t(s % nodes)]++;
  for (int w = 0; w < gpus; ++w) workers_on[size_t(std::min(w / per_node, nodes - 1))]++;
  const double share = bytes / k;
  // Push: every worker sends B/K to every server. A node's NIC sends what its workers send to
  // servers elsewhere and receives what workers elsewhere send to its servers (full duplex, so
  // the larger of the two); within a node the server's host link takes its local workers' shares.
  double nic = 0, host = 0;
  for (int j = 0; j < nodes; ++j) {
    const double out = workers_on[size_t(j)] * share * (k - servers_on[size_t(j)]);
    const double in = servers_on[size_t(j)] * share * (gpus - workers_on[size_t(j)]);
    nic = std::max(nic, std::max(out, in));
    if (servers_on[size_t(j)] > 0) host = std::max(host, workers_on[size_t(j)] * share);
  }
  const double push = std::max(nodes > 1 ? transfer_ms(nic, net.inter) : 0.0, transfer_ms(host, net.intra));
  const double lat = nodes > 1 ? lat_ms(net.inter) : lat_ms(net.intra);
  return 2.0 * (push + lat);  // pull mirrors push
}

}  // namespace

double allreduce_ms(int64_t bytes, int gpus, int nodes, const Network& net, const ScaleOptions& o) {
  KILN_CHECK(gpus >= 1 && gpus <= kMaxGpus && nodes >= 1 && nodes <= gpus, "scale: ", gpus, " GPUs on ", nodes,
             " nodes (need 1 <= nodes <= GPUs <= ", kMaxGpus, ")");
  KILN_CHECK(o.ps_servers >= 0 && o.ps_servers <= gpus, "scale: ", o.ps_servers,
             " parameter servers for ", gpus, " GPUs (need 0 <= servers <= GPUs)");
  if (bytes == 0) return 0;
  const int per_node = (gpus + nodes - 1) / nodes;
  const double b = double(bytes);
  // Parameter servers on the host serve one GPU too: its gradients go out and the variables come
  // back every step (tf_cnn_benchmarks' local_parameter_device=cpu).
  if (o.algorithm == Algorithm::ps) return ps_ms(b, gpus, nodes, per_node, net, o.ps_servers);
  if (gpus == 1) return 0;
  switch (o.algorithm) {
    case Algorithm::ring:
      return ring_ms(b, gpus, slowest(net, per_node, nodes));
    case Algorithm::hierarchical: {
      if (nodes == 1) return ring_ms(b, gpus, net.intra);
      // Reduce-scatter and allgather in the node are half a ring each; the g rings over nodes
      // (one per GPU, on B/g each) share the node's NIC, which so carries 2 (N-1)/N B.
      const double in_node = ring_ms(b, per_node, net.intra);
      return in_node + ring_ms(b, nodes, net.inter);
    }
    case Algorithm::tree: {
      const Link l = slowest(net, per_node, nodes);
      const double depth = std::ceil(std::log2(double(gpus)));
      return 2.0 * depth * (lat_ms(l) + transfer_ms(b, l));
    }
    case Algorithm::ps:
      return ps_ms(b, gpus, nodes, per_node, net, o.ps_servers);
    case Algorithm::ps_hier: {
      // Within a node the replicas are reduced (and later broadcast) over the node's links; then
      // each node is one worker of the parameter servers.
      const double in_node = ring_ms(b, per_node, net.intra);
      return in_node + (nodes > 1 ? ps_ms(b, nodes, nodes, 1, net, o.ps_servers) : 0.0);
    }
  }
  return 0;
}

double expected_max_normal(int n) {
  if (n <= 1) return 0;
  // Blom: E[max] ~ Phi^-1((n - 0.375) / (n + 0.25)); the inverse normal by Acklam's rational
  // approximation (relative error < 1.2e-9), upper region only since the argument is > 0.5.
  const double p = (n - 0.375) / (n + 0.25);
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  if (p <= 0.97575) {
    const double q = p - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double q = std::sqrt(-2 * std::log(1 - p));
  return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
         ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
}

void apply_effect(ScaleOptions& o, const std::string& name, double value) {
  auto in = [&](double lo, double hi) {
    KILN_CHECK(std::isfinite(value) && value >= lo && value <= hi, "scale: effect ", name, "=", value,
               " is not in [", lo, ", ", hi, "]");
    return value;
  };
  if (name == "jitter") o.jitter = in(0, 10);
  else if (name == "node_jitter") o.node_jitter = in(0, 10);
  else if (name == "cycle_ms") o.cycle_ms = in(0, 1e6);
  else if (name == "bucket_mb") o.bucket_mb = in(1e-6, 1 << 16);
  else if (name == "fixed_ms") o.fixed_ms = in(0, 1e9);
  else if (name == "overlap") o.overlap = in(0, 1) != 0;
  else
    KILN_THROW("scale: unknown effect '", name, "' (known: jitter, node_jitter, cycle_ms, bucket_mb, fixed_ms, overlap)");
}

// --- simulation ----------------------------------------------------------------------------

namespace {

struct Ready {
  double at_ms;
  int64_t bytes;
};

// When each gradient is final: backward runs the layers in order after forward. Kept apart from
// the bucketing so that a step computes it once, not once per phase of the fusion cycle.
std::vector<Ready> ready_times(const DeviceProfile& p) {
  std::vector<Ready> ready;
  double t = p.forward_ms() + p.other_ms;
  for (const LayerProfile& l : p.layers) {
    t += l.backward_ms;
    if (l.grad_bytes > 0) ready.push_back({t, l.grad_bytes});
  }
  return ready;
}

void check_buckets(double bucket_mb, double cycle_ms) {
  KILN_CHECK(bucket_mb > 0, "scale: --bucket-mb must be positive, not ", bucket_mb);
  KILN_CHECK(std::isfinite(cycle_ms) && cycle_ms >= 0, "scale: --cycle-ms must be >= 0, not ", cycle_ms);
}

std::vector<Bucket> fill_buckets(const std::vector<Ready>& ready, double bucket_mb, double cycle_ms, double phase_ms) {
  const double cap = bucket_mb * 1024 * 1024;
  std::vector<Bucket> buckets;
  if (cycle_ms > 0) {
    // Horovod's background thread: at each tick it fuses what is ready, in buffers of at most the
    // threshold (a gradient larger than it goes alone). Ticks with nothing ready are skipped.
    double tick = phase_ms;
    for (size_t i = 0; i < ready.size();) {
      if (ready[i].at_ms > tick) tick = phase_ms + std::ceil((ready[i].at_ms - phase_ms) / cycle_ms) * cycle_ms;
      Bucket b;
      while (i < ready.size() && ready[i].at_ms <= tick && (b.bytes == 0 || double(b.bytes + ready[i].bytes) <= cap)) {
        b.bytes += ready[i].bytes;
        b.layers++;
        ++i;
      }
      b.ready_ms = tick;
      buckets.push_back(b);
    }
    return buckets;
  }
  Bucket cur;
  for (const Ready& r : ready) {
    cur.bytes += r.bytes;
    cur.layers++;
    cur.ready_ms = r.at_ms;
    if (double(cur.bytes) >= cap) {
      buckets.push_back(cur);
      cur = Bucket{};
    }
  }
  if (cur.bytes > 0) buckets.push_back(cur);
  return buckets;
}

}  // namespace

std::vector<Bucket> make_buckets(const DeviceProfile& p, double bucket_mb, double cycle_ms, double phase_ms) {
  check_buckets(bucket_mb, cycle_ms);
  return fill_buckets(ready_times(p), bucket_mb, cycle_ms, phase_ms);
}

StepPrediction simulate_step(const DeviceProfile& profile, int gpus, int nodes, const Network& net,
                             const ScaleOptions& o) {
  KILN_CHECK(profile.batch > 0, "scale: the profile of '", profile.model, "' has no batch size");
  KILN_CHECK(std::isfinite(o.jitter) && o.jitter >= 0 && o.jitter <= 10, "scale: --jitter must be in [0, 10], not ",
             o.jitter);
  KILN_CHECK(std::isfinite(o.node_jitter) && o.node_jitter >= 0 && o.node_jitter <= 10,
             "scale: --node-jitter must be in [0, 10], not ", o.node_jitter);
  KILN_CHECK(std::isfinite(o.fixed_ms) && o.fixed_ms >= 0, "scale: --fixed-ms must be >= 0, not ", o.fixed_ms);
  KILN_CHECK(gpus >= 1 && gpus <= kMaxGpus && nodes >= 1 && nodes <= gpus, "scale: ", gpus, " GPUs on ", nodes,
             " nodes (need 1 <= nodes <= GPUs <= ", kMaxGpus, ")");
  // The slowest rank paces every bucket: its compute stretched by the expected straggle, among
  // GPUs and among nodes.
  const double stretch = 1 + o.jitter * expected_max_normal(gpus) + o.node_jitter * expected_max_normal(nodes);
  const DeviceProfile& p = stretch == 1 ? profile : scaled(profile, stretch);
  const double backward_end = p.forward_ms() + p.other_ms + p.backward_ms();
  // Parameter servers: a bucket's push (half its cost) overlaps backward, but the variables are
  // pulled back before the next forward reads them, and nothing overlaps that half.
  const bool pull_after = o.algorithm == Algorithm::ps || o.algorithm == Algorithm::ps_hier;
  check_buckets(o.bucket_mb, o.cycle_ms);
  const std::vector<Ready> ready = ready_times(p);
  auto one_step = [&](double phase_ms) {
    StepPrediction s;
    s.gpus = gpus;
    s.nodes = nodes;
    s.backward_end_ms = backward_end;
    s.buckets = fill_buckets(ready, o.bucket_mb, o.cycle_ms, phase_ms);
    double channel_free = 0, pull_ms = 0;
    for (Bucket& b : s.buckets) {
      const double cost = allreduce_ms(b.bytes, gpus, nodes, net, o);
      const double on_channel = pull_after ? cost / 2 : cost;
      pull_ms += cost - on_channel;
      b.start_ms = std::max(o.overlap ? b.ready_ms : backward_end, channel_free);
      b.end_ms = b.start_ms + on_channel;
      channel_free = b.end_ms;
      s.comm_ms += cost;
    }
    const double ready = std::max(backward_end, channel_free) + pull_ms;
    s.exposed_comm_ms = ready - backward_end;
    s.step_ms = ready + p.optimizer_ms + o.fixed_ms;
    return s;
  };
  StepPrediction s;
  if (o.cycle_ms > 0) {
    // The fusion cycle runs on its own clock, not the step's: the mean over the ticks' phase
    // (kPhases evenly spaced), which also keeps the prediction continuous in the device speed.
    constexpr int kPhases = 64;
    double step = 0, comm = 0, exposed = 0;
    for (int k = 0; k < kPhases; ++k) {
      const StepPrediction x = one_step((k + 0.5) / kPhases * o.cycle_ms);
      step += x.step_ms / kPhases;
      comm += x.comm_ms / kPhases;
      exposed += x.exposed_comm_ms / kPhases;
      if (k == kPhases / 2) s = x;  // its buckets stand for the others
    }
    s.step_ms = step;
    s.comm_ms = comm;
    s.exposed_comm_ms = exposed;
  } else {
    s = one_step(0);
  }
  s.images_per_s = double(gpus) * double(p.batch) * 1000.0 / s.step_ms;
  return s;
}

}  // namespace kiln::dist
