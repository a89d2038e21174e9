// Trainer: the training loop of `kiln train`, usable from C++ in a few lines.
//
//   auto data = kiln::open_dataset_dir("/usr/share/datasets/fashion-mnist");
//   kiln::train::TrainConfig cfg;
//   cfg.model_name = "mnist-cnn"; cfg.epochs = 2; cfg.batch_size = 128;
//   cfg.optimizer.name = "adam"; cfg.optimizer.lr = 1e-3; cfg.logdir = "runs/fmnist";
//   kiln::train::Trainer t(kiln::nets::build("mnist-cnn"), data, cfg);
//   t.fit();                                   // epochs, validation, checkpoints, logs
//   auto test = t.evaluate(*data.test);        // loss, top-1, top-5
//
// Each epoch runs the training split through the DataLoader (seeded shuffle and transforms),
// steps the optimizer under the learning-rate schedule, then validates. Logs go to TensorBoard
// event files and CSV under `logdir`; checkpoints (safetensors + JSON sidecar) every
// `checkpoint_every` steps and at the end of each epoch. A run resumed from a checkpoint repeats
// the uninterrupted run bit for bit on the CPU: the sidecar holds the step, the position in the
// epoch, the optimizer state, the RNG state and the running sums of the epoch's metrics, and the
// loader's order and augmentation are functions of (seed, epoch, sample).
// SIGTERM and SIGUSR1 (what SLURM sends before a job's time limit) end the step in progress,
// write a checkpoint and return from fit() with `interrupted()` true.
//   ctest --test-dir build -R trainer
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/settings.h"
#include "dist/strategy.h"
#include "engine/amp.h"
#include "engine/device.h"
#include "engine/optim.h"
#include "engine/schedule.h"
#include "io/data/dataloader.h"
#include "io/data/datasets.h"
#include "layers/module.h"

namespace kiln {
class ProgressBar;
}

namespace kiln::train {

enum class Task { classification, segmentation, regression };
// The loss of a regression: mean squared or mean absolute error over every target value.
enum class RegressionLoss { mse, mae };

// Data parallelism over a communicator (`kiln train --strategy` under mpirun or srun): see
// dist/strategy.h (the name stays here for code written against train::DistConfig).
using DistConfig = dist::DistConfig;

struct TrainConfig {
  std::string model_name;            // recorded in checkpoints; `kiln eval` rebuilds from it
  std::string data_spec;             // what --data named (recorded for `kiln eval`); "": the data set's name
  int64_t epochs = 1;
  int64_t batch_size = 64;
  optim::OptimizerConfig optimizer;  // name, lr, momentum, weight decay ...
  std::string schedule = "constant"; // see optim::make_schedule
  double warmup_epochs = 0;          // linear warm-up (Goyal et al. 2017), may be fractional
  double clip_norm = 0;              // > 0: clip gradients to this global L2 norm
  uint64_t seed = 0;                 // weights init is the caller's; this seeds shuffle, augmentation, dropout
  int workers = 2;                   // data-loader threads
  bool augment = true;               // the data set's training transforms (else its eval ones)
  double val_fraction = 0;           // > 0: hold out this share of the training split for validation;
                                     // 0: validate on the test split
  int64_t limit_train = 0;           // > 0: use only the first N training samples (quick runs, CI)
  int64_t limit_test = 0;            // > 0: same for the test split
  int64_t max_steps = 0;             // > 0: stop (with a checkpoint) after this many steps in total
  std::string logdir;                // "": no event files or CSV
  int64_t log_every = 20;            // steps between logged scalars
  bool histograms = true;            // weight histograms at the end of each epoch
  std::string checkpoint_dir;        // "": logdir; both "": no checkpoints
  int64_t checkpoint_every = 0;      // steps; 0: only at the end of each epoch
  int keep_checkpoints = 2;          // newest N in checkpoint_dir kept, whatever run wrote them (0 = all)
  std::string resume;                // "": fresh run; "latest": newest in checkpoint_dir; else a path
  bool progress = true;              // console progress bar
  bool epoch_lines = true;           // one summary line per epoch on stderr (also without the bar)
  Task task = Task::classification;  // segmentation: BCE with logits, IoU and Dice; regression:
                                     // regression_loss, mean absolute error
  RegressionLoss regression_loss = RegressionLoss::mse;
  bool channels_last = true;         // 4-d inputs fed NHWC (the CPU kernels' layout without reorders)
  Device device;                     // where the model, its optimizer state and each batch live; on
                                     // CUDA the loader hands out pinned batches so the copy is async
  DType compute_dtype = DType::float32;  // bfloat16 or float16: mixed precision (float32 master
                                         // weights, half activations; oneDNN's AVX512_BF16/AMX
                                         // kernels on CPUs, tensor cores on GPUs); float16 adds
                                         // dynamic loss scaling (amp::GradScaler)
  DistConfig dist;                   // with a communicator of more than one rank
};

// SIGTERM and SIGUSR1 set the stop flag fit() reads from now on, for the life of the process, not
// only during fit(): a signal during setup then stops the run at its first step, and one that
// comes late (a scheduler signals a job's tasks at different moments; the others may already have
// stopped) no longer kills a rank on its way out. For programs like `kiln train`; without it,
// fit() installs its handlers for its own duration and restores the old ones.
void install_stop_signal_handlers();

// What the ranks of a job compare at start (dist::check_settings): everything that must agree for
// the job to mean what one process of batch ranks x batch_size means. `data`: the data set's name
// (not its path: nodes may hold copies at different places); sample counts after the limits and
// the validation split. Settings that may differ per rank (loader threads, log and progress
// output, the device index, timeouts, the timeline path) are not in it.
dist::Settings job_settings(const TrainConfig& c, const std::string& data, int64_t train_samples,
                            int64_t val_samples);

struct EvalResult {
  double loss = 0;
  double top1 = 0;   // classification: top-1 accuracy in [0, 1]
  double top5 = 0;   // classification with more than 5 classes
  double iou = 0;    // segmentation
  double dice = 0;
  double mae = 0;    // regression: mean absolute error over every target value
  int64_t samples = 0;
};

// One epoch. With several workers in step (sync, ps), train_loss and train_top1 are the job's
// (every worker's samples weighted alike), images_per_s is the job's (all images over the slowest
// worker's seconds) and rank_images_per_s each worker's own; asynchronous workers do not wait for
// each other, so there images_per_s is the servers' intake over the chief's epoch and the loss
// and accuracy are the chief's (chief_only_metrics). ps lists the servers' statistics (the chief).
struct EpochSummary {
  int64_t epoch = 0;
  double train_loss = 0, train_top1 = 0, images_per_s = 0, seconds = 0, lr = 0;
  EvalResult val;
  std::vector<double> rank_images_per_s;
  std::vector<dist::PsStats> ps;
  bool chief_only_metrics = false;  // async: loss and accuracy are the chief's (no collective)
};

class Trainer {
 public:
  // comm: the ranks of a data-parallel job (cfg.dist says how they cooperate, dist::make_strategy
  // wires it); rank 0
  // (the chief) alone logs, shows progress and writes checkpoints; every rank reads them on resume.
  Trainer(ModulePtr model, Splits data, TrainConfig config, std::shared_ptr<dist::Communicator> comm = nullptr);
  ~Trainer();

