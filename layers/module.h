// Module: a layer or a net. Holds named parameters (trainable leaves), buffers (state that is
// saved but not trained, such as batch-norm running statistics) and child modules; switches
// between train and eval; saves and loads state dicts keyed by dotted names ("features.0.weight"),
// the same keys PyTorch uses. A module's backend setting ("onednn", "native,ref") applies to the
// ops it runs in forward. Not thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace kiln {

[[noreturn]] void throw_empty_holder();  // "ModuleHolder: empty (default-constructed) holder"
template <class M> class ModuleHolder;

class Module : public std::enable_shared_from_this<Module> {
 public:
  virtual ~Module() = default;

  // What a call of this module puts in force while its forward runs: its backend preference and
  // its profiler scope (the per-layer rows of `kiln bench --layers`). Entering the module that is
  // already being called is a no-op, so kiln's own layers open one at the top of forward() and a
  // direct `layer->forward(x)` behaves as `(*layer)(x)`.
  class CallScope {
   public:
    explicit CallScope(Module& m);
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

   private:
    struct State;
    State* state_ = nullptr;
  };

  // Runs forward() in a CallScope of this module.
  Tensor operator()(const Tensor& x);
  // Runs f as this module's call would: under its backend preference and profiler scope. For
  // containers that call a fused form of a child (Sequential: Conv2d then ReLU).
  Tensor call_as(const std::function<Tensor()>& f);
  // One tensor in, one out. A module whose forward takes other arguments (several tensors, a
  // mask) declares its own forward and is called through a ModuleHolder; this one then throws.
  virtual Tensor forward(const Tensor& x);
  // Layer type shown in summaries ("Conv2d(3, 64, kernel=3, stride=1)").
  virtual std::string repr() const = 0;

  // Every module of the tree with its dotted path, this one first as "" (torch's named_modules).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  // fn on every module of the tree, children before their parent (torch's Module.apply), as the
  // init functions are used: net->apply([](Module& m) { ... init::kaiming_normal_(...) ... }).
  void apply(const std::function<void(Module&)>& fn);

  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  int64_t num_parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Parameters then buffers, dotted names, in registration order.
  NamedTensors state_dict() const;
  // Copies values in (shapes must match). strict: every key present both ways. Else kiln::Error
  // listing the missing, unexpected (strict only) and mis-shaped keys, one per line with a count
  // per kind; nothing is loaded then.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  void to(Device device);
  void to(DType dtype);  // floating-point parameters and buffers only
  void zero_grad();      // drops .grad of every parameter

  void set_backend(const std::string& csv) { backend_ = csv; }
  // Names this module and its children by their dotted paths ("features.3"); the profiler's
  // per-layer rows use these names. Call once on the root (benchmarks do).
  void assign_paths(const std::string& prefix = "");
  const std::string& path() const { return path_; }
  const std::string& backend() const { return backend_; }
  // Multi-line tree of children and their repr().
  std::string summary() const;

 protected:
  Tensor& register_parameter(const std::string& name, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }
  // LibTorch's form: fc1 = register_module("fc1", ModuleHolder<Linear>(in, out));
  template <class M>
  ModuleHolder<M> register_module(const std::string& name, ModuleHolder<M> m) {
    children_.emplace_back(name, m.ptr());
    return m;
  }
  // Parameter/buffer slots by name (for layers that keep typed members pointing at them).
  Tensor& param(const std::string& name);
  Tensor& buffer(const std::string& name);
  // Called by train() on this module after its mode is set (before its children's): layers drop
  // eval-only caches here (Conv2d's folded batch norm).
  virtual void train_changed(bool training) { (void)training; }

 private:
  void collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out) const;
  void summary_into(std::string& out, const std::string& name, int depth) const;

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::string backend_;
  std::string path_;
};

using ModulePtr = std::shared_ptr<Module>;

// Runs children in order. Children are named "0", "1", ... unless named explicitly. A Conv2d or
// a BatchNorm followed by a ReLU runs as one fused kernel call (the ReLU a post-op of the
// convolution, or applied in batch norm's output pass), and in eval mode a Conv2d followed by a
// BatchNorm2d (and a ReLU) runs as one convolution with the batch norm folded into its weights
// (conv_bn, layers/conv.h), unless set_fusion(false) or KILN_FUSE=0; the fused children stay in
// the tree and the state dict.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<ModulePtr> mods);
  Sequential& add(ModulePtr m);
  Sequential& add(const std::string& name, ModulePtr m);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "Sequential"; }
  size_t size() const { return children().size(); }
  // Process-wide switch of the fusions above and of the folded batch norm and fused residual add
  // of ResNet's blocks (default on; KILN_FUSE=0 turns them off).
  static void set_fusion(bool on);
  static bool fusion();
  ModulePtr operator[](size_t i) const { return children()[i].second; }
};

// Wraps a function as a module (for layers without parameters in a Sequential).
class Lambda : public Module {
 public:
  Lambda(std::string name, std::function<Tensor(const Tensor&)> fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  Tensor forward(const Tensor& x) override { return fn_(x); }
  std::string repr() const override { return name_; }

 private:
  std::string name_;
  std::function<Tensor(const Tensor&)> fn_;
};

// Convenience: std::make_shared for modules.
template <class M, class... Args>
std::shared_ptr<M> make(Args&&... args) {
  return std::make_shared<M>(std::forward<Args>(args)...);
}

// LibTorch's module holder: owns a module by shared_ptr; calling it, with any arguments its
// forward takes, runs forward in the module's CallScope (backend preference, profiler); `->`
// reaches the module's members (conv->weight(), conv->forward(x)). Register a holder's module as a
// child with register_module(name, holder.ptr()).
//   ModuleHolder<Conv2d> conv(3, 64, 3);
//   Tensor y = conv(x);
template <class M>
class ModuleHolder {
 public:
  ModuleHolder() = default;  // empty: operator-> and calls throw until assigned
  ModuleHolder(std::shared_ptr<M> module) : impl_(std::move(module)) {}  // NOLINT: a shared_ptr is a holder
  template <class A0, class... A,
            std::enable_if_t<!std::is_same_v<std::decay_t<A0>, ModuleHolder> &&
                                 !std::is_convertible_v<std::decay_t<A0>, std::shared_ptr<M>>,
                             int> = 0>
  explicit ModuleHolder(A0&& a0, A&&... args)
      : impl_(std::make_shared<M>(std::forward<A0>(a0), std::forward<A>(args)...)) {}

  template <class... T>
  decltype(auto) operator()(T&&... xs) const {
    Module::CallScope scope(get());
    return get().forward(std::forward<T>(xs)...);
  }
  M* operator->() const { return &get(); }
  M& operator*() const { return get(); }
  const std::shared_ptr<M>& ptr() const { return impl_; }
  operator std::shared_ptr<Module>() const { return impl_; }  // NOLINT: for Sequential::add
  bool is_empty() const { return impl_ == nullptr; }

 private:
  M& get() const {
    if (!impl_) throw_empty();
    return *impl_;
  }
  [[noreturn]] static void throw_empty() { throw_empty_holder(); }
  std::shared_ptr<M> impl_;
};

// Mixed precision (a float16/bfloat16 input, float32 master weights): `t` (a weight, bias or
// initial state) as a copy in the input's half type, so the layer's op runs its half kernels (as
// PyTorch's autocast); the gradient flows back to the float32 master through the conversion.
// Any other combination returns `t` itself.
Tensor half_copy_for(const Tensor& t, const Tensor& x);

}  // namespace kiln
