// `kiln train` and `kiln eval`: train a zoo model on a data set, or evaluate a checkpoint.
//   kiln train --model mnist-cnn --data fashion-mnist --epochs 2 --batch 128 --optimizer adam --lr 1e-3
//              --logdir runs/fmnist --checkpoint-every 200   (one command line)
//   kiln train ... --resume latest        (continues the run in --logdir bit for bit)
//   kiln eval --checkpoint runs/fmnist/ckpt-00000938 --data fashion-mnist
// --data takes a catalogue name (found under KILN_DATA or /usr/share/datasets, see `kiln data`),
// a directory (IDX, CIFAR binary, image-folder tree), a .npz file, synthetic:CxHxW:CLASSES:N or
// timeseries:FILE[:window=N]... (a forecasting regression: --loss mse|mae; the test line then also
// gives the last-value forecast's errors on the same held-out rows).
// Test: ctest --test-dir build -R cli.train
#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/random.h"
#include "io/data/dataloader.h"
#include "io/data/datasets.h"
#include "io/data/timeseries.h"
#include "io/formats/checkpoint.h"
#include "nets/zoo.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/dist_flags.h"
#include "tools/kiln/flag_checks.h"
#include "tools/kiln/runtime_flags.h"
#include "train/trainer.h"

namespace kiln::cli {
namespace {

struct TrainOptions {
  std::string model, data, optimizer = "sgd", schedule = "constant", logdir, checkpoint_dir, resume, checkpoint;
  std::string task = "auto", loss = "mse";
  int64_t epochs = 1, batch = 64, checkpoint_every = 0, limit_train = 0, limit_test = 0, max_steps = 0, log_every = 20;
  double lr = 0.01, momentum = 0.9, weight_decay = 0, warmup = 0, clip_norm = 0, val_fraction = 0;
  bool nesterov = false, no_augment = false, quiet = false;
  RuntimeFlags rt;  // --device, --backend, --threads; train: --dtype, --layout
  int workers = 2, keep = 2;
  uint64_t seed = 0;
  DistFlags dist;
};

const std::vector<std::string> kTrainLayouts = {"nhwc", "nchw"};

train::Task pick_task(const std::string& task, const Splits& data) {
  if (task == "classification") return train::Task::classification;
  if (task == "segmentation") return train::Task::segmentation;
  if (task == "regression") return train::Task::regression;
  KILN_CHECK(task == "auto", "--task: 'auto', 'classification', 'segmentation' or 'regression', not '", task, "'");
  if (data.regression) return train::Task::regression;
  return data.segmentation ? train::Task::segmentation : train::Task::classification;
}

train::RegressionLoss pick_loss(const std::string& loss) {
  KILN_CHECK(loss == "mse" || loss == "mae", "--loss: 'mse' or 'mae', not '", loss, "'");
  return loss == "mse" ? train::RegressionLoss::mse : train::RegressionLoss::mae;
}

ModulePtr build_model(const std::string& name, const Splits& data, train::Task task) {
  nets::NetOptions no;
  const Shape& in = data.sample_shape;
  if (in.size() == 2) {  // a sequence [L, features]: the net's input columns
    no.in_channels = in[1];
  } else if (!in.empty()) {
    no.in_channels = in[0];
    if (in.size() == 3) no.image_size = in[2];
  }
  no.classes = task == train::Task::segmentation ? 1 : data.classes;
  return nets::build(name, no);
}

int train_and_report(const ModulePtr& model, const Splits& data, const train::TrainConfig& c, DistSession& session);

// A regression's test line: the loss and MAE (normalised units), and for a time series the
// last-value forecast on the same rows, the margin a model has to beat.
void print_regression(const char* who, const train::EvalResult& r, const train::TrainConfig& c, const Dataset& test) {
  const char* loss = c.regression_loss == train::RegressionLoss::mse ? "mse" : "mae";
  std::printf("%s: loss %.4f (%s) MAE %.4f (%lld samples)", who, r.loss, loss, r.mae, (long long)r.samples);
  if (const auto* ts = dynamic_cast<const TimeSeriesDataset*>(&test)) {
    const ForecastScores naive = last_value_forecast(*ts);
    const double base = c.regression_loss == train::RegressionLoss::mse ? naive.mse : naive.mae;
    std::printf("; last-value forecast: loss %.4f MAE %.4f; model/last-value loss %.3f", base, naive.mae,
                base > 0 ? r.loss / base : 0.0);
  }
  std::printf("\n");
}

// A string of a checkpoint's state ("" when absent); another type is an error naming the key.
std::string state_string(const nlohmann::json& j, const char* key, const std::string& checkpoint) {
  if (!j.is_object() || !j.contains(key)) return "";
  KILN_CHECK(j[key].is_string(), "checkpoint ", checkpoint, ": \"", key, "\" is ", j[key].dump(), ", not a string");
  return j[key].get<std::string>();
}

int run_train(const TrainOptions& o) {
  // From here to the exit a SIGTERM/SIGUSR1 asks for a stop: before training it stops the run at
  // its first step, after it (a late signal to a rank that already stopped) it is harmless.
  train::install_stop_signal_handlers();
  apply_runtime_flags(o.rt, kTrainLayouts);
  KILN_CHECK(!o.model.empty(), "--model is required (see `kiln info` for the zoo)");
  DistSession session(o.dist, runtime_device(o.rt));
  Splits data = open_dataset(o.data);
  train::TrainConfig c;
  c.model_name = o.model;
  c.data_spec = o.data;
  c.epochs = o.epochs;
  c.batch_size = o.batch;
  c.optimizer.name = o.optimizer;
  c.optimizer.lr = o.lr;
  c.optimizer.momentum = o.momentum;
  c.optimizer.weight_decay = o.weight_decay;
  c.optimizer.nesterov = o.nesterov;
  c.schedule = o.schedule;
  c.warmup_epochs = o.warmup;
  c.clip_norm = o.clip_norm;
  c.seed = o.seed;
  c.workers = o.workers;
  c.augment = !o.no_augment;
  c.val_fraction = o.val_fraction;
  c.limit_train = o.limit_train;
  c.limit_test = o.limit_test;
  c.max_steps = o.max_steps;
  c.logdir = o.logdir;
  c.log_every = o.log_every;
  c.checkpoint_dir = o.checkpoint_dir;
  c.checkpoint_every = o.checkpoint_every;
  c.keep_checkpoints = o.keep;
  c.resume = o.resume;
  c.progress = !o.quiet;
  c.task = pick_task(o.task, data);
  c.regression_loss = pick_loss(o.loss);
  c.channels_last = o.rt.layout == "nhwc";
  c.compute_dtype = runtime_dtype(o.rt);
  c.device = runtime_device(o.rt);
  c.dist = session.config();

  manual_seed(o.seed);  // the weights' initialisation (rank 0's are broadcast anyway)
  ModulePtr model = build_model(o.model, data, c.task);
  if (session.rank() == 0)
    std::fprintf(stderr, "kiln train: %s (%lld parameters) on %s: %lld training samples, batch %lld, %s lr %g\n",
               o.model.c_str(), (long long)model->num_parameters(), data.name.c_str(),
               (long long)data.train->size(), (long long)o.batch, o.optimizer.c_str(), o.lr);
  return session.guard([&] { return train_and_report(model, data, c, session); });
}

int train_and_report(const ModulePtr& model, const Splits& data, const train::TrainConfig& c, DistSession& session) {
  train::Trainer t(model, data, c, session.comm());
  t.fit();
  if (t.is_server()) return 0;
  if (t.interrupted()) {
    if (t.is_chief())
      std::printf("stopped at step %lld; resume with --resume %s\n", (long long)t.step(),
                  t.last_checkpoint().empty() ? "<no checkpoint written>" : t.last_checkpoint().c_str());
    return 0;
  }
  // Sync: every rank evaluates its share of the test set (a collective). Parameter servers: the
  // chief alone holds the final parameters.
  if (!data.test || (!t.is_chief() && !t.strategy().sums_over_ranks())) return 0;
  train::EvalResult r = t.test();  // the last epoch's validation where that was the same split
  if (!t.is_chief()) return 0;
  if (c.task == train::Task::segmentation)
    std::printf("test: loss %.4f IoU %.4f Dice %.4f (%lld samples)\n", r.loss, r.iou, r.dice, (long long)r.samples);
  else if (c.task == train::Task::regression)
    print_regression("test", r, c, *data.test);
  else
    std::printf("test: loss %.4f top-1 %.4f top-5 %.4f (%lld samples)\n", r.loss, r.top1, r.top5,
                (long long)r.samples);
  return 0;
}

int run_eval(const TrainOptions& o) {
  apply_runtime_flags(o.rt);
  KILN_CHECK(!o.checkpoint.empty(), "--checkpoint is required");
  Checkpoint ck = load_checkpoint(o.checkpoint);
  auto j = nlohmann::json::parse(ck.state_json, nullptr, false);
  std::string model = o.model;
  if (model.empty()) model = state_string(j, "model", o.checkpoint);
  KILN_CHECK(!model.empty(), "checkpoint ", o.checkpoint, " names no model; pass --model");
  std::string data_spec = o.data;
  if (data_spec.empty()) data_spec = state_string(j, "data", o.checkpoint);
  Splits data = open_dataset(data_spec);
  KILN_CHECK(data.test != nullptr, "--data ", data_spec, " has no test split to evaluate on");
  train::TrainConfig c;
  c.model_name = model;
  c.batch_size = o.batch;
  c.workers = o.workers;
  c.limit_test = o.limit_test;
  c.progress = false;
  c.device = runtime_device(o.rt);
  c.task = pick_task(o.task, data);
  c.regression_loss = pick_loss(o.loss);
  ModulePtr net = build_model(model, data, c.task);
  net->load_state_dict(ck.weights, true);
  train::Trainer t(net, data, c);
  train::EvalResult r = t.evaluate(*t.test_set());  // --limit-test applied
  if (c.task == train::Task::segmentation)
    std::printf("%s on %s: loss %.4f IoU %.4f Dice %.4f (%lld samples)\n", model.c_str(), data_spec.c_str(), r.loss,
                r.iou, r.dice, (long long)r.samples);
  else if (c.task == train::Task::regression)
    print_regression((model + " on " + data_spec).c_str(), r, c, *t.test_set());
  else
    std::printf("%s on %s: loss %.4f top-1 %.4f top-5 %.4f (%lld samples)\n", model.c_str(), data_spec.c_str(),
                r.loss, r.top1, r.top5, (long long)r.samples);
  return 0;
}

// train: layouts kTrainLayouts (and --dtype); eval: none.
void add_common(CLI::App* sub, TrainOptions* o, const std::vector<std::string>& layouts) {
  sub->add_option("--data", o->data,
                  "data set name, directory, .npz file, synthetic:CxHxW:CLASSES:N or timeseries:FILE[:window=N]...");
  sub->add_option("--batch", o->batch, "batch size")->capture_default_str()->check(whole(1, kMaxBatch));
  add_runtime_flags(sub, &o->rt, layouts);
  sub->add_option("--workers", o->workers, "data-loader threads (0: load in the training thread)")
      ->capture_default_str()
      ->check(whole(0, kMaxWorkers));
  sub->add_option("--limit-test", o->limit_test,
                  "use only the first N test samples (kiln train: for the per-epoch validation; its final test line "
                  "covers the whole split)")
      ->check(whole(0, kMaxCount));
  sub->add_option("--task", o->task, "auto, classification, segmentation or regression")->capture_default_str();
  sub->add_option("--loss", o->loss, "regression loss: mse or mae")->capture_default_str();
}

}  // namespace

Command add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "train a zoo model on a data set (logs, checkpoints, resume)");
  sub->add_option("--model", o->model, "zoo model (kiln info lists them)")->required();
  add_common(sub, o.get(), kTrainLayouts);
  sub->add_option("--epochs", o->epochs, "epochs")->capture_default_str()->check(whole(1, 1 << 20));
  sub->add_option("--optimizer", o->optimizer, "sgd, nesterov, adam, adamw or lars")->capture_default_str();
  sub->add_option("--lr", o->lr, "base learning rate")->capture_default_str()->check(real(0, 10, true, false));
  sub->add_option("--momentum", o->momentum, "momentum (sgd, nesterov, lars)")
      ->capture_default_str()
      ->check(real(0, 1, false, true));
  sub->add_flag("--nesterov", o->nesterov, "Nesterov momentum with sgd");
  sub->add_option("--weight-decay", o->weight_decay, "weight decay")->capture_default_str()->check(real(0, 1));
  sub->add_option("--schedule", o->schedule, "constant, step:EPOCHS:GAMMA, multistep:E1,E2:GAMMA, cosine, poly[:POWER]")
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "linear warm-up epochs (may be fractional)")->check(real(0, 1 << 20));
  sub->add_option("--clip-norm", o->clip_norm, "clip gradients to this global L2 norm (0: off)")
      ->check(real(0, 1e12));
  sub->add_option("--seed", o->seed, "seed of weights, shuffle, augmentation and dropout")
      ->capture_default_str()
      ->check(whole(0, INT64_MAX));
  sub->add_flag("--no-augment", o->no_augment, "no random training transforms");
  sub->add_option("--val-fraction", o->val_fraction, "hold out this share of the training data for validation "
                                                     "(0: validate on the test split)")
      ->check(real(0, 1, false, true));
  sub->add_option("--limit-train", o->limit_train, "use only the first N training samples")->check(whole(0, kMaxCount));
  sub->add_option("--max-steps", o->max_steps, "stop with a checkpoint after N steps")->check(whole(0, kMaxCount));
  sub->add_option("--logdir", o->logdir, "TensorBoard event files, CSV logs and (by default) checkpoints");
  sub->add_option("--log-every", o->log_every, "steps between logged scalars")
      ->capture_default_str()
      ->check(whole(1, kMaxCount));
  sub->add_option("--checkpoint-dir", o->checkpoint_dir, "checkpoints (default: --logdir)");
  sub->add_option("--checkpoint-every", o->checkpoint_every, "steps between checkpoints (0: each epoch's end)")
      ->check(whole(0, kMaxCount));
  sub->add_option("--keep", o->keep, "newest checkpoints kept in the directory, whatever run wrote them (0: all)")->capture_default_str()->check(whole(0, 1 << 20));
  sub->add_option("--resume", o->resume, "'latest' (newest in the checkpoint dir) or a checkpoint path");
  sub->add_flag("--quiet", o->quiet, "no progress bar (epoch lines stay)");
  add_dist_flags(sub, &o->dist, true);
  return Command{sub, [o] { return run_train(*o); }};
}

Command add_eval(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  o->batch = 256;
  CLI::App* sub = app.add_subcommand("eval", "evaluate a checkpoint on a data set's test split");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint prefix or .json sidecar")->required();
  sub->add_option("--model", o->model, "zoo model (default: the one the checkpoint names)");
  add_common(sub, o.get(), {});
  return Command{sub, [o] { return run_eval(*o); }};
}

}  // namespace kiln::cli
