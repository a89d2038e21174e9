// Optimizers with torch.optim's semantics (1.13): SGD (momentum, dampening, Nesterov, weight
// decay), Adam (L2 in the gradient), AdamW (decoupled decay, Loshchilov & Hutter 2019) and LARS
// (You et al. 2017), plus gradient clipping by global norm. A step groups the parameters by
// (device, dtype, what the update formula needs alike: Adam's step count, SGD's first step, LARS's
// 1-d exclusion) and updates each group with one multi-tensor call (engine/ops/optim.h: one
// launch on CUDA; on the CPU a loop over the single-tensor kernels, bit-identical to one call per
// parameter), falling back to one fused kernel per parameter where the list op has no candidate. Checkpointing: state_json() and
// state_tensors() hold everything a resumed run needs to continue bit for bit.
//   auto opt = optim::make_optimizer({"adam", 1e-3}, net->named_parameters());
//   loss.backward(); optim::clip_grad_norm(opt->params(), 5.0); opt->step(); opt->zero_grad();
// Test: ctest --test-dir build -R optim
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace kiln::optim {

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter whose gradient is defined (the others keep their values and
  // state, as in PyTorch); increments steps().
  void step();
  // Sets every gradient undefined (PyTorch's set_to_none).
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);  // a schedule sets it before every step
  int64_t steps() const { return steps_; }
  const NamedTensors& params() const { return params_; }
  // Whether step() updates groups with the multi-tensor ops where they have a candidate (default:
  // on unless KILN_OPTIM_MULTI_TENSOR=0); off, one call per parameter (benchmarks, debugging).
  // The CPU results are the same bits either way.
  void set_multi_tensor(bool on) { multi_tensor_ = on; }
  bool multi_tensor() const { return multi_tensor_; }
  std::string name() const { return name_; }

  // Checkpoint state. JSON: {"optimizer", "lr", "steps", "hyper": {...}, "params": {name: number
  // of updates of that parameter}}; tensors: per-parameter state named "<param>.<slot>"
  // ("conv1.weight.momentum_buffer", "fc.bias.exp_avg"), copies, for parameters updated at least once.
  std::string state_json() const;
  NamedTensors state_tensors() const;
  // Restores both (hyper-parameters and lr too, as torch's load_state_dict does). kiln::Error
  // naming the parameter or slot on any mismatch (another optimizer kind, unknown or missing
  // parameter, missing or extra tensor, wrong shape); nothing changes unless all of it fits.
  void load_state(const std::string& json, const NamedTensors& tensors);

 protected:
  struct ParamState {
    int64_t step = 0;           // updates of this parameter so far
    std::vector<Tensor> slots;  // in slot_names() order; empty until the first update
  };
  Optimizer(std::string name, NamedTensors params, double lr);
  // State tensors per parameter ("momentum_buffer"; "exp_avg", "exp_avg_sq").
  virtual std::vector<std::string> slot_names() const = 0;
  // Updates `param` in place; state.step is already incremented, state.slots allocated (zeros).
  virtual void update(const std::string& name, const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  // A parameter of this step with its gradient (contiguous, the parameter's dtype) and its state
  // (step incremented, slots allocated).
  struct Pending {
    const std::string* name;
    Tensor param, grad;
    ParamState* state;
  };
  // Parameters of one device and dtype whose update can share one descriptor have equal keys.
  virtual int64_t group_key(const Tensor& param, const ParamState& state) const = 0;
  // Updates a group of equal (device, dtype, group_key) with one multi-tensor call (called only
  // where ops::has_multi_tensor, for groups of two or more).
  virtual void update_group(const std::vector<Pending>& group) = 0;
  // Hyper-parameters other than lr, as numbers (booleans 0/1), for state_json / load_state.
  virtual std::vector<std::pair<std::string, double>> hyper() const = 0;
  virtual void set_hyper(const std::vector<std::pair<std::string, double>>& values) = 0;

 private:
  std::string name_;
  NamedTensors params_;
  std::vector<ParamState> state_;
  double lr_;
  int64_t steps_ = 0;
  bool multi_tensor_;
};

struct SGDOptions {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};
struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
};
struct LARSOptions {
  double lr = 0.1, momentum = 0.9, weight_decay = 0, trust_coefficient = 0.001, eps = 1e-9;
  bool exclude_1d = true;
};

// Options are validated (kiln::Error naming the optimizer and the value).
std::unique_ptr<Optimizer> sgd(NamedTensors params, SGDOptions o);
std::unique_ptr<Optimizer> adam(NamedTensors params, AdamOptions o);   // L2 decay in the gradient
std::unique_ptr<Optimizer> adamw(NamedTensors params, AdamOptions o);  // decoupled decay
// Per parameter: local_lr = trust * ||w|| / (||g|| + wd ||w|| + eps) (1 when ||w|| or ||g|| is 0);
// v = momentum v + lr local_lr (g + wd w); w -= v. With exclude_1d, parameters of at most one
// dimension (biases, batch-norm scales) get local_lr 1 and no decay.
std::unique_ptr<Optimizer> lars(NamedTensors params, LARSOptions o);

struct OptimizerConfig {
  std::string name = "sgd";
  double lr = 0.01, momentum = 0.9, weight_decay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool nesterov = false;
  double trust_coefficient = 0.001;  // LARS
};
// name: sgd | nesterov (SGD with nesterov) | adam | adamw | lars; anything else -> kiln::Error
// listing these. momentum applies to sgd, nesterov and lars; beta1, beta2 and eps to adam and
// adamw. adamw with weight_decay 0 uses 1e-2 (torch.optim.AdamW's default): AdamW without decay
// is Adam, so ask for "adam" to switch decay off.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, NamedTensors params);
std::vector<std::string> optimizer_names();

// Scales the defined gradients in place so that their global L2 norm is at most max_norm
// (factor max_norm / (norm + 1e-6) when below 1, as torch.nn.utils.clip_grad_norm_); returns the
// norm before clipping (accumulated in double). A non-finite norm is returned, grads untouched.
double clip_grad_norm(const NamedTensors& params, double max_norm);

}  // namespace kiln::optim
