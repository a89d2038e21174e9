// Custom autograd functions, as LibTorch's torch::autograd::Function: a struct with a static
// forward(ctx, args...) and a static backward(ctx, grads), called through apply(args...).
//
//   struct MulConst : autograd::Function<MulConst> {
//     static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double c) {
//       ctx->saved_data["c"] = c;
//       ctx->save_for_backward({x});
//       return x * c;
//     }
//     static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
//       return {g[0] * ctx->saved_data["c"]};  // one gradient per Tensor argument
//     }
//   };
//   Tensor y = MulConst::apply(x, 2.0);
//
// forward runs with recording off and returns a Tensor or a std::vector<Tensor>. backward gets
// one gradient per output (zeros where an output got none) and returns one per Tensor argument
// of forward, in order (or one per argument of any kind, LibTorch's convention: entries of
// non-Tensor arguments are ignored); an undefined Tensor means "no gradient". A gradient of the
// wrong shape, a saved tensor modified in place before backward, or a second backward without
// retain_graph is a kiln::Error naming the function (Derived::name() where it has one).
// Check a Function with autograd::gradcheck (engine/gradcheck.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/autograd.h"
#include "engine/tensor.h"

namespace kiln::autograd {

class AutogradContext {
 public:
  // Tensors backward needs; their storage's write count is noted and checked when read back.
  void save_for_backward(std::vector<Tensor> tensors);
  std::vector<Tensor> get_saved_variables() const;
  // Numbers backward needs.
  std::map<std::string, double> saved_data;

  const std::string& function_name() const { return name_; }
  void release() { saved_.clear(); versions_.clear(); released_ = true; }

 private:
  template <class D> friend struct Function;
  std::string name_;
  std::vector<Tensor> saved_;
  std::vector<uint64_t> versions_;
  bool released_ = false;
};

namespace detail {

template <class T> struct is_tensor : std::is_same<std::decay_t<T>, Tensor> {};

template <class D, class = void> struct has_name : std::false_type {};
template <class D> struct has_name<D, std::void_t<decltype(D::name())>> : std::true_type {};

// The backward of a Function: calls D::backward and maps its result onto the Tensor inputs.
class FunctionNode final : public Node {
 public:
  using Backward = std::vector<Tensor> (*)(AutogradContext*, std::vector<Tensor>);
  FunctionNode(std::shared_ptr<AutogradContext> ctx, Backward bw, std::vector<bool> arg_is_tensor,
               std::vector<Shape> input_shapes)
      : ctx_(std::move(ctx)), bw_(bw), arg_is_tensor_(std::move(arg_is_tensor)), shapes_(std::move(input_shapes)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return ctx_->function_name(); }
  void release_saved() override { ctx_->release(); }

 private:
  std::shared_ptr<AutogradContext> ctx_;
  Backward bw_;
  std::vector<bool> arg_is_tensor_;
  std::vector<Shape> shapes_;
};

inline void collect(std::vector<Tensor>&, std::vector<bool>&) {}
template <class A, class... R>
void collect(std::vector<Tensor>& tensors, std::vector<bool>& flags, const A& a, const R&... rest) {
  if constexpr (is_tensor<A>::value) tensors.push_back(a);
  flags.push_back(is_tensor<A>::value);
  collect(tensors, flags, rest...);
}

}  // namespace detail

template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    if constexpr (detail::has_name<Derived>::value) ctx->name_ = Derived::name();
    else ctx->name_ = "Function";
    std::vector<Tensor> inputs;
    std::vector<bool> is_tensor;
    detail::collect(inputs, is_tensor, args...);
    using Out = decltype(Derived::forward(ctx.get(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, std::vector<Tensor>>,
                  "Function::forward must return a Tensor or a std::vector<Tensor>");
    Out out;
    {
      NoGradGuard ng;
      out = Derived::forward(ctx.get(), std::forward<Args>(args)...);
    }
    if (!needs_grad(inputs)) return out;
    std::vector<Shape> shapes;
    for (const Tensor& t : inputs) shapes.push_back(t.defined() ? t.sizes() : Shape{});
    auto node = std::make_shared<detail::FunctionNode>(ctx, &Derived::backward, is_tensor, shapes);
    // New TensorImpls over the same storage: an output that is an input must not become its own
    // grad_fn's input.
    std::vector<Tensor*> outs;
    if constexpr (std::is_same_v<Out, Tensor>) {
      out = out.detach();
      outs.push_back(&out);
    } else {
      for (Tensor& t : out) {
        t = t.detach();
        outs.push_back(&t);
      }
    }
    record(node, inputs, outs);
    return out;
  }
};

}  // namespace kiln::autograd
