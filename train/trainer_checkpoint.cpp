// The Trainer's checkpoints: written (safetensors + JSON sidecar, pruned to the newest few) and
// read back with every value of the sidecar checked where it enters, for a bit-exact resume, also
// on another number of workers (elastic).
//   ctest --test-dir build -R e2e.test_train
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/random.h"
#include "io/formats/checkpoint.h"
#include "io/formats/json_limits.h"
#include "train/trainer_state.h"

namespace kiln::train {
namespace {

using json = nlohmann::json;

// A double as text with 17 digits: a JSON number round trip could lose the last bit.
std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string Trainer::save_checkpoint() {
  if (!strategy_->is_chief()) return "";  // one writer: the other ranks hold the same weights
  KILN_CHECK(!cfg_.checkpoint_dir.empty(), "Trainer::save_checkpoint: no checkpoint directory configured");
  make_dir(cfg_.checkpoint_dir, "--checkpoint-dir");
  // ps/async: the servers hold the optimizer state; this rank's optimizer takes it, whole, so the
  // checkpoint has it as a sync one does (and a resume on any number of servers can share it out).
  dist::PsOptimizerState servers;
  dist::ParameterServers* ps = strategy_->parameter_servers();
  if (ps && ps->optimizer_state(&servers)) optimizer_->load_state(servers.json, servers.tensors);
  Checkpoint c;
  c.weights = model_->state_dict();
  c.optimizer = optimizer_->state_tensors();
  const Generator& g = default_generator();
  json j;
  j["format"] = "kiln-train/1";
  j["model"] = cfg_.model_name;
  j["data"] = cfg_.data_spec.empty() ? data_.name : cfg_.data_spec;
  j["step"] = step_;
  j["epoch"] = epoch_;
  j["batch_in_epoch"] = batch_in_epoch_;
  j["epochs"] = cfg_.epochs;
  j["batch_size"] = cfg_.batch_size;
  j["workers"] = strategy_->workers();  // with batch_size: the global batch an elastic resume keeps
  j["seed"] = cfg_.seed;
  j["schedule"] = cfg_.schedule;
  j["base_lr"] = cfg_.optimizer.lr;
  j["optimizer"] = json::parse(optimizer_->state_json());
  if (scaler_->enabled()) j["grad_scaler"] = json::parse(scaler_->state_json());
  // Doubles as text with 17 digits: a JSON number round trip could lose the last bit.
  j["epoch_sums"] = {fmt_double(loss_sum_), fmt_double(correct_sum_), fmt_double(seen_sum_)};
  j["rng"] = {{"seed", std::to_string(g.seed())}, {"offset", std::to_string(g.offset())}};
  c.state_json = j.dump(2);
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%08lld", (long long)step_);
  std::string prefix = cfg_.checkpoint_dir + "/" + name;
  kiln::save_checkpoint(prefix, c);
  last_checkpoint_ = prefix;
  prune_checkpoints();
  return prefix;
}

// The newest keep_checkpoints sets in the directory stay, whichever run wrote them (an earlier
// run's sets count too, or a directory reused across runs would fill the disk); never the one
// just written.
void Trainer::prune_checkpoints() {
  if (cfg_.keep_checkpoints <= 0) return;
  std::vector<std::string> sets = list_checkpoints(cfg_.checkpoint_dir);
  const auto newest = std::filesystem::path(last_checkpoint_ + ".json").filename();
  sets.erase(std::remove_if(sets.begin(), sets.end(),
                            [&](const std::string& p) { return std::filesystem::path(p).filename() == newest; }),
             sets.end());
  const size_t keep_others = size_t(cfg_.keep_checkpoints - 1);
  for (size_t i = 0; i + keep_others < sets.size(); ++i) remove_checkpoint(sets[i]);
}

namespace {

// Reads of a training checkpoint's state, each checked where it enters: a missing key, a wrong
// type or a value out of range is a kiln::Error naming the checkpoint, the key and the value
// (never a bare "stoull" or nlohmann type_error), so a damaged or edited sidecar cannot resume
// with step -1, a learning rate of 1e308 or a NaN loss sum.
class StateReader {
 public:
  StateReader(const json& j, const std::string& path) : j_(j), path_(path) {}

