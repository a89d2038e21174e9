// Optimizers (engine/optim.h): bookkeeping shared by all of them (which parameters have a
// gradient, per-parameter state, checkpoint state as JSON + tensors, grouping a step's parameters
// for multi-tensor updates) in Optimizer; the update rules in the subclasses below, each both per
// parameter (update) and per group (update_group, one ops::multi_tensor_step) from one descriptor.
// Test: ctest --test-dir build -R optim
#include "engine/optim.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/ops/optim.h"
#include "kernels/common/env.h"

namespace kiln::optim {

using json = nlohmann::json;

namespace {
bool multi_tensor_default() {
  return env_flag("KILN_OPTIM_MULTI_TENSOR", true);
}
}  // namespace

Optimizer::~Optimizer() = default;

Optimizer::Optimizer(std::string name, NamedTensors params, double lr)
    : name_(std::move(name)), params_(std::move(params)), state_(params_.size()), lr_(lr),
      multi_tensor_(multi_tensor_default()) {
  std::set<std::string> seen;
  for (auto& [n, p] : params_) {
    KILN_CHECK(seen.insert(n).second, name_, ": parameter name '", n, "' appears twice");
    KILN_CHECK(p.defined(), name_, ": parameter '", n, "' is undefined");
    KILN_CHECK(p.dtype() == DType::float32 || p.dtype() == DType::float64, name_, ": parameter '", n, "' is ",
               p.dtype(), "; optimizers update float32 or float64 parameters");
    KILN_CHECK(p.is_contiguous(), name_, ": parameter '", n, "' ", p.str(), " must be contiguous");
  }
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  KILN_CHECK(std::isfinite(lr) && lr >= 0, name_, ": learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::step() {
  const std::vector<std::string> slots = slot_names();
  // Every gradient is checked before any parameter or state changes.
  std::vector<std::pair<size_t, Tensor>> with_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [n, p] = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    KILN_CHECK(g.sizes() == p.sizes(), name_, ": gradient of '", n, "' is ", shape_str(g.sizes()),
               ", parameter is ", shape_str(p.sizes()));
    if (g.dtype() != p.dtype()) g = g.to(p.dtype());
    with_grad.emplace_back(i, g.contiguous());
  }
  // Groups in order of first appearance: (device, dtype, group_key) -> parameters.
  struct Group {
    Device device;
    DType dtype;
    int64_t key;
    std::vector<Pending> items;
  };
  std::vector<Group> groups;
  for (auto& [i, g] : with_grad) {
    const auto& [n, p] = params_[i];
    ParamState& s = state_[i];
    if (s.slots.empty())
      for (size_t k = 0; k < slots.size(); ++k) s.slots.push_back(zeros(p.sizes(), TensorOptions(p.dtype()).with_device(p.device())));
    ++s.step;
    const int64_t key = group_key(p, s);
    // A named reference: C++17 lambdas cannot capture a structured binding (clang refuses it).
    const Tensor& param = p;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& gr) {
      return gr.device == param.device() && gr.dtype == param.dtype() && gr.key == key;
    });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{p.device(), p.dtype(), key, {}});
    it->items.push_back(Pending{&n, p, g, &s});
  }
  for (Group& gr : groups) {
    if (multi_tensor_ && gr.items.size() > 1 && ops::has_multi_tensor(gr.device, gr.dtype)) {
      update_group(gr.items);
      continue;
    }
    for (Pending& it : gr.items) update(*it.name, it.param, it.grad, *it.state);
  }
  ++steps_;
}

void Optimizer::zero_grad() {
  for (auto& [n, p] : params_) p.set_grad(Tensor());
}

std::string Optimizer::state_json() const {
  json j;
  j["optimizer"] = name_;
  j["lr"] = lr_;
  j["steps"] = steps_;
  json h = json::object();
  for (auto& [k, v] : hyper()) h[k] = v;
  j["hyper"] = h;
  json ps = json::object();
  for (size_t i = 0; i < params_.size(); ++i) ps[params_[i].first] = state_[i].step;
  j["params"] = ps;
  return j.dump();
}

