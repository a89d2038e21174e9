#include "engine/autograd.h"

#include <atomic>
#include <queue>
#include <unordered_map>

#include "engine/ops/elementwise.h"
#include "engine/profiler.h"

namespace kiln {

namespace {
thread_local bool t_grad_mode = true;
std::atomic<uint64_t> g_sequence{0};

// Adds an incoming gradient to a leaf's .grad, then runs the leaf's hooks: the engine runs this
// node once per backward pass, after every path into the leaf has delivered its part.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0];
    if (!leaf_->grad) {
      // Keep the incoming buffer when nothing else can see it; otherwise own a copy, so a later
      // in-place update of .grad (zeroing, all-reduce) cannot touch another tensor.
      // A channels-last gradient stays channels-last (as the leaf it belongs to usually is).
      const MemoryFormat fmt = g.suggest_memory_format();
      bool exclusive = g.is_contiguous(fmt) && g.impl()->storage.use_count() == 1 && g.storage_offset() == 0;
      if (exclusive) {
        leaf_->grad = g.detach().impl_ptr();
      } else {
        Tensor own = empty_like(g, fmt);
        own.copy_(g.detach());
        leaf_->grad = own.impl_ptr();
      }
    } else {
      Tensor old(leaf_->grad);
      leaf_->grad = ops::add(old, g).impl_ptr();
    }
    Tensor leaf(leaf_);
    for (auto& hook : leaf_->post_accumulate_hooks) hook(leaf);
    return {};
  }
  std::string name() const override { return "AccumulateGrad"; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

OutputMeta meta_of(const Tensor& t) { return OutputMeta{t.sizes(), t.dtype(), t.device()}; }
}  // namespace

Node::Node()
    : sequence_nr(g_sequence.fetch_add(1)), scope(profiler::current_scope()), backend(detail::current_override()) {}

NoGradGuard::NoGradGuard() : prev_(t_grad_mode) { t_grad_mode = false; }
NoGradGuard::~NoGradGuard() { t_grad_mode = prev_; }

namespace autograd {

bool grad_mode_enabled() { return t_grad_mode; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_mode) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!t_grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl* i = t.impl();
  if (i->grad_fn) return {i->grad_fn, i->output_nr};
  std::shared_ptr<Node> acc = i->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->outputs.push_back(meta_of(t));
    i->grad_accumulator = acc;
  }
  return {acc, 0};
}

void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outputs) {
  node->next_edges.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next_edges.push_back(gradient_edge(t));
  for (size_t k = 0; k < outputs.size(); ++k) {
    TensorImpl* o = outputs[k]->impl();
    o->grad_fn = node;
    o->output_nr = uint32_t(k);
    o->requires_grad = true;
    node->outputs.push_back(meta_of(*outputs[k]));
  }
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  KILN_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " outputs but ", grads.size(), " gradients");
  // 1. Count, for every reachable node, how many edges lead into it.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::vector<Edge> root_edges;
  for (const Tensor& r : roots) {
    Edge e = gradient_edge(r);
    KILN_CHECK(e.valid(), "backward: output does not require grad");
    root_edges.push_back(e);
    if (deps.emplace(e.fn.get(), 0).second) stack.push_back(e.fn.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      auto [it, inserted] = deps.emplace(e.fn.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(e.fn.get());
    }
  }
  // 2. Gradient buffers per node input, seeded by the roots.
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto deliver = [&](const Edge& e, Tensor g) {
    auto& buf = buffers[e.fn.get()];
    if (buf.size() < e.fn->outputs.size()) buf.resize(e.fn->outputs.size());
    Tensor& slot = buf[e.input_nr];
    slot = slot.defined() ? ops::add(slot, g) : g;
  };
  NoGradGuard no_grad;
  for (size_t i = 0; i < roots.size(); ++i) deliver(root_edges[i], grads[i]);
  // 3. Run ready nodes, newest first (as PyTorch does), so activations are freed early.
  auto later = [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  for (auto& [n, d] : deps)
    if (d == 0) ready.push(n);
  std::vector<std::shared_ptr<Node>> keep;  // nodes stay alive until the pass ends
  for (const Edge& e : root_edges) keep.push_back(e.fn);
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> in = std::move(buffers[n]);
    buffers.erase(n);
    in.resize(n->outputs.size());
    for (size_t k = 0; k < in.size(); ++k) {
      const OutputMeta& m = n->outputs[k];
      if (!in[k].defined()) in[k] = zeros(m.sizes, TensorOptions(m.dtype).with_device(m.device));
      if (k < n->retained_outputs.size())
        if (auto t = n->retained_outputs[k].lock()) t->grad = in[k].impl_ptr();
    }
    const bool timed = profiler::enabled() && n->scope != 0;
    const int64_t t0 = timed ? profiler::now_ns() : 0;
    std::vector<Tensor> out;
    {
      BackendGuard backend(n->backend);
      out = n->apply(std::move(in));
    }
    if (timed) profiler::add_backward(n->scope, profiler::now_ns() - t0);
    KILN_CHECK(out.size() == n->next_edges.size() || n->next_edges.empty(), "backward: ", n->name(), " returned ",
               out.size(), " gradients for ", n->next_edges.size(), " inputs");
    for (size_t k = 0; k < n->next_edges.size(); ++k) {
      const Edge& e = n->next_edges[k];
      if (!e.valid()) continue;
      if (out[k].defined()) {
        const OutputMeta& m = e.fn->outputs[e.input_nr];
        KILN_CHECK(out[k].sizes() == m.sizes, "backward: ", n->name(), " produced a gradient of shape ",
                   shape_str(out[k].sizes()), " for input ", k, " of shape ", shape_str(m.sizes));
        deliver(e, out[k]);
      }
      keep.push_back(e.fn);
      if (--deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
    if (!retain_graph) n->release_saved();
  }
}

}  // namespace autograd
}  // namespace kiln
