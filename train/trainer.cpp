// Trainer: epochs, validation, checkpoints with bit-exact resume, logs, SIGTERM/SIGUSR1.
//   ctest --test-dir build -R trainer
#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "dist/timeline.h"
#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/metrics.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "engine/random.h"
#include "engine/schedule.h"
#include "io/formats/checkpoint.h"
#include "io/formats/json_limits.h"
#include "io/logs/csv_log.h"
#include "engine/cuda_runtime.h"
#include "io/data/dataloader.h"
#include "io/logs/progress.h"
#include "io/logs/tfevents.h"

namespace kiln::train {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Creates `dir` (and its parents); a failure is a kiln::Error naming the flag and the folder.
void make_dir(const std::string& dir, const char* flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  KILN_CHECK(!ec, flag, " ", dir, ": cannot create the folder: ", ec.message());
}

// The signal that asked for a checkpoint-and-exit (0: none). Set by the handler, read between steps.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// Installs the SIGTERM/SIGUSR1 handlers for the lifetime of a fit() and restores the old ones.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa = {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGUSR1, &sa, &old_usr1_);
  }
  ~StopSignals() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
  }
  static int pending() { return g_stop_signal; }

 private:
  struct sigaction old_term_ = {}, old_usr1_ = {};
};

// The samples [begin, end) of another data set.
class Range : public Dataset {
 public:
  Range(std::shared_ptr<const Dataset> base, int64_t begin, int64_t end)
      : base_(std::move(base)), begin_(begin), end_(end) {}
  int64_t size() const override { return end_ - begin_; }
  Example get(int64_t i) const override {
    KILN_CHECK(i >= 0 && i < size(), "data subset: index ", i, " out of range [0, ", size(), ")");
    return base_->get(begin_ + i);
  }
  Shape sample_shape() const override { return base_->sample_shape(); }
  std::string source(int64_t i) const override { return base_->source(begin_ + i); }

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t begin_, end_;
};

std::shared_ptr<const Dataset> first_n(std::shared_ptr<const Dataset> d, int64_t n) {
  if (n <= 0 || n >= d->size()) return d;
  return std::make_shared<Range>(d, 0, n);
}

std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

Tensor task_loss(Task task, const Tensor& output0, const Tensor& target) {
  // Losses in float32 whatever the compute type (as autocast does).
  const Tensor output = output0.is_floating_point() ? output0.to(DType::float32) : output0;
  if (task == Task::segmentation) return ops::binary_cross_entropy_with_logits(output, target.to(DType::float32));
  return ops::cross_entropy(output, target);
}

// What lives only while training: the loader of the current epoch and the log writers.
struct Trainer::State {
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<EventWriter> events;
  std::unique_ptr<CsvLog> steps_csv, epochs_csv;
};

