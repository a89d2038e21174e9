// `kiln scale`: predicted images/s and efficiency of synchronous data parallelism against the
// number of GPUs and nodes, from a one-device profile and a network (dist/scale.h).
//   kiln scale --model resnet50 --batch 64 --device-images-per-s 219 --intra nvlink-p100 --inter ib-edr
//   kiln scale --compare horovod-p100          # predicted beside a published table (dist/reference/scaling.csv)
//   kiln scale --profile p.json --inter eth-10g --gpus 1,8,64 --json out.json
// The profile is measured on this machine's CPU with the benchmark's per-layer profiler (kiln
// bench --layers), or read with --profile; --save-profile writes it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/harness/convnet.h"
#include "dist/scale.h"
#include "engine/optim.h"
#include "engine/profiler.h"
#include "io/formats/digest.h"
#include "nets/zoo.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/flag_checks.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR ""
#endif

namespace kiln::cli {
namespace {

struct ScaleCliOptions {
  std::string model = "resnet50", profile, save_profile, json, compare, reference, gpus = "1,2,4,8,16,32,64";
  std::string intra = "nvlink-v100", inter = "ib-edr", algorithm = "ring";
  int64_t batch = 0, measure_batch = 0;
  double device_ips = 0, bucket_mb = 25, jitter = 0, node_jitter = 0, cycle_ms = 0, fixed_ms = 0;
  double intra_bw = 0, intra_lat = 0, inter_bw = 0, inter_lat = 0;  // overrides when given (see the *_opt)
  int gpus_per_node = 8, ps_servers = 0, iters = 3, warmup = 1, threads = 0;
  bool no_overlap = false, list = false, details = false, measure_here = false;
  CLI::Option* algorithm_opt = nullptr;
  // The flags that are also a published table's effects: given, they win over the table's value.
  std::map<std::string, CLI::Option*> effect_opts;
  CLI::Option *intra_bw_opt = nullptr, *intra_lat_opt = nullptr, *inter_bw_opt = nullptr, *inter_lat_opt = nullptr;
};

const Module* find_module(const Module& m, const std::string& path) {
  if (m.path() == path) return &m;
  for (const auto& [name, child] : m.children())
    if (const Module* f = find_module(*child, path)) return f;
  return nullptr;
}

int64_t own_parameter_bytes(const Module& m) {
  int64_t n = 0;
  for (const auto& [name, t] : m.named_parameters(false)) n += t.numel() * 4;  // float32 gradients (master weights stay float32 in mixed precision)
  return n;
}

// Times one SGD-with-momentum step over the net's parameters (gradients set to zeros): the
// optimizer part of a data-parallel step.
double time_optimizer_ms(Module& net) {
  for (Tensor p : net.parameters()) p.set_grad(zeros_like(p));
  optim::SGDOptions so;
  so.momentum = 0.9;
  auto opt = optim::sgd(net.named_parameters(), so);
  opt->step();  // allocates the momentum buffers
  std::vector<double> ms;
  for (int i = 0; i < 3; ++i) {
    const int64_t t0 = profiler::now_ns();
    opt->step();
    ms.push_back(double(profiler::now_ns() - t0) * 1e-6);
  }
  std::sort(ms.begin(), ms.end());
  net.zero_grad();
  return ms[1];
}

// The per-layer profile of `kiln bench --layers` (one code path with the benchmark), as a
// scaling profile: leaf layers in backward order with their gradient bytes.
dist::DeviceProfile measure(const ScaleCliOptions& o, int64_t batch) {
  const nets::NetInfo& info = nets::find(o.model);
  ModulePtr net = info.build(nets::NetOptions{});
  bench::RunSpec spec;
  spec.model = o.model;
  spec.batch = batch;
  spec.train = true;
  spec.layers = true;
  spec.iters = o.iters;
  spec.warmup = o.warmup;
  spec.threads = o.threads;
  bench::validate(spec);
  std::fprintf(stderr, "kiln scale: measuring %s at batch %lld on the CPU (%d timed steps)...\n", o.model.c_str(),
               static_cast<long long>(batch), o.iters);
  const bench::RunResult r = bench::run(*net, info.input, spec);
  dist::DeviceProfile p;
  p.model = o.model;
  p.batch = batch;
  p.device = "cpu, " + std::to_string(r.threads) + " threads";
  double container_bwd = 0, leaf_bwd = 0;
  int64_t assigned = 0;
  for (const bench::LayerRow& l : r.layers) {
    if (l.name == "(containers)") {
      p.other_ms += l.forward_ms;
      container_bwd += l.backward_ms;
    } else if (l.name == "(outside layers)") {
      p.other_ms += l.forward_ms + l.backward_ms;
    } else {
      const Module* m = find_module(*net, l.name);
      dist::LayerProfile lp{l.name, l.forward_ms, l.backward_ms, m ? own_parameter_bytes(*m) : 0};
      assigned += lp.grad_bytes;
      leaf_bwd += l.backward_ms;
      p.layers.push_back(lp);
    }
  }
  // Parameters of containers (rare) are final when backward ends: a last zero-time layer.
  const int64_t total = net->num_parameters() * 4;
  if (total > assigned) p.layers.insert(p.layers.begin(), dist::LayerProfile{"(container parameters)", 0, 0, total - assigned});
  std::reverse(p.layers.begin(), p.layers.end());
  // Residual adds and concatenations: their backward spread over the layers in proportion, so the
  // shape of backward stays that of the layers.
  if (leaf_bwd > 0)
    for (dist::LayerProfile& l : p.layers) l.backward_ms *= 1 + container_bwd / leaf_bwd;
  p.optimizer_ms = time_optimizer_ms(*net);
  return p;
}

std::string reference_root() {
  const char* env = std::getenv("KILN_SOURCE_DIR");
  return (env && *env ? env : KILN_SOURCE_DIR) + std::string("/dist/reference");
}

std::string reference_path(const ScaleCliOptions& o) {
  if (!o.reference.empty()) return o.reference;
  return reference_root() + "/scaling.csv";
}

// The profile to use: --profile, else one measured here with --measure, else the one shipped for
// the model (dist/reference/profiles/<model>-cpu-b32.json): measuring ResNet-50 takes most of a
// minute and GBs of memory, and after calibration only the profile's shape matters.
dist::DeviceProfile pick_profile(const ScaleCliOptions& o, const std::string& model, int64_t measure_batch) {
  if (!o.profile.empty()) return dist::load_profile(o.profile);
  if (o.measure_here) {
    ScaleCliOptions mo = o;
    mo.model = model;
    return measure(mo, measure_batch);
  }
  const std::string shipped = reference_root() + "/profiles/" + model + "-cpu-b32.json";
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(shipped, ec), "kiln scale: no shipped profile for '", model, "' (", shipped,
             "); pass --measure to measure one on this CPU, or --profile FILE");
  std::printf("profile: shipped %s (--measure measures one here)\n", shipped.c_str());
  return dist::load_profile(shipped);
}

dist::ScaleOptions scale_options(const ScaleCliOptions& o) {
  dist::ScaleOptions so;
  so.bucket_mb = o.bucket_mb;
  so.overlap = !o.no_overlap;
  so.algorithm = dist::algorithm_from_name(o.algorithm);
  so.ps_servers = o.ps_servers;
  so.jitter = o.jitter;
  so.node_jitter = o.node_jitter;
  so.cycle_ms = o.cycle_ms;
  so.fixed_ms = o.fixed_ms;
  return so;
}

void print_profile_summary(const dist::DeviceProfile& p) {
  std::printf("profile: %s, batch %lld, %s: forward %.1f ms, backward %.1f ms, other %.1f ms, optimizer %.1f ms; "
              "%zu layers, %.1f MB of gradients\n",
              p.model.c_str(), static_cast<long long>(p.batch), p.device.c_str(), p.forward_ms(), p.backward_ms(),
              p.other_ms, p.optimizer_ms, p.layers.size(), double(p.grad_bytes()) / 1e6);
}

nlohmann::ordered_json prediction_json(const dist::StepPrediction& s) {
  return {{"gpus", s.gpus},       {"nodes", s.nodes},         {"step_ms", s.step_ms},
          {"comm_ms", s.comm_ms}, {"exposed_comm_ms", s.exposed_comm_ms}, {"buckets", s.buckets.size()},
          {"images_per_s", s.images_per_s}};
}

void write_json(const std::string& path, const nlohmann::ordered_json& j) {
  try {
    io::write_file_atomic(path, j.dump(2) + "\n");
  } catch (const Error& e) {
    KILN_THROW("--json: ", e.message().empty() ? std::string(e.what()) : e.message());
  }
  std::printf("wrote %s\n", path.c_str());
}

int run_compare(const ScaleCliOptions& o) {
  const std::string ref = reference_path(o);
  std::vector<dist::ReferenceRow> all = dist::load_reference(ref), table;
  // A table by its name, else by a prefix of it or by its source id ("kit", "S1") when that
  // picks exactly one table.
  std::vector<std::string> names, picked;
  for (const dist::ReferenceRow& r : all)
    if (std::find(names.begin(), names.end(), r.table) == names.end()) names.push_back(r.table);
  for (const dist::ReferenceRow& r : all)
    if ((r.table.rfind(o.compare, 0) == 0 || r.source == o.compare) &&
        std::find(picked.begin(), picked.end(), r.table) == picked.end())
      picked.push_back(r.table);
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  std::string name = o.compare;
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string matches;
    for (const std::string& n : picked) matches += (matches.empty() ? "" : ", ") + n;
    KILN_CHECK(picked.size() == 1, "--compare: ", picked.empty() ? "no table '" : "more than one table for '", o.compare,
               "' in ", ref, " (", picked.empty() ? "known: " + known : "matches: " + matches, ")");
    name = picked.front();
  }
  for (const dist::ReferenceRow& r : all)
    if (r.table == name) table.push_back(r);
  if (o.algorithm_opt->count())  // one algorithm for every row instead of each row's own
    for (dist::ReferenceRow& r : table) r.algorithm = o.algorithm;
  // A flag given on the command line replaces the table's effect of that name.
  for (dist::ReferenceRow& r : table)
    r.effects.erase(std::remove_if(r.effects.begin(), r.effects.end(),
                                   [&](const dist::TableEffect& e) {
                                     auto it = o.effect_opts.find(e.name);
                                     return it != o.effect_opts.end() && it->second->count() > 0;
                                   }),
                    r.effects.end());
  int64_t base_batch = table.front().batch;
  for (const dist::ReferenceRow& r : table) base_batch = std::max(base_batch, r.batch);
  ScaleCliOptions mo = o;
  mo.model = table.front().model;
  // Only the profile's shape matters after calibration: measure at no more than 32 per step to
  // keep the CPU run under a minute for ResNet-50.
  const int64_t measure_batch = o.measure_batch > 0 ? o.measure_batch : std::min<int64_t>(base_batch, 32);
  dist::DeviceProfile p = pick_profile(o, mo.model, measure_batch);
  if (!o.save_profile.empty()) dist::save_profile(p, o.save_profile);
  print_profile_summary(p);
  const dist::ComparisonResult c = dist::compare_table(p, table, scale_options(o));
  std::printf("table %s: %s [%s, %s]\n", name.c_str(),
              table.front().publication.empty() ? "(no publication named)" : table.front().publication.c_str(),
              table.front().source.c_str(), ref.c_str());
  const dist::ScaleOptions& used = c.options;
  std::printf("effects (what the published runs had that the bare model leaves out; a flag given wins):\n");
  if (table.front().effects.empty()) std::printf("  none\n");
  for (const dist::TableEffect& e : table.front().effects)
    std::printf("  %-12s %-8g %s\n", e.name.c_str(), e.value, e.source.c_str());
  std::printf("calibrated one %s = %.1f images/s at batch %lld (compute alone); bucket %g MB, cycle %g ms, overlap %s, "
              "jitter %.3g per GPU + %.3g per node, fixed %g ms per step\n",
              table.front().gpu.c_str(), c.device_images_per_s, static_cast<long long>(table.front().batch),
              used.bucket_mb, used.cycle_ms, used.overlap ? "on" : "off", used.jitter, used.node_jitter, used.fixed_ms);
  std::printf("%5s %5s %5s %-12s %-7s %-7s %9s %9s %8s | %10s %8s | %10s %8s %7s\n", "gpus", "nodes", "batch",
              "algorithm", "intra", "inter", "step ms", "comm ms", "exposed", "pred img/s", "pred eff", "pub img/s",
              "pub eff", "d eff");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const dist::Comparison& x : c.rows) {
    const dist::StepPrediction& s = x.predicted;
    std::printf("%5d %5d %5lld %-12s %-7s %-7s %9.1f %9.1f %8.1f | %10.1f %7.1f%% | %10.1f %7.1f%% %+6.1f\n", s.gpus,
                s.nodes, static_cast<long long>(x.row.batch), x.row.algorithm.c_str(), x.row.intra.c_str(),
                x.row.inter.c_str(), s.step_ms, s.comm_ms, s.exposed_comm_ms, s.images_per_s,
                100 * x.predicted_efficiency, x.row.images_per_s, 100 * x.published_efficiency,
                100 * (x.predicted_efficiency - x.published_efficiency));
    nlohmann::ordered_json j = prediction_json(s);
    j["batch"] = x.row.batch;
    j["algorithm"] = x.row.algorithm;
    j["efficiency"] = x.predicted_efficiency;
    j["published_images_per_s"] = x.row.images_per_s;
    j["published_efficiency"] = x.published_efficiency;
    j["source"] = x.row.source;
    j["publication"] = x.row.publication;
    rows.push_back(j);
  }
  nlohmann::ordered_json effects = nlohmann::ordered_json::array();
  for (const dist::TableEffect& e : table.front().effects)
    effects.push_back({{"name", e.name}, {"value", e.value}, {"source", e.source}});
  std::printf("efficiency: images/s per GPU relative to the table's fewest-GPU row (predicted and published alike)\n");
  if (!o.json.empty())
    write_json(o.json, {{"table", name},
                        {"device_images_per_s", c.device_images_per_s},
                        {"profile", nlohmann::ordered_json::parse(dist::profile_to_json(p))},
                        {"effects", effects},
                        {"rows", rows}});
  return 0;
}

