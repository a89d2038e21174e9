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

#include "dist/settings.h"
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
bool g_process_wide = false;  // install_stop_signal_handlers() was called

void set_stop_handlers(struct sigaction* old_term, struct sigaction* old_usr1) {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, old_term);
  sigaction(SIGUSR1, &sa, old_usr1);
}

// Installs the SIGTERM/SIGUSR1 handlers for the lifetime of a fit() and restores the old ones;
// nothing where they are installed for the whole process (then a signal from before fit() counts).
class StopSignals {
 public:
  StopSignals() : own_(!g_process_wide) {
    if (!own_) return;
    g_stop_signal = 0;
    set_stop_handlers(&old_term_, &old_usr1_);
  }
  ~StopSignals() {
    if (!own_) return;
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
  }
  static int pending() { return g_stop_signal; }

 private:
  bool own_;
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

// The shortest text that reads back as `v` ("0.05", not "0.050000000000000003").
std::string short_double(double v) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

void install_stop_signal_handlers() {
  if (g_process_wide) return;
  set_stop_handlers(nullptr, nullptr);
  g_process_wide = true;
}

dist::Settings job_settings(const TrainConfig& c, const std::string& data, int64_t train_samples, int64_t val_samples) {
  const auto num = [](double v) { return short_double(v); };
  const auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
  const optim::OptimizerConfig& o = c.optimizer;
  dist::Settings s = {
      {"model", c.model_name},
      {"batch size per rank", std::to_string(c.batch_size)},
      {"epochs", std::to_string(c.epochs)},
      {"max steps", std::to_string(c.max_steps)},
      {"optimizer", o.name},
      {"learning rate", num(o.lr)},
      {"weight decay", num(o.weight_decay)},
  };
  if (o.name == "sgd" || o.name == "nesterov" || o.name == "lars") s.push_back({"momentum", num(o.momentum)});
  if (o.name == "sgd") s.push_back({"nesterov", yes(o.nesterov)});
  if (o.name == "lars") s.push_back({"trust coefficient", num(o.trust_coefficient)});
  if (o.name == "adam" || o.name == "adamw") {
    s.push_back({"betas", num(o.beta1) + ", " + num(o.beta2)});
    s.push_back({"eps", num(o.eps)});
  }
  const dist::DistConfig& d = c.dist;
  s.insert(s.end(), {
      {"schedule", c.schedule},
      {"warm-up epochs", num(c.warmup_epochs)},
      {"gradient clipping norm", num(c.clip_norm)},
      {"compute dtype", dtype_name(c.compute_dtype)},
      {"loss scaling", c.compute_dtype == DType::float16 ? "dynamic" : "none"},
      {"device type", c.device.is_cuda() ? "cuda" : "cpu"},
      {"task", c.task == Task::segmentation ? "segmentation" : "classification"},
      {"strategy", dist::strategy_name(d.strategy)},
      {"scale lr by workers", yes(d.scale_lr)},
      {"allreduce algorithm", d.comm_options.algorithm},
      {"collective checks", yes(d.comm_options.check)},
  });
  if (d.strategy == dist::StrategyKind::sync)
    s.insert(s.end(), {{"log every", std::to_string(c.log_every)},
                       {"bucket MB", num(d.sync.bucket_mb)},
                       {"overlap", yes(d.sync.overlap)},
                       {"fp16 allreduce", yes(d.sync.fp16_compression)},
                       {"sync batch norm", yes(d.sync_bn)}});
  if (d.strategy == dist::StrategyKind::ps || d.strategy == dist::StrategyKind::async)
    s.insert(s.end(), {{"parameter servers", std::to_string(d.ps_servers)},
                       {"ps synchronous", yes(d.ps_synchronous)},
                       {"staleness bound", std::to_string(d.staleness)}});
  s.insert(s.end(), {
      {"data set", data},
      {"training samples", std::to_string(train_samples)},
      {"validation samples", std::to_string(val_samples)},
      {"validation fraction", num(c.val_fraction)},
      {"augmentation", yes(c.augment)},
      {"seed", std::to_string(c.seed)},
      {"checkpoint every", std::to_string(c.checkpoint_every)},
  });
  return s;
}

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
  std::unique_ptr<CsvLog> steps_csv, epochs_csv, ranks_csv;
  // Since the last log point: the last step's loss x samples, correct and samples; all images.
  struct Window {
    double loss = 0, correct = 0, samples = 0, images = 0;
  } window;
  Clock::time_point window_t0;
  int64_t per_epoch = 1;
  int64_t pushes_at_epoch_start = 0;  // async: server 0's pushes at the chief's last epoch end
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
  // Before the strategy's own checks (the model's structure): a rank with another batch size,
  // optimizer or data set is named here, on every rank, with both values.
  if (comm_ && comm_->size() > 1)
    dist::check_settings(*comm_, job_settings(cfg_, data_.name,
                                              train_set_->size(), val_set_ ? val_set_->size() : 0));
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

EvalResult Trainer::test() {
  KILN_CHECK(data_.test != nullptr, "Trainer::test: data set '", data_.name, "' has no test split");
  const bool params_unchanged = strategy_->kind() == dist::StrategyKind::none || strategy_->sums_over_ranks();
  if (params_unchanged && whole_test_validated_at_ == step_ && !history_.empty()) return history_.back().val;
  return evaluate(*data_.test);
}

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
  stop_signal_ = 0;
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
    if (strategy_->workers() > 1)
      st_->ranks_csv = std::make_unique<CsvLog>(cfg_.logdir + "/ranks.csv", append && std::filesystem::exists(cfg_.logdir + "/ranks.csv"));
  }
  if (strategy_->is_server()) {
    if (!last_checkpoint_.empty())  // resumed: the servers continue the checkpoint's optimizer state
      strategy_->set_server_optimizer_state({optimizer_->state_json(), optimizer_->state_tensors()});
    strategy_->serve([] { return StopSignals::pending() != 0; });
    return;
  }
  st_->loader = std::make_unique<DataLoader>(train_set_, loader_options(true), data_.default_transform(cfg_.augment));

  while (epoch_ < cfg_.epochs && !interrupted_) {
    train_epoch();
    if (interrupted_) break;
  }
  strategy_->finish();
  if (interrupted_) {
    const std::string p = cfg_.checkpoint_dir.empty() ? std::string() : save_checkpoint();
    if (stop_signal_ && strategy_->is_chief()) {
      // One write: std::cerr flushes after every <<, and mpirun's forwarding would interleave the
      // pieces with the other ranks' and this rank's stdout (a torn line, seen in mpi.stop_ps_3_1).
      const std::string line =
          "kiln train: " + (stop_signal_ > 0 ? "signal " + std::to_string(stop_signal_) : std::string("a signal to another rank")) +
          " at step " + std::to_string(step_) + (p.empty() ? std::string(", no checkpoint directory") : ", checkpoint " + p) + "\n";
      std::fputs(line.c_str(), stderr);
    }
  }
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
  st_->window = {};
  st_->window_t0 = t0;
  st_->per_epoch = per_epoch;
  Batch b, last;
  for (;;) {
    bool have = loader.next(b);
    bool replay = false;  // sync: this rank is out of batches but others are not (join)
    bool stop = false;
    const int active = strategy_->begin_step(have, StopSignals::pending() != 0, &stop);
    if (stop) {  // this rank or another was signalled: the ranks agreed to stop here, all at this step
      stop_now(bar.get(), StopSignals::pending() ? StopSignals::pending() : -1);
      return;
    }
    if (active == 0) break;
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
    if (replay) {  // no metrics; the same step count, log points and stopping points as the other ranks
      ++step_;
      log_step(0, 0, 0, 0, lr);
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

    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    double ips = secs > 0 ? images / secs : 0;
    if (bar) {
      std::vector<std::pair<std::string, double>> v = {{"loss", loss_sum_ / seen_sum_}};
      if (cfg_.task == Task::classification) v.push_back({"acc", correct_sum_ / seen_sum_});
      v.push_back({"img/s", ips});
      bar->update(batch_in_epoch_, v);
    }
    log_step(double(l) * double(b.size), correct, double(b.size), double(b.size), lr);
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
  s.rank_images_per_s = {s.images_per_s};
  const int workers = strategy_->workers();
  if (workers > 1 && !strategy_->workers_in_step()) {
    // Asynchronous workers reach their epoch ends at different times (and a stop may come to
    // each at a different step), so no collective here: the job's images/s is what the servers
    // took since the chief's last epoch end (pushes to server 0 x batch) over the chief's epoch
    // time; loss and accuracy stay the chief's (epoch line and logs say so).
    s.ps = strategy_->server_stats();
    s.rank_images_per_s = {s.images_per_s};
    if (!s.ps.empty()) {
      const int64_t pushes = s.ps.front().pushes - st_->pushes_at_epoch_start;
      st_->pushes_at_epoch_start = s.ps.front().pushes;
      s.images_per_s = secs > 0 ? double(pushes) * double(cfg_.batch_size) / secs : 0;
      s.chief_only_metrics = true;
    }
  } else if (workers > 1) {
    // The job's epoch: every worker's sums and its own images and seconds (a slot each), summed
    // over the workers (sync, and ps with synchronous servers: every worker ends the epoch at the
    // same round). Loss and accuracy are weighted by samples; images/s is all images over the
    // slowest worker's time.
    const int me = std::max(0, strategy_->worker_index());
    std::vector<double> v(size_t(3 + 2 * workers), 0.0);
    v[0] = loss_sum_, v[1] = correct_sum_, v[2] = seen_sum_;
    v[size_t(3 + me)] = images;
    v[size_t(3 + workers + me)] = secs;
    Tensor t = from_vector(v, {int64_t(v.size())}, DType::float64);
    strategy_->sum_over_workers(t, "epoch figures");
    const double* a = t.data<double>();
    double all_images = 0, slowest = 0;
    s.rank_images_per_s.clear();
    for (int k = 0; k < workers; ++k) {
      const double im = a[3 + k], sec = a[3 + workers + k];
      all_images += im;
      slowest = std::max(slowest, sec);
      s.rank_images_per_s.push_back(sec > 0 ? im / sec : 0);
    }
    s.train_loss = a[2] > 0 ? a[0] / a[2] : 0;
    s.train_top1 = a[2] > 0 ? a[1] / a[2] : 0;
    s.images_per_s = slowest > 0 ? all_images / slowest : 0;
    s.seconds = slowest;
    s.ps = strategy_->server_stats();
  }
  if (val_set_ && (strategy_->is_chief() || strategy_->sums_over_ranks())) {
    s.val = evaluate(*val_set_);
    const bool whole_test = val_set_ == test_set_ && data_.test && test_set_->size() == data_.test->size();
    whole_test_validated_at_ = whole_test ? step_ : -1;
  }
  history_.push_back(s);
  ++epoch_;
  batch_in_epoch_ = 0;
  log_epoch(s);
  if (!cfg_.checkpoint_dir.empty()) save_checkpoint();
}

// Adds one step to the logged window and, at a log point (every log_every steps), writes it: the
// step's loss and accuracy and the window's images/s. Sync jobs write the job's
// figures (the window summed over every rank: a collective at the same steps everywhere, replayed
// steps included, which is why log_every is a setting the ranks compare); ps/async workers run at
// their own pace, so their per-step rows are the chief's own, in columns named so ("chief_loss").
void Trainer::log_step(double loss_sum, double correct, double samples, double images, double lr) {
  // Loss and accuracy are the logged step's (as before: a point per log step, the job's under
  // sync); images/s covers every step since the last log point.
  State::Window& w = st_->window;
  w.loss = loss_sum, w.correct = correct, w.samples = samples, w.images += images;
  if (cfg_.log_every <= 0 || step_ % cfg_.log_every != 0) return;
  const auto now = Clock::now();
  const double secs = std::chrono::duration<double>(now - st_->window_t0).count();
  st_->window_t0 = now;
  State::Window sum = w;
  w = {};
  const int workers = strategy_->workers();
  const bool job = workers > 1 && strategy_->sums_over_ranks();
  std::vector<double> rank_ips;
  double ips = secs > 0 ? sum.images / secs : 0;
  if (job) {
    const int me = std::max(0, strategy_->worker_index());
    std::vector<double> v(size_t(3 + workers), 0.0);
    v[0] = sum.loss, v[1] = sum.correct, v[2] = sum.samples;
    v[size_t(3 + me)] = ips;
    Tensor t = from_vector(v, {int64_t(v.size())}, DType::float64);
    strategy_->sum_over_ranks(t, "logged figures");
    const double* a = t.data<double>();
    sum.loss = a[0], sum.correct = a[1], sum.samples = a[2];
    ips = 0;
    for (int k = 0; k < workers; ++k) rank_ips.push_back(a[3 + k]), ips += a[3 + k];
  }
  if (!st_->events || sum.samples <= 0) return;
  const std::string who = workers > 1 && !job ? "chief_" : "";
  const double loss = sum.loss / sum.samples, acc = sum.correct / sum.samples;
  st_->events->add_scalar("train/" + who + "loss", loss, step_);
  if (cfg_.task == Task::classification) st_->events->add_scalar("train/" + who + "accuracy", acc, step_);
  st_->events->add_scalar("train/learning_rate", lr, step_);
  st_->events->add_scalar("train/" + who + "images_per_second", ips, step_);
  st_->steps_csv->write(step_, {{"epoch", double(epoch_) + double(batch_in_epoch_) / double(st_->per_epoch)},
                                {who + "loss", loss},
                                {who + "accuracy", acc},
                                {"learning_rate", lr},
                                {who + "images_per_second", ips}});
  if (st_->ranks_csv)
    for (size_t k = 0; k < rank_ips.size(); ++k)
      st_->ranks_csv->write(step_, {{"epoch", double(epoch_) + double(batch_in_epoch_) / double(st_->per_epoch)},
                                    {"rank", double(k)},
                                    {"images_per_second", rank_ips[k]}});
}

// max_steps ends training after this step with a checkpoint; returns whether it did. (A signal
// stops at the next begin_step, where the ranks agree on it.)
bool Trainer::stop_after_step(ProgressBar* bar) {
  if (!(cfg_.max_steps > 0 && step_ >= cfg_.max_steps)) return false;
  stop_now(bar, 0);
  return true;
}

// Ends training at this step boundary (every rank of a sync or synchronous-ps job at the same
// one); fit() then writes the checkpoint once the strategy has finished (a ps chief holds the
// servers' final parameters only then). `sig`: the signal this rank got, -1 for one another rank
// got, 0 for max_steps.
void Trainer::stop_now(ProgressBar* bar, int sig) {
  interrupted_ = true;
  stop_signal_ = sig;
  if (bar) bar->finish({});
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
    std::string text = line;
    if (s.chief_only_metrics)
      text.insert(text.find(':'), " (loss and accuracy: the chief's; img/s: the job's, from the servers' pushes)");
    if (s.rank_images_per_s.size() > 1) {
      // The job's figures: say so, with each worker's images/s.
      text.insert(text.find(':'), " (job, " + std::to_string(s.rank_images_per_s.size()) + " workers)");
      std::string per = " (per worker";
      for (double v : s.rank_images_per_s) per += " " + std::to_string(int64_t(std::llround(v)));
      text.insert(text.size() - 1, per + ")");
    }
    for (size_t k = 0; k < s.ps.size(); ++k)
      text += "  ps server " + std::to_string(k) + ": " + s.ps[k].str() + "\n";
    std::cerr << text;
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
  if (s.rank_images_per_s.size() > 1)
    for (size_t k = 0; k < s.rank_images_per_s.size(); ++k) {
      ev.add_scalar("epoch/images_per_second_rank" + std::to_string(k), s.rank_images_per_s[k], step_);
      if (st_->ranks_csv)
        st_->ranks_csv->write(step_, {{"epoch", double(s.epoch)}, {"rank", double(k)},
                                      {"images_per_second", s.rank_images_per_s[k]}});
    }
  for (size_t k = 0; k < s.ps.size(); ++k) {
    const std::string tag = "ps/server" + std::to_string(k) + "/";
    ev.add_scalar(tag + "pushes", double(s.ps[k].pushes), step_);
    ev.add_scalar(tag + "pulls", double(s.ps[k].pulls), step_);
    ev.add_scalar(tag + "mean_staleness", s.ps[k].mean_staleness, step_);
    ev.add_scalar(tag + "max_staleness", double(s.ps[k].max_staleness), step_);
    ev.add_scalar(tag + "deferred_pulls", double(s.ps[k].deferred_pulls), step_);
  }
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
  // ps/async: the servers hold the optimizer state; this rank's optimizer takes it, whole, so the
  // checkpoint has it as a sync one does (and a resume on any number of servers can share it out).
  dist::PsOptimizerState servers;
  if (strategy_->server_optimizer_state(&servers)) optimizer_->load_state(servers.json, servers.tensors);
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
    if (scaler_ && j.contains("grad_scaler")) scaler_->load_state(j["grad_scaler"].dump());
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
