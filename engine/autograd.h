// The dynamic tape. Each differentiable op records a Node whose next_edges point at the nodes
// that produced its inputs (or at AccumulateGrad for leaves). backward() runs the reachable
// graph in dependency order: a node runs once every consumer of its outputs has delivered a
// gradient, so a leaf's gradient is final when its AccumulateGrad runs, and its hooks fire then.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend_preference.h"
#include "engine/tensor.h"

namespace kiln {

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// Shape and dtype of one forward output, so the engine can supply zeros for outputs that
// received no gradient (an unused half of a split, say).
struct OutputMeta {
  Shape sizes;
  DType dtype = DType::float32;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  // grads[i] is the gradient of forward output i (never undefined). Returns one gradient per
  // next_edge (undefined where the input needs none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Drops tensors saved for backward; called after a backward pass without retain_graph.
  virtual void release_saved() {}

  std::vector<Edge> next_edges;
  std::vector<OutputMeta> outputs;
  // Non-leaf outputs whose gradient the user asked to keep (Tensor::retain_grad), by output_nr.
  std::vector<std::weak_ptr<TensorImpl>> retained_outputs;
  uint64_t sequence_nr;  // creation order: later nodes run first among ready ones
  uint32_t scope = 0;    // profiler scope (layer) open when the node was made
  // Backend override in force when the node was made; reinstated for its backward.
  std::shared_ptr<const BackendPreference> backend;
};

// Turns off recording in its scope (thread-local), like torch.no_grad().
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

namespace autograd {

bool grad_mode_enabled();

// True when recording is on and some input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Wires `node` into the graph: its next_edges come from `inputs` (in order), and it becomes the
// grad_fn of `outputs` (which then require grad). Call only when needs_grad(inputs).
void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
            const std::vector<Tensor*>& outputs);

// The edge a gradient for `t` flows into (grad_fn or the leaf's accumulator; invalid if none).
Edge gradient_edge(const Tensor& t);

// Runs backward from `roots` seeded with `grads` (same shapes).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph);

// Helper for ops: builds a Node from a lambda. `fn(grads)` returns input gradients.
template <class F>
class LambdaNode final : public Node {
 public:
  LambdaNode(const char* name, F fn) : name_(name), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    KILN_CHECK(fn_.has_value(), name_,
               ": backward through the graph a second time (its saved tensors were freed); "
               "pass retain_graph=true to the first backward()");
    return (*fn_)(grads);
  }
  std::string name() const override { return name_; }
  void release_saved() override { fn_.reset(); }  // frees the tensors the lambda captured

 private:
  const char* name_;
  std::optional<F> fn_;
};

// Records `fn` as the backward of an op with `inputs` and `outputs`, if gradients are needed.
// `fn(grads)` captures by value what backward needs; those captures are freed after a backward
// pass without retain_graph. `name` must be a string literal.
template <class F>
void record_fn(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outputs, F fn) {
  if (!needs_grad(inputs)) return;
  auto node = std::make_shared<LambdaNode<F>>(name, std::move(fn));
  record(node, inputs, outputs);
}

}  // namespace autograd
}  // namespace kiln