int run_scale(const ScaleCliOptions& o) {
  if (!o.json.empty()) check_output_path(o.json, "--json");
  if (!o.save_profile.empty()) check_output_path(o.save_profile, "--save-profile");
  if (o.list) {
    for (const dist::LinkPreset& p : dist::link_presets())
      std::printf("%-12s %7.2f GB/s %5.1f us   %s\n", p.name.c_str(), p.link.gb_per_s, p.link.latency_us,
                  p.basis.c_str());
    return 0;
  }
  if (!o.compare.empty()) return run_compare(o);
  dist::Network net{dist::link_preset(o.intra), dist::link_preset(o.inter)};
  if (o.intra_bw_opt->count()) net.intra.gb_per_s = o.intra_bw;
  if (o.intra_lat_opt->count()) net.intra.latency_us = o.intra_lat;
  if (o.inter_bw_opt->count()) net.inter.gb_per_s = o.inter_bw;
  if (o.inter_lat_opt->count()) net.inter.latency_us = o.inter_lat;
  KILN_CHECK(o.gpus_per_node >= 1 && o.gpus_per_node <= dist::kMaxGpusPerNode, "--gpus-per-node: ", o.gpus_per_node,
             " is not in [1, ", dist::kMaxGpusPerNode, "]");
  dist::DeviceProfile p;
  if (o.profile.empty() && o.measure_here) {
    const int64_t batch = o.batch > 0 ? o.batch : bench::default_batch(o.model);
    p = dist::at_batch(pick_profile(o, o.model, o.measure_batch > 0 ? o.measure_batch : batch), batch);
  } else {
    p = pick_profile(o, o.model, 0);
    if (o.batch > 0) p = dist::at_batch(p, o.batch);
  }
  if (!o.save_profile.empty()) dist::save_profile(p, o.save_profile);
  if (o.device_ips > 0) p = dist::calibrated(p, o.device_ips);
  print_profile_summary(p);
  const dist::ScaleOptions so = scale_options(o);
  std::printf("network: intra %.2f GB/s %.1f us, inter %.2f GB/s %.1f us, %d GPUs per node; %s, bucket %.0f MB, "
              "overlap %s\n",
              net.intra.gb_per_s, net.intra.latency_us, net.inter.gb_per_s, net.inter.latency_us, o.gpus_per_node,
              dist::algorithm_name(so.algorithm), so.bucket_mb, so.overlap ? "on" : "off");
  std::printf("%5s %5s %8s %9s %9s %9s %10s %7s\n", "gpus", "nodes", "buckets", "step ms", "comm ms", "exposed",
              "images/s", "eff");
  double one = 0;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const std::string& g : split_list(o.gpus)) {
    const int n = int(parse_whole(g, "--gpus", 1, dist::kMaxGpus));
    const int nodes = (n + o.gpus_per_node - 1) / o.gpus_per_node;
    const dist::StepPrediction s = dist::simulate_step(p, n, nodes, net, so);
    if (one == 0) one = dist::simulate_step(p, 1, 1, net, so).images_per_s;
    const double eff = s.images_per_s / (n * one);
    std::printf("%5d %5d %8zu %9.1f %9.1f %9.1f %10.1f %6.1f%%\n", n, nodes, s.buckets.size(), s.step_ms, s.comm_ms,
                s.exposed_comm_ms, s.images_per_s, 100 * eff);
    nlohmann::ordered_json j = prediction_json(s);
    j["efficiency"] = eff;
    rows.push_back(j);
  }
  if (!o.json.empty())
    write_json(o.json, {{"profile", nlohmann::ordered_json::parse(dist::profile_to_json(p))},
                        {"network",
                         {{"intra_gb_per_s", net.intra.gb_per_s}, {"intra_latency_us", net.intra.latency_us},
                          {"inter_gb_per_s", net.inter.gb_per_s}, {"inter_latency_us", net.inter.latency_us},
                          {"gpus_per_node", o.gpus_per_node}, {"algorithm", dist::algorithm_name(so.algorithm)},
                          {"bucket_mb", so.bucket_mb}, {"overlap", so.overlap}}},
                        {"rows", rows}});
  return 0;
}

}  // namespace