  const json& at(const json& obj, const std::string& key) const {
    KILN_CHECK(obj.is_object() && obj.contains(key), "checkpoint ", path_, ": the state has no \"", key, "\"");
    return obj[key];
  }
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const { return integer(j_, key, key, lo, hi); }
  int64_t integer(const json& obj, const std::string& key, const std::string& shown, int64_t lo, int64_t hi) const {
    const json& v = at(obj, key);
    KILN_CHECK(v.is_number_integer(), "checkpoint ", path_, ": \"", shown, "\" is ", io::clip_json(v), ", not an integer");
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
    KILN_CHECK(x >= lo && x <= hi, "checkpoint ", path_, ": \"", shown, "\" is ", io::clip_json(v), ", outside [", lo, ", ",
               hi, "]");
    return x;
  }
  double number(const json& obj, const std::string& key, const std::string& shown, double lo, double hi) const {
    const json& v = at(obj, key);
    KILN_CHECK(v.is_number(), "checkpoint ", path_, ": \"", shown, "\" is ", io::clip_json(v), ", not a number");
    const double x = v.get<double>();
    KILN_CHECK(std::isfinite(x) && x >= lo && x <= hi, "checkpoint ", path_, ": \"", shown, "\" is ", io::clip_json(v),
               ", outside [", lo, ", ", hi, "]");
    return x;
  }
  // Doubles and 64-bit integers the trainer writes as text (exact round trip): the whole string
  // must parse.
  double double_text(const json& v, const std::string& shown, double lo, double hi) const {
    KILN_CHECK(v.is_string(), "checkpoint ", path_, ": \"", shown, "\" is ", io::clip_json(v), ", not a number as text");
    const std::string t = v.get<std::string>();
    char* end = nullptr;
    errno = 0;
    const double x = t.empty() ? 0 : std::strtod(t.c_str(), &end);
    KILN_CHECK(!t.empty() && end == t.c_str() + t.size() && errno == 0 && std::isfinite(x) && x >= lo && x <= hi,
               "checkpoint ", path_, ": \"", shown, "\" is ", io::clip_json(v), ", not a finite number in [", lo, ", ", hi, "]");
    return x;
  }
  uint64_t u64_text(const json& v, const std::string& shown) const {
    KILN_CHECK(v.is_string(), "checkpoint ", path_, ": \"", shown, "\" is ", io::clip_json(v), ", not an integer as text");
    const std::string t = v.get<std::string>();
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(t.c_str(), &end, 10);
    KILN_CHECK(!t.empty() && std::isdigit(static_cast<unsigned char>(t[0])) && end == t.c_str() + t.size() && errno == 0,
               "checkpoint ",
               path_, ": \"", shown, "\" is ", io::clip_json(v), ", not an unsigned 64-bit integer");
    return uint64_t(x);
  }