NamedTensors Optimizer::state_tensors() const {
  const std::vector<std::string> slots = slot_names();
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i)
    for (size_t k = 0; k < state_[i].slots.size(); ++k)
      out.emplace_back(params_[i].first + "." + slots[k], state_[i].slots[k].clone());
  return out;
}

void Optimizer::load_state(const std::string& text, const NamedTensors& tensors) {
  const char* where = "optimizer load_state";
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    KILN_THROW(where, ": the state JSON does not parse: ", e.what());
  }
  double lr = 0;
  int64_t steps = 0;
  std::vector<std::pair<std::string, double>> hyper_values;
  std::map<std::string, int64_t> counts;
  try {
    KILN_CHECK(j.is_object() && j.contains("optimizer"), where, ": the state JSON has no \"optimizer\" field");
    const std::string kind = j.at("optimizer").get<std::string>();
    KILN_CHECK(kind == name_, where, ": the state is of optimizer '", kind, "', this optimizer is '", name_, "'");
    lr = j.at("lr").get<double>();
    steps = j.at("steps").get<int64_t>();
    for (auto& [k, v] : j.at("hyper").items()) hyper_values.emplace_back(k, v.get<double>());
    for (auto& [k, v] : j.at("params").items()) counts[k] = v.get<int64_t>();
  } catch (const json::exception& e) {
    KILN_THROW(where, ": malformed state JSON (", e.what(), ")");
  }
  // The parameters must be the same set.
  std::set<std::string> mine;
  for (auto& [n, p] : params_) {
    mine.insert(n);
    KILN_CHECK(counts.count(n), where, ": the state has no entry for parameter '", n, "'");
  }
  for (auto& [n, c] : counts) {
    KILN_CHECK(mine.count(n), where, ": the state has parameter '", n, "', which this optimizer does not have");
    KILN_CHECK(c >= 0, where, ": parameter '", n, "' has a negative update count ", c);
  }
  // Every tensor the counts call for, and no others.
  std::map<std::string, const Tensor*> given;
  for (auto& [n, t] : tensors) given[n] = &t;
  const std::vector<std::string> slots = slot_names();
  std::vector<ParamState> fresh(params_.size());
  std::set<std::string> used;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [n, p] = params_[i];
    fresh[i].step = counts[n];
    if (fresh[i].step == 0) continue;
    for (const std::string& slot : slots) {
      const std::string key = n + "." + slot;
      auto it = given.find(key);
      KILN_CHECK(it != given.end(), where, ": missing state tensor '", key, "'");
      const Tensor& t = *it->second;
      KILN_CHECK(t.defined() && t.sizes() == p.sizes(), where, ": state tensor '", key, "' is ",
                 t.defined() ? shape_str(t.sizes()) : std::string("undefined"), ", parameter '", n, "' is ",
                 shape_str(p.sizes()));
      Tensor copy = zeros(p.sizes(), TensorOptions(p.dtype()).with_device(p.device()));
      copy.copy_(t);
      fresh[i].slots.push_back(copy);
      used.insert(key);
    }
  }
  for (auto& [n, t] : tensors)
    KILN_CHECK(used.count(n), where, ": unexpected state tensor '", n, "' (optimizer '", name_, "' keeps ",
               slots.empty() ? std::string("no tensors") : "slots of updated parameters only", ")");
  set_hyper(hyper_values);  // validates before anything else changes
  set_lr(lr);
  steps_ = steps;
  state_ = std::move(fresh);
}

namespace {

void check_option(bool ok, const char* opt, const char* what, double v) {
  KILN_CHECK(ok, opt, ": ", what, " got ", v);
}

// Reads the named values of `values` into the fields, refusing unknown or missing names.
void read_hyper(const char* opt, const std::vector<std::pair<std::string, double>>& values,
                const std::vector<std::pair<std::string, double*>>& fields) {
  std::map<std::string, double> m(values.begin(), values.end());
  for (auto& [k, v] : m) {
    bool known = false;
    for (auto& f : fields) known |= f.first == k;
    KILN_CHECK(known, "optimizer load_state: ", opt, " has no hyper-parameter '", k, "'");
  }
  for (auto& [k, ptr] : fields) {
    KILN_CHECK(m.count(k), "optimizer load_state: hyper-parameter '", k, "' of ", opt, " is missing");
    *ptr = m[k];
  }
}

void validate(const SGDOptions& o) {
  check_option(o.momentum >= 0, "sgd", "momentum must be >= 0,", o.momentum);
  check_option(o.weight_decay >= 0, "sgd", "weight_decay must be >= 0,", o.weight_decay);
  check_option(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "sgd",
               "nesterov needs momentum > 0 and dampening 0; momentum", o.momentum);
}

class SGD final : public Optimizer {
 public:
  SGD(NamedTensors params, SGDOptions o) : Optimizer("sgd", std::move(params), o.lr), o_(o) { validate(o_); }

