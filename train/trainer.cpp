// Trainer: the training loop (fit, the epoch, one step, evaluation). Logs: trainer_logs.cpp;
// checkpoints: trainer_checkpoint.cpp; stop signals: stop_signals.cpp.
//   ctest --test-dir build -R e2e.test_train
#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "dist/timeline.h"
#include "engine/autograd.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "engine/metrics.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "engine/ops/reduce.h"
#include "io/formats/checkpoint.h"
#include "io/logs/progress.h"
#include "train/stop_signals.h"
#include "train/trainer_state.h"

namespace kiln::train {
namespace {

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

}  // namespace

void make_dir(const std::string& dir, const char* flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  KILN_CHECK(!ec, flag, " ", dir, ": cannot create the folder: ", ec.message());
}

Tensor task_loss(Task task, const Tensor& output0, const Tensor& target, RegressionLoss loss) {
  // Losses in float32 whatever the compute type (as autocast does).
  const Tensor output = output0.is_floating_point() ? output0.to(DType::float32) : output0;
  if (task == Task::segmentation) return ops::binary_cross_entropy_with_logits(output, target.to(DType::float32));
  if (task == Task::regression) {
    const Tensor t = target.to(DType::float32);
    KILN_CHECK(output.sizes() == t.sizes(), "regression: the net gives ", shape_str(output.sizes()),
               ", the targets are ", shape_str(t.sizes()));
    return loss == RegressionLoss::mse ? ops::mse_loss(output, t) : ops::mean(ops::abs(ops::sub(output, t)));
  }
  return ops::cross_entropy(output, target);
}

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
  // float16 scales the loss; float32 and bfloat16 run the same step through an identity scaler.
  amp::GradScalerOptions scaling;
  scaling.enabled = cfg_.compute_dtype == DType::float16;
  scaler_ = std::make_unique<amp::GradScaler>(scaling);
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
  double top1 = 0, top5 = 0, iou = 0, dice = 0, mae = 0;
  int64_t n = 0;
  Batch b;
  while (loader.next(b)) {
    Tensor out = (*model_)(prepare(b.input));
    b.target = on_device(b.target);
    loss.add(task_loss(cfg_.task, out, b.target, cfg_.regression_loss).item(), double(b.size));
    if (cfg_.task == Task::regression) {
      NoGradGuard ng;
      mae += ops::mean(ops::abs(ops::sub(out.to(DType::float32), b.target.to(DType::float32)))).item() * double(b.size);
    } else if (cfg_.task == Task::segmentation) {
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
    r.mae = mae / double(n);
  }
  return strategy_->sums_over_ranks() ? reduce_eval(r, r.loss * double(n)) : r;
}

// Sums of every rank's share of an evaluation, as means over all of it.
EvalResult Trainer::reduce_eval(EvalResult local, double loss_sum) const {
  const double n = double(local.samples);
  Tensor t = from_vector(
      std::vector<double>{loss_sum, local.top1 * n, local.top5 * n, local.iou * n, local.dice * n, local.mae * n, n},
      {7}, DType::float64);
  strategy_->sum_over_ranks(t, "evaluation sums");
  const double* v = t.data<double>();
  EvalResult r;
  r.samples = int64_t(v[6]);
  if (v[6] > 0) {
    r.loss = v[0] / v[6];
    r.top1 = v[1] / v[6];
    r.top5 = v[2] / v[6];
    r.iou = v[3] / v[6];
    r.dice = v[4] / v[6];
    r.mae = v[5] / v[6];
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
    dist::ParameterServers* ps = strategy_->parameter_servers();
    if (ps && !last_checkpoint_.empty())  // resumed: the servers continue the checkpoint's optimizer state
      ps->set_optimizer_state({optimizer_->state_json(), optimizer_->state_tensors()});
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
  const auto t0 = Clock::now();
  double images = 0;
  st_->window = {};
  st_->window_t0 = t0;
  st_->per_epoch = per_epoch;
  Batch b, last;
  for (;;) {
    const bool have = loader.next(b);
    bool stop = false;
    const int active = strategy_->begin_step(have, StopSignals::pending() != 0, &stop);
    if (stop) {  // this rank or another was signalled: the ranks agreed to stop here, all at this step
      stop_now(bar.get(), StopSignals::pending() ? StopSignals::pending() : -1);
      return;
    }
    if (active == 0) break;
    // sync: this rank is out of batches but others are not (join). It replays its last batch with
    // no weight and no metrics: the same step count, log points and stopping points as the others.
    const bool replay = !have;
    if (replay) {
      KILN_CHECK(last.input.defined(), "kiln train: rank ", comm_->rank(), " has no batch in epoch ", epoch_ + 1,
                 " to stand in while the other ranks finish theirs");
      b = last;
    }
    const double lr = cfg_.optimizer.lr * schedule_->factor(step_);
    const StepResult r = train_step(b, replay, lr);
    ++step_;
    if (replay) {
      log_step(0, 0, 0, 0, lr);
      if (stop_after_step(bar.get())) return;
      continue;
    }
    last = b;
    step_losses_.push_back(r.loss);
    loss_sum_ += double(r.loss) * double(b.size);
    correct_sum_ += r.correct;
    seen_sum_ += double(b.size);
    ++batch_in_epoch_;
    images += double(b.size);
    if (bar) {
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      std::vector<std::pair<std::string, double>> v = {{"loss", loss_sum_ / seen_sum_}};
      if (cfg_.task == Task::classification) v.push_back({"acc", correct_sum_ / seen_sum_});
      v.push_back({"img/s", secs > 0 ? images / secs : 0});
      bar->update(batch_in_epoch_, v);
    }
    log_step(double(r.loss) * double(b.size), r.correct, double(b.size), double(b.size), lr);
    if (stop_after_step(bar.get())) return;
    if (cfg_.checkpoint_every > 0 && step_ % cfg_.checkpoint_every == 0 && !cfg_.checkpoint_dir.empty() &&
        batch_in_epoch_ < per_epoch)
      save_checkpoint();
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (bar) bar->finish({});
  end_epoch(images, secs);
}

// One step: forward, backward of the loss (scaled for float16; the scaler is an identity
// otherwise), the strategy's gradient exchange, clipping, the update (skipped when a float16
// gradient overflowed). A replayed batch counts zero in the loss and returns no figures.
Trainer::StepResult Trainer::train_step(Batch& b, bool replay, double lr) {
  optimizer_->set_lr(lr);
  optimizer_->zero_grad();
  Tensor out, loss;
  {
    dist::timeline::Span span("compute", "forward");
    out = (*model_)(prepare(b.input));
    b.target = on_device(b.target);
    loss = task_loss(cfg_.task, out, b.target, cfg_.regression_loss);
  }
  {
    dist::timeline::Span span("compute", "backward");
    scaler_->scale(replay ? ops::mul(loss, 0.0) : loss).backward();
  }
  strategy_->finish_gradients();
  scaler_->unscale(*optimizer_);  // the true gradients, before clipping
  if (cfg_.clip_norm > 0) optim::clip_grad_norm(optimizer_->params(), cfg_.clip_norm);
  if (!scaler_->found_inf()) strategy_->step(optimizer_.get(), lr);
  scaler_->update();
  if (replay) return {};

  StepResult r;
  r.loss = float(loss.item());
  KILN_CHECK(std::isfinite(r.loss), "kiln train: the loss became ", r.loss, " at step ", step_ + 1, " (epoch ",
             epoch_ + 1, "); lower the learning rate or clip gradients (--clip-norm)");
  if (cfg_.task == Task::classification) {
    NoGradGuard ng;
    r.correct = double(metrics::topk_correct(out.detach(), b.target, 1));
  }
  return r;
}

// The epoch's summary (the job's figures, as the strategy makes them), its validation, logs and
// checkpoint.
void Trainer::end_epoch(double images, double secs) {
  const dist::JobEpoch job =
      strategy_->job_epoch({loss_sum_, correct_sum_, seen_sum_, images, secs, cfg_.batch_size});
  EpochSummary s;
  s.epoch = epoch_ + 1;
  s.train_loss = job.loss;
  s.train_top1 = job.top1;
  s.images_per_s = job.images_per_s;
  s.seconds = job.seconds;
  s.lr = optimizer_->lr();
  s.rank_images_per_s = job.rank_images_per_s;
  s.ps = job.ps;
  s.chief_only_metrics = job.chief_only_metrics;
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

}  // namespace kiln::train