  // Runs (or resumes) the configured epochs; returns normally when done, when max_steps is
  // reached or after a SIGTERM/SIGUSR1 checkpoint.
  void fit();
  // Loss and accuracy of the model on `data` (eval mode, no gradients, no augmentation).
  EvalResult evaluate(const Dataset& data);
  // The test split as this trainer validates on (TrainConfig::limit_test applied); null without one.
  std::shared_ptr<const Dataset> test_set() const { return test_set_; }
  // After fit(): the model's loss and accuracy on the whole test split. That is the last epoch's
  // validation when it covered the whole test split and no parameter changed since (one process,
  // or sync, whose finish() leaves them alone; a parameter-server chief receives the final ones in
  // finish()); otherwise evaluate(), a collective under sync as always. kiln::Error without a test
  // split.
  EvalResult test();

  bool interrupted() const { return interrupted_; }
  // Writes logs and checkpoints: rank 0, or the only process.
  bool is_chief() const { return strategy_->is_chief(); }
  // A parameter-server rank: fit() serves until the workers are done; it trains nothing itself.
  bool is_server() const { return strategy_->is_server(); }
  // How this rank cooperates with the others (local without a communicator of several ranks).
  const dist::Strategy& strategy() const { return *strategy_; }
  int64_t step() const { return step_; }
  const std::vector<EpochSummary>& history() const { return history_; }
  // Loss of every training step this Trainer ran (the resume test compares these).
  const std::vector<float>& step_losses() const { return step_losses_; }
  // The last checkpoint written ("" if none).
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  Module& model() { return *model_; }

  // Writes a checkpoint now (prefix <checkpoint_dir>/ckpt-<step>); returns its prefix.
  std::string save_checkpoint();
  // Restores model, optimizer, step, epoch position, RNG and metric sums from `path`.
  void load_checkpoint(const std::string& path);

 private:
  struct State;  // train/trainer_state.h
  struct StepResult {
    float loss = 0;      // the batch's mean loss
    double correct = 0;  // classification: top-1 hits in the batch
  };
  void train_epoch();
  StepResult train_step(Batch& b, bool replay, double lr);
  void end_epoch(double images, double secs);
  bool stop_after_step(ProgressBar* bar);
  void log_step(double loss_sum, double correct, double samples, double images, double lr);
  void stop_now(ProgressBar* bar, int sig);
  void setup_dist();
  EvalResult reduce_eval(EvalResult local, double loss_sum) const;
  void log_epoch(const EpochSummary& s);
  void prune_checkpoints();
  Tensor prepare(const Tensor& input) const;
  Tensor on_device(const Tensor& t) const;
  DataLoaderOptions loader_options(bool shuffle) const;

  ModulePtr model_;
  Splits data_;
  TrainConfig cfg_;
  std::shared_ptr<const Dataset> train_set_, val_set_, test_set_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LRSchedule> schedule_;
  std::unique_ptr<amp::GradScaler> scaler_;  // enabled for float16; an identity otherwise
  std::unique_ptr<State> st_;  // loader, logs, running sums
  std::shared_ptr<dist::Communicator> comm_;
  std::unique_ptr<dist::Strategy> strategy_;  // after comm_: destroyed before it
  int64_t step_ = 0;           // optimizer steps done
  int64_t epoch_ = 0;          // epoch in progress (0-based)
  int64_t batch_in_epoch_ = 0; // batches of epoch_ done
  double loss_sum_ = 0, correct_sum_ = 0, seen_sum_ = 0;  // this epoch so far (checkpointed)
  bool interrupted_ = false;
  std::vector<EpochSummary> history_;
  int64_t whole_test_validated_at_ = -1;  // step_ of the last validation on the whole test split
  std::vector<float> step_losses_;
  std::string last_checkpoint_;
  int stop_signal_ = 0;  // see stop_now
};

// The loss the trainer uses for `task` on a batch (mean over the batch).
Tensor task_loss(Task task, const Tensor& output, const Tensor& target, RegressionLoss loss = RegressionLoss::mse);

}  // namespace kiln::train
