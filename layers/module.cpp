#include "layers/module.h"

#include <cstring>

#include <cstdlib>

#include <atomic>

#include <functional>
#include <map>
#include <optional>
#include <set>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/profiler.h"
#include "kernels/common/env.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/norm.h"

namespace kiln {

void throw_empty_holder() { KILN_THROW("ModuleHolder: the holder is empty (default-constructed); assign a module first"); }

namespace {
thread_local const Module* t_current = nullptr;  // the module whose CallScope is innermost
}  // namespace

struct Module::CallScope::State {
  BackendGuard guard;
  std::optional<profiler::ProfileScope> profile;
  const Module* prev;
  explicit State(Module& m) : guard(m.backend_), prev(t_current) {
    if (profiler::enabled()) profile.emplace(m.path_.empty() ? m.repr() : m.path_, m.repr());
    t_current = &m;
  }
  ~State() { t_current = prev; }
};

Module::CallScope::CallScope(Module& m) {
  if (t_current != &m) state_ = new State(m);
}

Module::CallScope::~CallScope() { delete state_; }

Tensor Module::operator()(const Tensor& x) {
  const CallScope scope(*this);
  return forward(x);
}

Tensor Module::call_as(const std::function<Tensor()>& f) {
  const CallScope scope(*this);
  return f();
}

Tensor Module::forward(const Tensor&) {
  KILN_THROW(repr(), ": forward(x) is not defined for one tensor; call the module with the arguments its "
             "forward takes (through a ModuleHolder)");
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::function<void(const std::string&, const std::shared_ptr<Module>&)> walk =
      [&](const std::string& prefix, const std::shared_ptr<Module>& m) {
        out.emplace_back(prefix, m);
        for (auto& [n, c] : m->children_) walk(prefix.empty() ? n : prefix + "." + n, c);
      };
  std::shared_ptr<Module> self = weak_from_this().lock();
  // A module not owned by a shared_ptr (on the stack) still lists itself, without owning it.
  if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);
  walk("", self);
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

void Module::assign_paths(const std::string& prefix) {
  path_ = prefix;
  for (auto& [n, c] : children_) c->assign_paths(prefix.empty() ? n : prefix + "." + n);
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  KILN_CHECK(t.defined(), "register_parameter: '", name, "' is undefined");
  KILN_CHECK(t.is_leaf(), "register_parameter: '", name, "' must be a leaf tensor");
  if (is_floating(t.dtype())) t.requires_grad_(true);
  params_.emplace_back(name, t);
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, t);
  return buffers_.back().second;
}

Tensor& Module::param(const std::string& name) {
  for (auto& [n, t] : params_)
    if (n == name) return t;
  KILN_THROW(repr(), ": no parameter named '", name, "'");
}

Tensor& Module::buffer(const std::string& name) {
  for (auto& [n, t] : buffers_)
    if (n == name) return t;
  KILN_THROW(repr(), ": no buffer named '", name, "'");
}

void Module::collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out) const {
  for (const auto& [n, t] : params ? params_ : buffers_)
    if (t.defined()) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", params, true, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", true, recurse, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", false, recurse, out);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  train_changed(on);
  for (auto& [n, c] : children_) c->train(on);
}

NamedTensors Module::state_dict() const {
  NamedTensors out = named_parameters();
  for (auto& b : named_buffers()) out.push_back(b);
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  NamedTensors mine = state_dict();
  std::map<std::string, const Tensor*> given;
  for (auto& [n, t] : state) given.emplace(n, &t);
  std::set<std::string> have;
  std::vector<std::string> missing, unexpected, misshaped;
  for (auto& [n, t] : mine) {
    have.insert(n);
    auto it = given.find(n);
    if (it == given.end()) missing.push_back(n);
    else if (it->second->sizes() != t.sizes())
      misshaped.push_back(n + ": " + shape_str(it->second->sizes()) + " in the state dict, " + shape_str(t.sizes()) +
                          " in the module");
  }
  for (auto& [n, t] : state)
    if (!have.count(n)) unexpected.push_back(n);
  // One key per line with a count per kind, as torch's "Error(s) in loading state_dict" does.
  std::string report;
  auto section = [&](const std::vector<std::string>& keys, const char* one, const char* many, const char* where) {
    if (keys.empty()) return;
    report += "\n  " + std::to_string(keys.size()) + " " + (keys.size() == 1 ? one : many) + " (" + where + "):";
    for (const std::string& k : keys) report += "\n    " + k;
  };
  if (strict) {
    section(missing, "missing key", "missing keys", "in the module, not in the state dict");
    section(unexpected, "unexpected key", "unexpected keys", "in the state dict, not in the module");
  }
  section(misshaped, "key of another shape", "keys of another shape", "nothing was loaded");
  KILN_CHECK(report.empty(), "load_state_dict: the state dict does not fit ", repr(), report);
  NoGradGuard ng;
  for (auto& [n, dst] : mine) {
    auto it = given.find(n);
    if (it == given.end()) continue;
    Tensor d = dst;
    d.copy_(*it->second);
  }
}