 protected:
  std::vector<std::string> slot_names() const override {
    return o_.momentum != 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
  }
  SGDStepDesc desc(const ParamState& s) const {
    SGDStepDesc d;
    d.lr = lr();
    d.momentum = o_.momentum;
    d.dampening = o_.dampening;
    d.weight_decay = o_.weight_decay;
    d.nesterov = o_.nesterov;
    d.first = s.step == 1;
    return d;
  }
  void update(const std::string&, const Tensor& p, const Tensor& g, ParamState& s) override {
    ops::sgd_step(p, g, s.slots.empty() ? Tensor() : s.slots[0], desc(s));
  }
  // A first step initialises the momentum buffer from d: it shares a call only with other first steps.
  int64_t group_key(const Tensor&, const ParamState& s) const override {
    return o_.momentum != 0 && s.step == 1 ? 1 : 0;
  }
  void update_group(const std::vector<Pending>& group) override {
    MultiTensorDesc d;
    d.op = MultiTensorOp::sgd;
    d.sgd = desc(*group[0].state);
    std::vector<ops::MultiTensorItem> items;
    for (const Pending& it : group)
      items.push_back({it.param, it.grad, it.state->slots.empty() ? Tensor() : it.state->slots[0], Tensor(), 1});
    ops::multi_tensor_step(items, d);
  }
  std::vector<std::pair<std::string, double>> hyper() const override {
    return {{"momentum", o_.momentum},
            {"dampening", o_.dampening},
            {"weight_decay", o_.weight_decay},
            {"nesterov", o_.nesterov ? 1.0 : 0.0}};
  }
  void set_hyper(const std::vector<std::pair<std::string, double>>& values) override {
    SGDOptions o = o_;
    double nesterov = 0;
    read_hyper("sgd", values,
               {{"momentum", &o.momentum}, {"dampening", &o.dampening}, {"weight_decay", &o.weight_decay},
                {"nesterov", &nesterov}});
    o.nesterov = nesterov != 0;
    validate(o);
    KILN_CHECK((o.momentum != 0) == (o_.momentum != 0), "optimizer load_state: the state has momentum ",
               o.momentum, ", this sgd has ", o_.momentum, " (momentum buffers would not match)");
    o_ = o;
  }

 private:
  SGDOptions o_;
};

void validate(const AdamOptions& o, const char* name) {
  check_option(o.beta1 >= 0 && o.beta1 < 1, name, "beta1 must be in [0, 1),", o.beta1);
  check_option(o.beta2 >= 0 && o.beta2 < 1, name, "beta2 must be in [0, 1),", o.beta2);
  check_option(o.eps >= 0, name, "eps must be >= 0,", o.eps);
  check_option(o.weight_decay >= 0, name, "weight_decay must be >= 0,", o.weight_decay);
}

class Adam final : public Optimizer {
 public:
  Adam(NamedTensors params, AdamOptions o, bool decoupled)
      : Optimizer(decoupled ? "adamw" : "adam", std::move(params), o.lr), o_(o), decoupled_(decoupled) {
    validate(o_, decoupled ? "adamw" : "adam");
  }