Trainer::Trainer(ModulePtr model, Splits data, TrainConfig config, std::shared_ptr<dist::Communicator> comm)
    : model_(std::move(model)),
      data_(std::move(data)),
      cfg_(std::move(config)),
      st_(std::make_unique<State>()),
      comm_(std::move(comm)) {
  KILN_CHECK(model_ != nullptr, "Trainer: no model");
  KILN_CHECK(data_.train != nullptr, "Trainer: the data set '", data_.name, "' has no training split");
  KILN_CHECK(cfg_.epochs > 0 && cfg_.batch_size > 0, "Trainer: epochs and batch size must be positive (got ",
             cfg_.epochs, ", ", cfg_.batch_size, ")");
  KILN_CHECK(cfg_.val_fraction >= 0 && cfg_.val_fraction < 1, "Trainer: val_fraction must be in [0, 1), got ",
             cfg_.val_fraction);
  auto train = first_n(data_.train, cfg_.limit_train);
  if (cfg_.val_fraction > 0) {
    int64_t n = train->size();
    int64_t n_val = std::max<int64_t>(1, int64_t(std::llround(n * cfg_.val_fraction)));
    KILN_CHECK(n_val < n, "Trainer: val_fraction ", cfg_.val_fraction, " leaves no training samples of ", n);
    train_set_ = std::make_shared<Range>(train, 0, n - n_val);
    val_set_ = std::make_shared<Range>(train, n - n_val, n);
  } else {
    train_set_ = train;
  }
  if (data_.test) test_set_ = first_n(data_.test, cfg_.limit_test);
  if (!val_set_) val_set_ = test_set_;

  if (cfg_.device.is_cuda()) {
    cuda::check_device(cfg_.device);
    // Kernels launch on the current device: it must be the training device (cuda:1 for local rank
    // 1), or they would run on cuda:0 with another device's memory (found by the emulated device
    // under `mpirun -np 2 kiln train --device cuda`).
    cuda::set_device(cfg_.device.index);
    model_->to(cfg_.device);  // before the optimizer takes the parameters
  }
  if (cfg_.checkpoint_dir.empty()) cfg_.checkpoint_dir = cfg_.logdir;
  setup_dist();
  optimizer_ = optim::make_optimizer(cfg_.optimizer, model_->named_parameters());
  const int64_t workers = strategy_->workers();
  int64_t shard = (train_set_->size() + workers - 1) / workers;
  int64_t per_epoch = cfg_.batch_size > 0 ? (shard + cfg_.batch_size - 1) / cfg_.batch_size : 1;
  if (per_epoch < 1) per_epoch = 1;
  int64_t warmup = int64_t(std::llround(cfg_.warmup_epochs * double(per_epoch)));
  schedule_ = optim::make_schedule(cfg_.schedule, per_epoch, per_epoch * cfg_.epochs, warmup);
  if (cfg_.compute_dtype == DType::float16) scaler_ = std::make_unique<amp::GradScaler>();
}

Trainer::~Trainer() = default;

void Trainer::setup_dist() {
  strategy_ = dist::make_strategy(cfg_.dist, comm_.get(), *model_, cfg_.optimizer);
  if (cfg_.dist.scale_lr) cfg_.optimizer.lr *= double(strategy_->workers());
  if (!strategy_->is_chief()) {
    cfg_.progress = false;
    cfg_.epoch_lines = false;
    cfg_.logdir.clear();  // checkpoint_dir stays: every rank reads it on resume
  }
}

DataLoaderOptions Trainer::loader_options(bool shuffle) const {
  DataLoaderOptions lo;
  lo.batch_size = cfg_.batch_size;
  lo.shuffle = shuffle;
  lo.drop_last = false;
  lo.workers = cfg_.workers;
  lo.seed = cfg_.seed;
  lo.pin_memory = cfg_.device.is_cuda();
  if (shuffle) {  // training: each worker its shard of the epoch's order
    lo.rank = std::max(0, strategy_->worker_index());
    lo.world_size = strategy_->workers();
  }
  return lo;
}

Tensor Trainer::prepare(const Tensor& input) const {
  Tensor x = input;
  if (cfg_.channels_last && x.dim() == 4) x = x.contiguous(MemoryFormat::channels_last);
  if (cfg_.compute_dtype != DType::float32 && x.is_floating_point()) x = x.to(cfg_.compute_dtype);
  return on_device(x);
}

Tensor Trainer::on_device(const Tensor& t) const { return t.device() == cfg_.device ? t : t.to(cfg_.device); }