void Module::to(Device device) {
  for (auto* list : {&params_, &buffers_})
    for (auto& [n, t] : *list) {
      if (!t.defined() || t.device() == device) continue;
      bool rg = t.requires_grad();
      t = t.detach().to(device);
      if (rg) t.requires_grad_(true);
    }
  for (auto& [n, c] : children_) c->to(device);
}

void Module::to(DType dtype) {
  for (auto* list : {&params_, &buffers_})
    for (auto& [n, t] : *list) {
      if (!t.defined() || !t.is_floating_point() || t.dtype() == dtype) continue;
      bool rg = t.requires_grad();
      NoGradGuard ng;
      t = t.detach().to(dtype);
      if (rg) t.requires_grad_(true);
    }
  for (auto& [n, c] : children_) c->to(dtype);
}

void Module::zero_grad() {
  for (auto& [n, t] : named_parameters()) t.set_grad(Tensor());
}

void Module::summary_into(std::string& out, const std::string& name, int depth) const {
  int64_t own = 0;
  for (auto& [n, t] : params_) own += t.numel();
  out += std::string(size_t(depth) * 2, ' ') + (name.empty() ? "" : "(" + name + "): ") + repr();
  if (own) out += "  [" + std::to_string(own) + " params]";
  out += "\n";
  for (auto& [n, c] : children_) c->summary_into(out, n, depth + 1);
}

std::string Module::summary() const {
  std::string out;
  summary_into(out, "", 0);
  out += "total parameters: " + std::to_string(num_parameters()) + "\n";
  return out;
}

Sequential::Sequential(std::initializer_list<ModulePtr> mods) {
  for (auto& m : mods) add(m);
}

Sequential& Sequential::add(ModulePtr m) { return add(std::to_string(children().size()), std::move(m)); }

Sequential& Sequential::add(const std::string& name, ModulePtr m) {
  KILN_CHECK(m, "Sequential::add: null module '", name, "'");
  register_module(name, std::move(m));
  return *this;
}

namespace {
std::atomic<int> g_fusion{-1};  // -1: not read from KILN_FUSE yet
}  // namespace

void Sequential::set_fusion(bool on) { g_fusion = on ? 1 : 0; }

bool Sequential::fusion() {
  int f = g_fusion.load();
  if (f < 0) {
    f = env_flag("KILN_FUSE", true) ? 1 : 0;
    g_fusion = f;
  }
  return f == 1;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  const auto& cs = children();
  const bool fuse = fusion();
  for (size_t i = 0; i < cs.size(); ++i) {
    Module& c = *cs[i].second;
    if (fuse && i + 1 < cs.size()) {
      Module& next = *cs[i + 1].second;
      if (auto* bn = dynamic_cast<BatchNorm*>(&c); bn && dynamic_cast<ReLU*>(&next)) {
        y = bn_relu(*bn, next, y);
        ++i;
        continue;
      }
      auto* conv = dynamic_cast<Conv2d*>(&c);
      // Eval: Conv2d, BatchNorm2d[, ReLU] as one convolution with the batch norm folded in.
      if (auto* bn = conv ? dynamic_cast<BatchNorm*>(&next) : nullptr; bn && conv->can_fold(*bn, y)) {
        Module* relu = i + 2 < cs.size() && dynamic_cast<ReLU*>(cs[i + 2].second.get()) ? cs[i + 2].second.get() : nullptr;
        y = conv_bn(*conv, *bn, relu, y);
        i += relu ? 2 : 1;
        continue;
      }
      if (conv && dynamic_cast<ReLU*>(&next)) {
        y = conv->call_as([&] { return conv->forward_relu(y); });
        // The ReLU ran inside the convolution; its (empty) call keeps its row in per-layer profiles.
        y = cs[i + 1].second->call_as([&] { return y; });
        ++i;
        continue;
      }
    }
    y = c(y);
  }
  return y;
}

Tensor half_copy_for(const Tensor& t, const Tensor& x) {
  const bool mixed = t.defined() && x.defined() && t.dtype() == DType::float32 &&
                     (x.dtype() == DType::bfloat16 || x.dtype() == DType::float16);
  return mixed ? t.to(x.dtype()) : t;
}

}  // namespace kiln