 protected:
  std::vector<std::string> slot_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  AdamStepDesc desc(const ParamState& s) const {
    AdamStepDesc d;
    d.lr = lr();
    d.beta1 = o_.beta1;
    d.beta2 = o_.beta2;
    d.eps = o_.eps;
    d.weight_decay = o_.weight_decay;
    d.decoupled = decoupled_;
    d.step = s.step;
    return d;
  }
  void update(const std::string&, const Tensor& p, const Tensor& g, ParamState& s) override {
    ops::adam_step(p, g, s.slots[0], s.slots[1], desc(s));
  }
  // The bias corrections depend on each parameter's own update count (a parameter whose gradient
  // was undefined on some step lags behind), so only equal counts share a call.
  int64_t group_key(const Tensor&, const ParamState& s) const override { return s.step; }
  void update_group(const std::vector<Pending>& group) override {
    MultiTensorDesc d;
    d.op = MultiTensorOp::adam;
    d.adam = desc(*group[0].state);
    std::vector<ops::MultiTensorItem> items;
    for (const Pending& it : group) items.push_back({it.param, it.grad, it.state->slots[0], it.state->slots[1], 1});
    ops::multi_tensor_step(items, d);
  }
  std::vector<std::pair<std::string, double>> hyper() const override {
    return {{"beta1", o_.beta1}, {"beta2", o_.beta2}, {"eps", o_.eps}, {"weight_decay", o_.weight_decay}};
  }
  void set_hyper(const std::vector<std::pair<std::string, double>>& values) override {
    AdamOptions o = o_;
    read_hyper(decoupled_ ? "adamw" : "adam", values,
               {{"beta1", &o.beta1}, {"beta2", &o.beta2}, {"eps", &o.eps}, {"weight_decay", &o.weight_decay}});
    validate(o, decoupled_ ? "adamw" : "adam");
    o_ = o;
  }

 private:
  AdamOptions o_;
  bool decoupled_;
};

void validate(const LARSOptions& o) {
  check_option(o.momentum >= 0, "lars", "momentum must be >= 0,", o.momentum);
  check_option(o.weight_decay >= 0, "lars", "weight_decay must be >= 0,", o.weight_decay);
  check_option(o.trust_coefficient > 0, "lars", "trust_coefficient must be > 0,", o.trust_coefficient);
  check_option(o.eps >= 0, "lars", "eps must be >= 0,", o.eps);
}

class LARS final : public Optimizer {
 public:
  LARS(NamedTensors params, LARSOptions o) : Optimizer("lars", std::move(params), o.lr), o_(o) { validate(o_); }

 protected:
  std::vector<std::string> slot_names() const override { return {"momentum_buffer"}; }
  bool excluded(const Tensor& p) const { return o_.exclude_1d && p.dim() <= 1; }
  // The descriptor of an excluded (local rate 1, no decay) or included parameter, local rate 1.
  LarsStepDesc desc(bool exclude) const {
    LarsStepDesc d;
    d.lr = lr();
    d.momentum = o_.momentum;
    d.weight_decay = exclude ? 0 : o_.weight_decay;
    d.local_lr = 1;
    return d;
  }
  // From the sums of squares of the parameter and its gradient.
  double local_lr(double p_sq, double g_sq) const {
    const double w = std::sqrt(p_sq), gn = std::sqrt(g_sq);
    return w > 0 && gn > 0 ? o_.trust_coefficient * w / (gn + o_.weight_decay * w + o_.eps) : 1.0;
  }
  void update(const std::string&, const Tensor& p, const Tensor& g, ParamState& s) override {
    LarsStepDesc d = desc(excluded(p));
    if (!excluded(p)) d.local_lr = local_lr(ops::sum_squares(p), ops::sum_squares(g));
    ops::lars_step(p, g, s.slots[0], d);
  }
  // Excluded and included parameters differ in weight decay, which the list shares.
  int64_t group_key(const Tensor& p, const ParamState&) const override { return excluded(p) ? 1 : 0; }
  void update_group(const std::vector<Pending>& group) override {
    const bool exclude = excluded(group[0].param);
    MultiTensorDesc d;
    d.op = MultiTensorOp::lars;
    d.lars = desc(exclude);
    std::vector<ops::MultiTensorItem> items;
    for (const Pending& it : group) items.push_back({it.param, it.grad, it.state->slots[0], Tensor(), 1});
    if (!exclude) {  // every norm of the group in one call: the parameters, then the gradients
      std::vector<Tensor> xs;
      for (const Pending& it : group) xs.push_back(it.param);
      for (const Pending& it : group) xs.push_back(it.grad);
      const std::vector<double> sq = ops::multi_sum_squares(xs);
      for (size_t i = 0; i < group.size(); ++i) items[i].local_lr = local_lr(sq[i], sq[group.size() + i]);
    }
    ops::multi_tensor_step(items, d);
  }
  std::vector<std::pair<std::string, double>> hyper() const override {
    return {{"momentum", o_.momentum},
            {"weight_decay", o_.weight_decay},
            {"trust_coefficient", o_.trust_coefficient},
            {"eps", o_.eps},
            {"exclude_1d", o_.exclude_1d ? 1.0 : 0.0}};
  }
  void set_hyper(const std::vector<std::pair<std::string, double>>& values) override {
    LARSOptions o = o_;
    double exclude = 0;
    read_hyper("lars", values,
               {{"momentum", &o.momentum}, {"weight_decay", &o.weight_decay},
                {"trust_coefficient", &o.trust_coefficient}, {"eps", &o.eps}, {"exclude_1d", &exclude}});
    o.exclude_1d = exclude != 0;
    validate(o);
    o_ = o;
  }