EvalResult Trainer::evaluate(const Dataset& data) {
  EvalResult r;
  if (data.size() == 0) return r;
  bool was_training = model_->is_training();
  model_->eval();
  NoGradGuard no_grad;
  std::shared_ptr<const Dataset> view(&data, [](const Dataset*) {});
  if (strategy_->sums_over_ranks()) {  // sync: each rank its contiguous share, the sums all-reduced below
    const int64_t size = comm_->size(), rank = comm_->rank();
    view = std::make_shared<Range>(view, data.size() * rank / size, data.size() * (rank + 1) / size);
  }
  if (view->size() == 0) {
    model_->train(was_training);
    return strategy_->sums_over_ranks() ? reduce_eval(r, 0) : r;
  }
  DataLoader loader(view, loader_options(false), data_.default_transform(false));
  loader.start_epoch(0);
  metrics::RunningAverage loss;
  double top1 = 0, top5 = 0, iou = 0, dice = 0;
  int64_t n = 0;
  Batch b;
  while (loader.next(b)) {
    Tensor out = (*model_)(prepare(b.input));
    b.target = on_device(b.target);
    loss.add(task_loss(cfg_.task, out, b.target).item(), double(b.size));
    if (cfg_.task == Task::segmentation) {
      auto s = metrics::binary_segmentation_scores(out, b.target);
      iou += s.iou * double(b.size);
      dice += s.dice * double(b.size);
    } else {
      top1 += double(metrics::topk_correct(out, b.target, 1));
      if (out.size(1) > 5) top5 += double(metrics::topk_correct(out, b.target, 5));
    }
    n += b.size;
  }
  model_->train(was_training);
  r.samples = n;
  r.loss = loss.mean();
  if (n > 0) {
    r.top1 = top1 / double(n);
    r.top5 = top5 / double(n);
    r.iou = iou / double(n);
    r.dice = dice / double(n);
  }
  return strategy_->sums_over_ranks() ? reduce_eval(r, r.loss * double(n)) : r;
}

// Sums of every rank's share of an evaluation, as means over all of it.
EvalResult Trainer::reduce_eval(EvalResult local, double loss_sum) const {
  const double n = double(local.samples);
  Tensor t = from_vector(std::vector<double>{loss_sum, local.top1 * n, local.top5 * n, local.iou * n, local.dice * n, n},
                         {6}, DType::float64);
  strategy_->sum_over_ranks(t, "evaluation sums");
  const double* v = t.data<double>();
  EvalResult r;
  r.samples = int64_t(v[5]);
  if (v[5] > 0) {
    r.loss = v[0] / v[5];
    r.top1 = v[1] / v[5];
    r.top5 = v[2] / v[5];
    r.iou = v[3] / v[5];
    r.dice = v[4] / v[5];
  }
  return r;
}

void Trainer::fit() {
  StopSignals signals;
  interrupted_ = false;
  if (!cfg_.resume.empty()) {
    std::string path = cfg_.resume;
    if (path == "latest") {
      KILN_CHECK(!cfg_.checkpoint_dir.empty(), "--resume latest needs a checkpoint directory (--logdir or --checkpoint-dir)");
      path = latest_checkpoint(cfg_.checkpoint_dir);
    }
    if (!path.empty()) load_checkpoint(path);
    else std::cerr << "kiln train: no checkpoint in " << cfg_.checkpoint_dir << ", starting afresh\n";
  }
  if (!cfg_.logdir.empty()) {
    make_dir(cfg_.logdir, "--logdir");
    st_->events = std::make_unique<EventWriter>(cfg_.logdir);
    bool append = step_ > 0;
    st_->steps_csv = std::make_unique<CsvLog>(cfg_.logdir + "/train.csv", append);
    st_->epochs_csv = std::make_unique<CsvLog>(cfg_.logdir + "/epochs.csv", append);
  }
  if (strategy_->is_server()) {
    strategy_->serve();
    return;
  }
  st_->loader = std::make_unique<DataLoader>(train_set_, loader_options(true), data_.default_transform(cfg_.augment));

  while (epoch_ < cfg_.epochs && !interrupted_) {
    train_epoch();
    if (interrupted_) break;
  }
  strategy_->finish();
  if (st_->events) st_->events->flush();
  st_->loader.reset();
}

