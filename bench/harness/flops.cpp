// MAC counting from the autograd graph of one batch-1 forward pass; see flops.h.
#include "bench/harness/flops.h"

#include <cstring>
#include <unordered_set>
#include <vector>

#include "engine/autograd.h"
#include "engine/profiler.h"

namespace kiln::bench {
namespace {

const Shape* edge_shape(const Node& n, size_t i) {
  if (i >= n.next_edges.size() || !n.next_edges[i].valid()) return nullptr;
  const Edge& e = n.next_edges[i];
  if (e.input_nr >= e.fn->outputs.size()) return nullptr;
  return &e.fn->outputs[e.input_nr].sizes;
}

// MACs of one node, 0 for nodes that are not conv or linear.
double node_macs(const Node& n) {
  if (n.outputs.empty()) return 0;
  const std::string name = n.name();
  const double out = double(shape_numel(n.outputs[0].sizes));
  // A recurrent layer in one direction (engine/ops/rnn.cpp): inputs x, h0, c0, w_ih [G*H, I],
  // w_hh [G*H, Hout], b_ih, b_hh, w_hr [P, H]; output y [T, N, Hout]. Per step and sequence the
  // input and recurrent products and the projection.
  if (name == "LstmBackward" || name == "GruBackward" || name == "RnnTanhBackward" || name == "RnnReluBackward") {
    const Shape* wih = edge_shape(n, 3);
    const Shape* whh = edge_shape(n, 4);
    const Shape* whr = edge_shape(n, 7);
    if (!wih || !whh || wih->size() != 2 || whh->size() != 2) return 0;
    const double hout = double(n.outputs[0].sizes.back());
    const double steps = hout > 0 ? out / hout : 0;  // T * N
    double per_step = double(shape_numel(*wih)) + double(shape_numel(*whh));
    if (whr) per_step += double(shape_numel(*whr));
    return steps * per_step;
  }
  const Shape* w = edge_shape(n, 1);
  if (!w || w->empty() || (*w)[0] == 0) return 0;
  const double per_row = double(shape_numel(*w)) / double((*w)[0]);
  // Convolutions with their fused post-ops (ReLU, the residual sum: recorded where the residual
  // needs a gradient and the weights do not) alike; w [out, in/g, kh, kw].
  if (name == "Conv2dBackward" || name == "Conv2dReluBackward" || name == "Conv2dSumBackward" ||
      name == "Conv2dSumReluBackward")
    return out * per_row;
  if (name == "ConvTranspose2dBackward") {             // w [in, out/g, kh, kw]: each input pixel
    const Shape* x = edge_shape(n, 0);                 // scatters into out/g x kh x kw outputs
    return x ? double(shape_numel(*x)) * per_row : 0;
  }
  if (name == "LinearBackward") return out * per_row;  // w [out, in]
  return 0;
}

// Nodes that move no bytes: views share their input's storage, and a leaf's accumulator (made
// in the scope of the layer that first uses the leaf) is no op.
bool moves_nothing(const std::string& name) {
  return name == "ViewBackward" || name == "PermuteBackward" || name == "ExpandBackward" || name == "SliceBackward" ||
         name == "AccumulateGrad";
}

}  // namespace

MacCount count_macs(Module& net, const Shape& sample) {
  MacCount count;
  const bool was_training = net.is_training();
  const bool was_profiling = profiler::enabled();
  Shape shape = sample;
  shape.insert(shape.begin(), 1);
  net.eval();
  profiler::reset();
  profiler::enable(true);
  // The sample lives where the net does (a CUDA net refuses a CPU input).
  Device device{};
  for (const auto& [name, p] : net.named_parameters()) {
    device = p.device();
    break;
  }
  Tensor y;
  try {
    y = net(zeros(shape, TensorOptions(device).with_requires_grad()));
  } catch (...) {
    profiler::enable(was_profiling);
    profiler::reset();
    net.train(was_training);
    throw;
  }
  profiler::enable(was_profiling);
  std::vector<profiler::Row> rows = profiler::rows();
  profiler::reset();
  net.train(was_training);
  if (!y.defined() || !y.grad_fn()) return count;  // no parameter requires grad

  // A parameter's edge leads to its accumulator (the same node the graph holds).
  std::unordered_set<const Node*> param_nodes;
  for (const auto& [name, p] : net.named_parameters())
    if (p.requires_grad()) param_nodes.insert(autograd::gradient_edge(p).fn.get());

  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack{y.grad_fn().get()};
  seen.insert(stack.back());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    const double macs = node_macs(*n);
    // Scope ids index the profiler's rows from 1 (0: outside every layer).
    const std::string layer = n->scope > 0 && n->scope <= rows.size() ? rows[n->scope - 1].name : "";
    if (macs > 0) {
      count.total += macs;
      count.by_layer[layer] += macs;
    }
    if (!layer.empty() && !moves_nothing(n->name())) {
      double act = 0, param = 0;
      for (const OutputMeta& o : n->outputs) act += double(shape_numel(o.sizes));
      for (size_t i = 0; i < n->next_edges.size(); ++i)
        if (const Shape* s = edge_shape(*n, i))
          (param_nodes.count(n->next_edges[i].fn.get()) ? param : act) += double(shape_numel(*s));
      count.act_elems_by_layer[layer] += act;
      count.param_elems_by_layer[layer] += param;
    }
    for (const Edge& e : n->next_edges)
      if (e.valid() && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  return count;
}

}  // namespace kiln::bench