 private:
  LARSOptions o_;
};

}  // namespace

std::unique_ptr<Optimizer> sgd(NamedTensors params, SGDOptions o) {
  return std::make_unique<SGD>(std::move(params), o);
}
std::unique_ptr<Optimizer> adam(NamedTensors params, AdamOptions o) {
  return std::make_unique<Adam>(std::move(params), o, false);
}
std::unique_ptr<Optimizer> adamw(NamedTensors params, AdamOptions o) {
  return std::make_unique<Adam>(std::move(params), o, true);
}
std::unique_ptr<Optimizer> lars(NamedTensors params, LARSOptions o) {
  return std::make_unique<LARS>(std::move(params), o);
}

std::vector<std::string> optimizer_names() { return {"sgd", "nesterov", "adam", "adamw", "lars"}; }

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, NamedTensors params) {
  if (c.name == "sgd" || c.name == "nesterov") {
    SGDOptions o;
    o.lr = c.lr;
    o.momentum = c.momentum;
    o.weight_decay = c.weight_decay;
    o.nesterov = c.nesterov || c.name == "nesterov";
    return sgd(std::move(params), o);
  }
  if (c.name == "adam" || c.name == "adamw") {
    AdamOptions o;
    o.lr = c.lr;
    o.beta1 = c.beta1;
    o.beta2 = c.beta2;
    o.eps = c.eps;
    o.weight_decay = c.weight_decay;
    if (c.name == "adamw") {
      if (o.weight_decay == 0) o.weight_decay = 1e-2;
      return adamw(std::move(params), o);
    }
    return adam(std::move(params), o);
  }
  if (c.name == "lars") {
    LARSOptions o;
    o.lr = c.lr;
    o.momentum = c.momentum;
    o.weight_decay = c.weight_decay;
    o.trust_coefficient = c.trust_coefficient;
    return lars(std::move(params), o);
  }
  std::string known;
  for (auto& n : optimizer_names()) known += (known.empty() ? "" : ", ") + n;
  KILN_THROW("unknown optimizer '", c.name, "' (known: ", known, ")");
}

double clip_grad_norm(const NamedTensors& params, double max_norm) {
  KILN_CHECK(std::isfinite(max_norm) && max_norm > 0, "clip_grad_norm: max_norm must be finite and > 0, got ",
             max_norm);
  // One multi-tensor call per (device, dtype); the per-tensor sums are added in parameter order,
  // as one call per gradient would.
  std::vector<Tensor> grads;
  for (auto& [n, p] : params) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (g.defined()) grads.push_back(g);
  }
  double total = 0;
  for (double sq : ops::multi_sum_squares(grads)) total += sq;
  total = std::sqrt(total);
  const double coef = max_norm / (total + 1e-6);
  if (!std::isfinite(total) || coef >= 1) return total;
  for (auto& [n, p] : params) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (!g.defined()) continue;
    if (!g.is_contiguous() || !(g.dtype() == DType::float32 || g.dtype() == DType::float64)) {
      g = g.contiguous().to(g.dtype() == DType::float64 ? DType::float64 : DType::float32).clone();
      Tensor mp = p;
      mp.set_grad(g);
    }
    ops::scale_(g, coef);
  }
  return total;
}

}  // namespace kiln::optim
