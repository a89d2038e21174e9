#include "engine/function.h"

namespace kiln::autograd {

void AutogradContext::save_for_backward(std::vector<Tensor> tensors) {
  saved_ = std::move(tensors);
  versions_.clear();
  for (const Tensor& t : saved_) versions_.push_back(t.defined() ? t.version() : 0);
}

std::vector<Tensor> AutogradContext::get_saved_variables() const {
  KILN_CHECK(!released_, name_, ": backward through the graph a second time (its saved tensors were freed); "
             "pass retain_graph=true to the first backward()");
  for (size_t i = 0; i < saved_.size(); ++i)
    KILN_CHECK(!saved_[i].defined() || saved_[i].version() == versions_[i], name_, ": saved tensor ", i, " ",
               saved_[i].str(), " was modified in place after save_for_backward");
  return saved_;
}

namespace detail {

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  std::vector<Tensor> g = bw_(ctx_.get(), std::move(grads));
  const size_t ntensors = shapes_.size();
  std::vector<Tensor> out;
  if (g.size() == arg_is_tensor_.size() && g.size() != ntensors) {
    for (size_t i = 0; i < g.size(); ++i)
      if (arg_is_tensor_[i]) out.push_back(g[i]);
  } else {
    KILN_CHECK(g.size() == ntensors, name(), ".backward returned ", g.size(), " gradients; forward took ", ntensors,
               " Tensor arguments (", arg_is_tensor_.size(), " in all)");
    out = std::move(g);
  }
  for (size_t i = 0; i < out.size(); ++i)
    KILN_CHECK(!out[i].defined() || out[i].sizes() == shapes_[i], name(), ".backward: gradient ", i, " is ",
               shape_str(out[i].sizes()), " but its input is ", shape_str(shapes_[i]));
  return out;
}

}  // namespace detail
}  // namespace kiln::autograd