void Trainer::train_epoch() {
  DataLoader& loader = *st_->loader;
  const int64_t per_epoch = loader.batches_per_epoch();
  if (batch_in_epoch_ == 0) loss_sum_ = correct_sum_ = seen_sum_ = 0;
  loader.start_epoch(epoch_, batch_in_epoch_);
  model_->train();

  std::unique_ptr<ProgressBar> bar;
  if (cfg_.progress)
    bar = std::make_unique<ProgressBar>("epoch " + std::to_string(epoch_ + 1) + "/" + std::to_string(cfg_.epochs),
                                        per_epoch, std::cerr, isatty(2) != 0);
  auto t0 = Clock::now();
  double images = 0;
  auto window_t0 = t0;
  double window_images = 0;
  Batch b, last;
  for (;;) {
    bool have = loader.next(b);
    bool replay = false;  // sync: this rank is out of batches but others are not (join)
    bool stop = false;
    if (strategy_->begin_step(have, StopSignals::pending() != 0, &stop) == 0) break;
    if (stop && !StopSignals::pending()) g_stop_signal = SIGTERM;  // another rank was signalled
    if (!have) {
      KILN_CHECK(last.input.defined(), "kiln train: rank ", comm_->rank(), " has no batch in epoch ", epoch_ + 1,
                 " to stand in while the other ranks finish theirs");
      b = last;
      replay = true;
    }
    double lr = cfg_.optimizer.lr * schedule_->factor(step_);
    optimizer_->set_lr(lr);
    optimizer_->zero_grad();
    Tensor out, loss;
    {
      dist::timeline::Span span("compute", "forward");
      out = (*model_)(prepare(b.input));
      b.target = on_device(b.target);
      loss = task_loss(cfg_.task, out, b.target);
    }
    Tensor objective = replay ? ops::mul(loss, 0.0) : loss;
    if (scaler_) {
      // float16: backward of the scaled loss, then the true gradients before clipping.
      {
        dist::timeline::Span span("compute", "backward");
        scaler_->scale(objective).backward();
      }
      strategy_->finish_gradients();
      scaler_->unscale(*optimizer_);
      if (cfg_.clip_norm > 0) optim::clip_grad_norm(optimizer_->params(), cfg_.clip_norm);
      if (!scaler_->found_inf()) strategy_->step(optimizer_.get(), lr);  // a step with inf or NaN is skipped
      scaler_->update();
    } else {
      {
        dist::timeline::Span span("compute", "backward");
        objective.backward();
      }
      strategy_->finish_gradients();
      if (cfg_.clip_norm > 0) optim::clip_grad_norm(optimizer_->params(), cfg_.clip_norm);
      strategy_->step(optimizer_.get(), lr);
    }
    if (replay) {  // no metrics; the same step count and stopping points as the other ranks
      ++step_;
      if (stop_after_step(bar.get())) return;
      continue;
    }
    last = b;

    float l = float(loss.item());
    KILN_CHECK(std::isfinite(l), "kiln train: the loss became ", l, " at step ", step_ + 1,
               " (epoch ", epoch_ + 1, "); lower the learning rate or clip gradients (--clip-norm)");
    step_losses_.push_back(l);
    double correct = 0;
    if (cfg_.task == Task::classification) {
      NoGradGuard ng;
      correct = double(metrics::topk_correct(out.detach(), b.target, 1));
    }
    loss_sum_ += double(l) * double(b.size);
    correct_sum_ += correct;
    seen_sum_ += double(b.size);
    ++step_;
    ++batch_in_epoch_;
    images += double(b.size);
    window_images += double(b.size);

    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    double ips = secs > 0 ? images / secs : 0;
    if (bar) {
      std::vector<std::pair<std::string, double>> v = {{"loss", loss_sum_ / seen_sum_}};
      if (cfg_.task == Task::classification) v.push_back({"acc", correct_sum_ / seen_sum_});
      v.push_back({"img/s", ips});
      bar->update(batch_in_epoch_, v);
    }
    if (st_->events && cfg_.log_every > 0 && step_ % cfg_.log_every == 0) {
      double wsecs = std::chrono::duration<double>(Clock::now() - window_t0).count();
      double wips = wsecs > 0 ? window_images / wsecs : 0;
      window_t0 = Clock::now();
      window_images = 0;
      st_->events->add_scalar("train/loss", l, step_);
      if (cfg_.task == Task::classification)
        st_->events->add_scalar("train/accuracy", correct / double(b.size), step_);
      st_->events->add_scalar("train/learning_rate", lr, step_);
      st_->events->add_scalar("train/images_per_second", wips, step_);
      st_->steps_csv->write(step_, {{"epoch", double(epoch_) + double(batch_in_epoch_) / double(per_epoch)},
                                    {"loss", l},
                                    {"accuracy", correct / double(b.size)},
                                    {"learning_rate", lr},
                                    {"images_per_second", wips}});
    }
    if (stop_after_step(bar.get())) return;
    if (cfg_.checkpoint_every > 0 && step_ % cfg_.checkpoint_every == 0 && !cfg_.checkpoint_dir.empty() &&
        batch_in_epoch_ < per_epoch)
      save_checkpoint();
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (bar) bar->finish({});

  EpochSummary s;
  s.epoch = epoch_ + 1;
  s.train_loss = seen_sum_ > 0 ? loss_sum_ / seen_sum_ : 0;
  s.train_top1 = seen_sum_ > 0 ? correct_sum_ / seen_sum_ : 0;
  s.images_per_s = secs > 0 ? images / secs : 0;
  s.seconds = secs;
  s.lr = optimizer_->lr();
  if (strategy_->sums_over_ranks()) {  // the job's throughput: every rank's images over this rank's time
    Tensor n = from_vector(std::vector<double>{images}, {1}, DType::float64);
    strategy_->sum_over_ranks(n, "epoch images");
    s.images_per_s = secs > 0 ? n.data<double>()[0] / secs : 0;
  }
  if (val_set_ && (strategy_->is_chief() || strategy_->sums_over_ranks())) s.val = evaluate(*val_set_);
  history_.push_back(s);
  ++epoch_;
  batch_in_epoch_ = 0;
  log_epoch(s);
  if (!cfg_.checkpoint_dir.empty()) save_checkpoint();
}

// A stop signal (SIGTERM/SIGUSR1, on any rank in sync mode) or max_steps ends training after this
// step with a checkpoint; returns whether it did.
bool Trainer::stop_after_step(ProgressBar* bar) {
  const int sig = StopSignals::pending();
  if (!sig && !(cfg_.max_steps > 0 && step_ >= cfg_.max_steps)) return false;
  interrupted_ = true;
  if (bar) bar->finish({});
  const std::string p = cfg_.checkpoint_dir.empty() ? std::string() : save_checkpoint();
  if (sig && strategy_->is_chief())
    std::cerr << "kiln train: signal " << sig << " at step " << step_
              << (p.empty() ? std::string(", no checkpoint directory") : ", checkpoint " + p) << "\n";
  return true;
}

void Trainer::log_epoch(const EpochSummary& s) {
  bool seg = cfg_.task == Task::segmentation;
  if (cfg_.progress || cfg_.epoch_lines) {
    char line[256];
    if (seg)
      std::snprintf(line, sizeof line, "epoch %lld: train loss %.4f | val loss %.4f IoU %.4f Dice %.4f | %.0f img/s\n",
                    (long long)s.epoch, s.train_loss, s.val.loss, s.val.iou, s.val.dice, s.images_per_s);
    else
      std::snprintf(line, sizeof line, "epoch %lld: train loss %.4f acc %.4f | val loss %.4f acc %.4f | %.0f img/s\n",
                    (long long)s.epoch, s.train_loss, s.train_top1, s.val.loss, s.val.top1, s.images_per_s);
    std::cerr << line;
  }
  if (!st_->events) return;
  EventWriter& ev = *st_->events;
  ev.add_scalar("epoch/train_loss", s.train_loss, step_);
  ev.add_scalar("epoch/val_loss", s.val.loss, step_);
  if (seg) {
    ev.add_scalar("epoch/val_iou", s.val.iou, step_);
    ev.add_scalar("epoch/val_dice", s.val.dice, step_);
  } else {
    ev.add_scalar("epoch/train_accuracy", s.train_top1, step_);
    ev.add_scalar("epoch/val_accuracy", s.val.top1, step_);
  }
  ev.add_scalar("epoch/images_per_second", s.images_per_s, step_);
  if (cfg_.histograms)
    for (const auto& [name, p] : model_->named_parameters()) ev.add_histogram("weights/" + name, p, step_);
  ev.flush();
  st_->epochs_csv->write(step_, {{"epoch", double(s.epoch)},
                                 {"train_loss", s.train_loss},
                                 {"train_accuracy", s.train_top1},
                                 {"val_loss", s.val.loss},
                                 {"val_accuracy", seg ? s.val.iou : s.val.top1},
                                 {"images_per_second", s.images_per_s},
                                 {"seconds", s.seconds}});
}

std::string Trainer::save_checkpoint() {
  if (!strategy_->is_chief()) return "";  // one writer: the other ranks hold the same weights
  KILN_CHECK(!cfg_.checkpoint_dir.empty(), "Trainer::save_checkpoint: no checkpoint directory configured");
  make_dir(cfg_.checkpoint_dir, "--checkpoint-dir");
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
  j["seed"] = cfg_.seed;
  j["schedule"] = cfg_.schedule;
  j["base_lr"] = cfg_.optimizer.lr;
  j["optimizer"] = json::parse(optimizer_->state_json());
  if (scaler_) j["grad_scaler"] = json::parse(scaler_->state_json());
  // Doubles as text with 17 digits: a JSON number round trip could lose the last bit.
  j["epoch_sums"] = {fmt_double(loss_sum_), fmt_double(correct_sum_), fmt_double(seen_sum_)};
  j["rng"] = {{"seed", std::to_string(g.seed())}, {"offset", std::to_string(g.offset())}};
  c.state_json = j.dump(2);
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%08lld", (long long)step_);
  std::string prefix = cfg_.checkpoint_dir + "/" + name;
  kiln::save_checkpoint(prefix, c);
  last_checkpoint_ = prefix;
  if (written_.empty() || written_.back() != prefix) written_.push_back(prefix);
  prune_checkpoints();
  return prefix;
}

void Trainer::prune_checkpoints() {
  if (cfg_.keep_checkpoints <= 0) return;
  while (int64_t(written_.size()) > cfg_.keep_checkpoints) {
    const std::string& old = written_.front();
    for (const char* ext : {".json", ".safetensors", ".optim.safetensors"}) std::remove((old + ext).c_str());
    written_.erase(written_.begin());
  }
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
  if (j.contains("batch_size")) r.integer("batch_size", 1, kMaxCount);
  if (j.contains("seed")) r.integer("seed", 0, INT64_MAX);
  if (j.contains("base_lr")) r.number(j, "base_lr", "base_lr", 0, 1e6);
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

  model_->load_state_dict(c.weights, true);
  try {
    optimizer_->load_state(opt.dump(), c.optimizer);
    if (scaler_ && j.contains("grad_scaler")) scaler_->load_state(j["grad_scaler"].dump());
  } catch (const Error& e) {
    KILN_THROW("checkpoint ", path, ": ", e.message().empty() ? std::string(e.what()) : e.message());
  }
  step_ = step;
  epoch_ = epoch;
  batch_in_epoch_ = batch_in_epoch;
  loss_sum_ = loss_sum;
  correct_sum_ = correct_sum;
  seen_sum_ = seen_sum;
  default_generator().set_state(rng_seed, rng_offset);
  last_checkpoint_ = path;
}

}  // namespace kiln::train