Command add_scale(CLI::App& app) {
  auto o = std::make_shared<ScaleCliOptions>();
  CLI::App* sub = app.add_subcommand("scale", "predict data-parallel images/s and efficiency over GPUs and nodes");
  sub->add_option("--model", o->model, "zoo net to measure (default resnet50)");
  sub->add_option("--batch", o->batch, "batch per GPU (default: the net's benchmark batch)")->check(whole(0, kMaxBatch));
  sub->add_option("--measure-batch", o->measure_batch, "batch to measure at; times are scaled linearly to --batch (--compare: min(table batch, 32))")
      ->check(whole(0, kMaxBatch));
  sub->add_option("--profile", o->profile, "read the one-device profile from this JSON (default: the one shipped for the model)");
  sub->add_flag("--measure", o->measure_here, "measure the profile on this CPU (kiln bench --layers; ResNet-50: most of a minute)");
  sub->add_option("--save-profile", o->save_profile, "write the profile (as measured or read) to this JSON");
  sub->add_option("--device-images-per-s", o->device_ips,
                  "calibrate: rescale the profile so one device gives this many images/s (a published figure)")
      ->check(real(0, 1e9));
  sub->add_option("--intra", o->intra, "link between GPUs of a node (--list-networks)");
  sub->add_option("--inter", o->inter, "link between nodes (--list-networks)");
  o->intra_bw_opt = sub->add_option("--intra-bw", o->intra_bw, "override the intra-node bandwidth, GB/s")
                        ->check(real(0, 1e6, true, false));
  o->intra_lat_opt = sub->add_option("--intra-lat", o->intra_lat, "override the intra-node latency, us")
                         ->check(real(0, 1e9));
  o->inter_bw_opt = sub->add_option("--inter-bw", o->inter_bw, "override the inter-node bandwidth, GB/s")
                        ->check(real(0, 1e6, true, false));
  o->inter_lat_opt = sub->add_option("--inter-lat", o->inter_lat, "override the inter-node latency, us")
                         ->check(real(0, 1e9));
  sub->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node (default 8)")
      ->check(whole(1, dist::kMaxGpusPerNode));
  sub->add_option("--gpus", o->gpus, "GPU counts to predict (default 1,2,4,8,16,32,64)")
      ->check(whole_list(1, dist::kMaxGpus));
  o->effect_opts["bucket_mb"] = sub->add_option("--bucket-mb", o->bucket_mb, "fusion bucket size, MB (default 25)")
                                    ->check(real(0, 1 << 16, true, false));
  o->effect_opts["overlap"] = sub->add_flag("--no-overlap", o->no_overlap, "all-reduce only after backward ends");
  o->effect_opts["cycle_ms"] =
      sub->add_option("--cycle-ms", o->cycle_ms, "fuse what is ready at each tick of this cycle, as Horovod (default 0: off)")
          ->check(real(0, 1e6));
  o->effect_opts["fixed_ms"] = sub->add_option("--fixed-ms", o->fixed_ms, "per-step cost that does not scale with the batch, ms (default 0)")
                                   ->check(real(0, 1e9));
  o->algorithm_opt = sub->add_option("--algorithm", o->algorithm, "ring | hierarchical | tree | ps | ps-hier (default ring; --compare: each row's)");
  o->effect_opts["jitter"] =
      sub->add_option("--jitter", o->jitter,
                      "straggler model: coefficient of variation of a rank's compute time (default 0: none)")
          ->check(real(0, 10));
  o->effect_opts["node_jitter"] =
      sub->add_option("--node-jitter", o->node_jitter, "stragglers among nodes: the same per node (default 0: none)")
          ->check(real(0, 10));
  sub->add_option("--ps-servers", o->ps_servers, "ps: parameter servers (default one per node)")
      ->check(whole(0, dist::kMaxGpus));
  sub->add_option("--compare", o->compare,
                  "predict beside a published table: horovod-p100, kit-980ti-imagenet, kit-980ti-horovod, s3-horovod-v100, "
                  "s3-ddp-v100, s1-k80 (or a prefix naming one, or a source id)");
  sub->add_option("--reference", o->reference, "published tables (default dist/reference/scaling.csv in the source)");
  sub->add_option("--json", o->json, "write the predictions to this JSON");
  sub->add_option("--iters", o->iters, "timed steps when measuring (default 3)")->check(whole(1, 1000000));
  sub->add_option("--warmup", o->warmup, "untimed steps when measuring (default 1)")->check(whole(0, 1000000));
  sub->add_option("--threads", o->threads, "CPU threads when measuring (default: as set)")
      ->check(whole(0, kMaxThreads));
  sub->add_flag("--list-networks", o->list, "list the link presets and where their figures come from");
  return Command{sub, [o] { return run_scale(*o); }};
}

}  // namespace kiln::cli
