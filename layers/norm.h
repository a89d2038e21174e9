// Normalisation-family layers with PyTorch's names and defaults: BatchNorm1d, BatchNorm2d
// (parameters weight, bias; buffers running_mean, running_var, num_batches_tracked), Dropout,
// Softmax, LogSoftmax. Test: ctest --test-dir build -R norm_layers
#pragma once

#include <optional>

#include "engine/random.h"
#include "layers/module.h"

namespace kiln {

// A differentiable sum of a tensor over the ranks of a data-parallel job (its backward sums the
// gradients the same way): what synchronised batch norm needs. dist::enable_sync_batch_norm
// installs one in every BatchNorm of a model.
class CrossReplicaSum {
 public:
  virtual ~CrossReplicaSum() = default;
  virtual Tensor operator()(const Tensor& t) = 0;
};

// Shared by BatchNorm1d and BatchNorm2d. In training with track_running_stats the running stats
// are updated with `momentum` (std::nullopt: cumulative average over num_batches_tracked, as in
// PyTorch) and num_batches_tracked grows by one per forward; in eval they normalise. Without
// track_running_stats batch statistics are used in both modes and no buffers exist.
// weight starts at 1, bias at 0 (affine only); running_mean 0, running_var 1.
class BatchNorm : public Module {
 public:
  BatchNorm(int64_t num_features, double eps, std::optional<double> momentum, bool affine, bool track_running_stats);
  Tensor forward(const Tensor& x) override;
  // relu(forward(x)) in one pass (ops::batch_norm_relu).
  Tensor forward_relu(const Tensor& x);
  std::string repr() const override;
  int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  bool affine() const { return affine_; }
  bool tracks_running_stats() const { return track_; }
  // The parameters and statistics (undefined where absent: weight and bias without affine, the
  // statistics without track_running_stats). Shared with the module, not copies.
  Tensor weight() { return affine_ ? param("weight") : Tensor(); }
  Tensor bias() { return affine_ ? param("bias") : Tensor(); }
  Tensor running_mean() { return track_ ? buffer("running_mean") : Tensor(); }
  Tensor running_var() { return track_ ? buffer("running_var") : Tensor(); }
  // Synchronised batch norm (PyTorch's SyncBatchNorm): in training the batch statistics are the
  // mean and variance over every rank's batch, summed by `sum` (nullptr: this rank's batch only).
  void set_cross_replica_sum(std::shared_ptr<CrossReplicaSum> sum) { cross_replica_ = std::move(sum); }

 protected:
  virtual const char* kind() const = 0;
  virtual bool accepts_dim(int64_t dim) const = 0;
  virtual const char* expected_dims() const = 0;

 private:
  Tensor run(const Tensor& x, bool relu);
  Tensor run_synced(const Tensor& x, bool relu, const Tensor& rm, const Tensor& rv, double momentum);
  std::shared_ptr<CrossReplicaSum> cross_replica_;
  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
  bool affine_, track_;
};

// relu(bn(x)) as one batch-norm pass when fusion is on (Sequential::fusion()), else the two
// calls; the ReLU module still gets its (empty) call, so per-layer profiles keep its row.
Tensor bn_relu(BatchNorm& bn, Module& relu, const Tensor& x);

// Input [N, C] or [N, C, L].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  const char* kind() const override { return "BatchNorm1d"; }
  bool accepts_dim(int64_t d) const override { return d == 2 || d == 3; }
  const char* expected_dims() const override { return "2-d or 3-d"; }
};

// Input [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  const char* kind() const override { return "BatchNorm2d"; }
  bool accepts_dim(int64_t d) const override { return d == 4; }
  const char* expected_dims() const override { return "4-d"; }
};

// Inverted dropout in training, identity in eval. `gen` (not owned; null = the default
// generator) supplies the masks.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "Softmax(dim=" + std::to_string(dim_) + ")"; }

 private:
  int64_t dim_;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "LogSoftmax(dim=" + std::to_string(dim_) + ")"; }

 private:
  int64_t dim_;
};

}  // namespace kiln
