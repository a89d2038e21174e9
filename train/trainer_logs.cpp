// The Trainer's logs: the settings a job's ranks compare and record, the logged steps (TensorBoard
// event files, train.csv, ranks.csv) and the epoch lines and summaries (stderr, epochs.csv).
//   ctest --test-dir build -R e2e.test_train
#include <cstdio>
#include <iostream>

#include "train/trainer_state.h"

namespace kiln::train {

dist::Settings job_settings(const TrainConfig& c, const std::string& data, int64_t train_samples, int64_t val_samples) {
  const auto num = [](double v) { return dist::setting_number(v); };
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
  s.insert(s.end(), {
      {"schedule", c.schedule},
      {"warm-up epochs", num(c.warmup_epochs)},
      {"gradient clipping norm", num(c.clip_norm)},
      {"compute dtype", dtype_name(c.compute_dtype)},
      {"loss scaling", c.compute_dtype == DType::float16 ? "dynamic" : "none"},
      {"device type", c.device.is_cuda() ? "cuda" : "cpu"},
      {"task", c.task == Task::segmentation ? "segmentation"
               : c.task == Task::regression ? (c.regression_loss == RegressionLoss::mse ? "regression (mse)" : "regression (mae)")
                                            : "classification"},
  });
  const dist::Settings strategy = dist::describe(c.dist);
  s.insert(s.end(), strategy.begin(), strategy.end());
  // Sync jobs sum the logged figures over the ranks at each log point: a collective at the same steps.
  if (c.dist.strategy == dist::StrategyKind::sync) s.push_back({"log every", std::to_string(c.log_every)});
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

void Trainer::log_epoch(const EpochSummary& s) {
  bool seg = cfg_.task == Task::segmentation;
  if (cfg_.progress || cfg_.epoch_lines) {
    char line[256];
    if (seg)
      std::snprintf(line, sizeof line, "epoch %lld: train loss %.4f | val loss %.4f IoU %.4f Dice %.4f | %.0f img/s\n",
                    (long long)s.epoch, s.train_loss, s.val.loss, s.val.iou, s.val.dice, s.images_per_s);
    else if (cfg_.task == Task::regression)
      std::snprintf(line, sizeof line, "epoch %lld: train loss %.4f | val loss %.4f MAE %.4f | %.0f samples/s\n",
                    (long long)s.epoch, s.train_loss, s.val.loss, s.val.mae, s.images_per_s);
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
  } else if (cfg_.task == Task::regression) {
    ev.add_scalar("epoch/val_mae", s.val.mae, step_);
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

}  // namespace kiln::train