 private:
  const json& j_;
  const std::string& path_;
};

// Larger counts than any run reaches, small enough that arithmetic on them cannot overflow.
constexpr int64_t kMaxCount = int64_t(1) << 52;

}  // namespace

void Trainer::load_checkpoint(const std::string& path) {
  Checkpoint c = kiln::load_checkpoint(path);
  json j = json::parse(c.state_json, nullptr, false);  // re-serialised by load_checkpoint: valid JSON
  KILN_CHECK(j.is_object(), "checkpoint ", path, ": the sidecar's state is not a JSON object");
  auto text = [&](const char* key) {
    if (!j.contains(key)) return std::string();
    KILN_CHECK(j[key].is_string(), "checkpoint ", path, ": \"", key, "\" is ", io::clip_json(j[key]), ", not a string");
    return j[key].get<std::string>();
  };
  KILN_CHECK(text("format") == "kiln-train/1", "checkpoint ", path, ": not a kiln training checkpoint (format '",
             text("format"), "')");
  const std::string model = text("model");
  KILN_CHECK(cfg_.model_name.empty() || model.empty() || model == cfg_.model_name, "checkpoint ", path, " is of model '",
             model, "', this run trains '", cfg_.model_name, "'");
  const StateReader r(j, path);
  const int64_t step = r.integer("step", 0, kMaxCount);
  const int64_t epoch = r.integer("epoch", 0, kMaxCount);
  const int64_t batch_in_epoch = r.integer("batch_in_epoch", 0, kMaxCount);
  if (j.contains("epochs")) r.integer("epochs", 1, kMaxCount);
  const int64_t saved_batch = j.contains("batch_size") ? r.integer("batch_size", 1, kMaxCount) : cfg_.batch_size;
  const int64_t saved_workers = j.contains("workers") ? r.integer("workers", 1, 1 << 24) : strategy_->workers();
  if (j.contains("seed")) r.integer("seed", 0, INT64_MAX);
  const double base_lr = j.contains("base_lr") ? r.number(j, "base_lr", "base_lr", 0, 1e6) : cfg_.optimizer.lr;
  // The optimizer's own state: its learning rate and step count are checked here (the optimizer
  // checks its hyper-parameters and tensors).
  const json& opt = r.at(j, "optimizer");
  KILN_CHECK(r.at(opt, "optimizer").is_string(), "checkpoint ", path, ": \"optimizer.optimizer\" is ",
             io::clip_json(opt["optimizer"]), ", not an optimizer name");
  r.number(opt, "lr", "optimizer.lr", 0, 1e6);
  r.integer(opt, "steps", "optimizer.steps", 0, kMaxCount);
  const json& counts = r.at(opt, "params");
  KILN_CHECK(counts.is_object(), "checkpoint ", path, ": \"optimizer.params\" is ", io::clip_json(counts), ", not an object");
  for (const auto& [k, v] : counts.items()) r.integer(counts, k, "optimizer.params." + k, 0, kMaxCount);
  if (opt.contains("hyper")) {
    KILN_CHECK(opt["hyper"].is_object(), "checkpoint ", path, ": \"optimizer.hyper\" is ", io::clip_json(opt["hyper"]),
               ", not an object");
    for (const auto& [k, v] : opt["hyper"].items()) r.number(opt["hyper"], k, "optimizer.hyper." + k, -1e6, 1e6);
  }
  if (j.contains("grad_scaler")) {
    const json& gs = j["grad_scaler"];
    r.number(gs, "scale", "grad_scaler.scale", 1e-38, 3.4e38);  // a float32 multiplier
    r.integer(gs, "growth_tracker", "grad_scaler.growth_tracker", 0, kMaxCount);
    for (const char* k : {"growth_factor", "backoff_factor", "growth_interval"})
      if (gs.contains(k)) r.number(gs, k, std::string("grad_scaler.") + k, 0, 1e9);
  }
  const json& sums = r.at(j, "epoch_sums");
  KILN_CHECK(sums.is_array() && sums.size() == 3, "checkpoint ", path, ": \"epoch_sums\" is ", io::clip_json(sums),
             ", not [loss, correct, seen]");
  const double loss_sum = r.double_text(sums[0], "epoch_sums[0]", 0, 1e300);
  const double seen_sum = r.double_text(sums[2], "epoch_sums[2]", 0, 1e18);
  const double correct_sum = r.double_text(sums[1], "epoch_sums[1]", 0, seen_sum);
  const json& rng = r.at(j, "rng");
  const uint64_t rng_seed = r.u64_text(r.at(rng, "seed"), "rng.seed");
  const uint64_t rng_offset = r.u64_text(r.at(rng, "offset"), "rng.offset");

  // Elastic resume: another number of workers continues the same global batch schedule. Each
  // epoch's order is one permutation whatever the workers; worker r of W takes every W-th sample
  // of it, so the k-th global batch is the same block of W x batch samples on any W (the
  // DataLoader's sharding). The position in the epoch (batch_in_epoch global batches) carries
  // over when the global batch does.
  const int64_t workers = strategy_->workers();
  if (saved_workers != workers || saved_batch != cfg_.batch_size) {
    const int64_t global = saved_workers * saved_batch, now = workers * cfg_.batch_size;
    KILN_CHECK(global == now || batch_in_epoch == 0, "checkpoint ", path, " was written by ", saved_workers,
               " worker(s) of batch ", saved_batch, " (global batch ", global, ") at batch ", batch_in_epoch,
               " of epoch ", epoch + 1, "; resuming on ", workers, " worker(s) of batch ", cfg_.batch_size,
               " (global batch ", now, ") would not continue its schedule: ",
               global % workers == 0 ? "use --batch " + std::to_string(global / workers)
                                     : "no per-rank batch gives a global batch of " + std::to_string(global) +
                                           " on " + std::to_string(workers) + " workers; resume on a divisor of it",
               ", or resume from a checkpoint at an epoch's end");
    if (strategy_->is_chief())
      std::cerr << "kiln train: resuming a checkpoint of " << saved_workers << " worker(s) x batch " << saved_batch
                << " on " << workers << " worker(s) x batch " << cfg_.batch_size << " (global batch " << now
                << (global == now ? ", as before" : ", from the epoch's start") << "); the data is re-sharded\n";
    // --scale-lr multiplied the learning rate by the workers; the global batch it stands for is
    // the same, so is the rate.
    if (cfg_.dist.scale_lr && global == now) cfg_.optimizer.lr = base_lr;
  }

  model_->load_state_dict(c.weights, true);
  try {
    optimizer_->load_state(opt.dump(), c.optimizer);
    if (scaler_->enabled() && j.contains("grad_scaler")) scaler_->load_state(j["grad_scaler"].dump());
  } catch (const Error& e) {
    KILN_THROW("checkpoint ", path, ": ", e.message().empty() ? std::string(e.what()) : e.message());
  }
  step_ = step;
  epoch_ = epoch;
  batch_in_epoch_ = batch_in_epoch;
  // The sums are the chief's (it alone writes checkpoints): the others start the epoch's rest from
  // zero, so the job's figures at its end count every sample once.
  const bool chief = strategy_->is_chief();
  loss_sum_ = chief ? loss_sum : 0;
  correct_sum_ = chief ? correct_sum : 0;
  seen_sum_ = chief ? seen_sum : 0;
  default_generator().set_state(rng_seed, rng_offset);
  last_checkpoint_ = path;
}

}  // namespace kiln::train
