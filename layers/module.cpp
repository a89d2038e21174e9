#include "layers/module.h"

#include <cstring>

#include <cstdlib>

#include <atomic>

#include <functional>
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

Tensor Module::operator()(const Tensor& x) {
  return call_as([&] { return forward(x); });
}

Tensor Module::call_as(const std::function<Tensor()>& f) {
  BackendGuard guard(backend_);
  std::optional<profiler::ProfileScope> scope;
  if (profiler::enabled()) scope.emplace(path_.empty() ? repr() : path_, repr());
  return f();
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
  std::set<std::string> given;
  for (auto& [n, t] : state) given.insert(n);
  std::string missing, unexpected;
  std::set<std::string> have;
  for (auto& [n, t] : mine) {
    have.insert(n);
    if (!given.count(n)) missing += (missing.empty() ? "" : ", ") + n;
  }
  for (auto& [n, t] : state)
    if (!have.count(n)) unexpected += (unexpected.empty() ? "" : ", ") + n;
  KILN_CHECK(!strict || (missing.empty() && unexpected.empty()), "load_state_dict: missing keys [", missing,
             "], unexpected keys [", unexpected, "]");
  NoGradGuard ng;
  for (auto& [n, dst] : mine) {
    for (auto& [m, src] : state) {
      if (m != n) continue;
      KILN_CHECK(src.sizes() == dst.sizes(), "load_state_dict: '", n, "' has shape ", shape_str(src.sizes()),
                 " in the state dict but ", shape_str(dst.sizes()), " in the module");
      Tensor d = dst;
      d.copy_(src);
    }
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

}  // namespace kiln
