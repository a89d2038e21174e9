// ONNX import (io/onnx/onnx.h): a Module that runs an ONNX graph node by node with kiln ops, so
// `kiln bench --model file.onnx` times a user's own net like a zoo net (forward and, since the
// initializers are parameters, forward+backward too).
//
// A wrong answer is never acceptable, a refusal always is: every node is checked when the model is
// imported (its op's schema version at the model's opset, input and output counts, every attribute:
// io/onnx/onnx_ops.h), and the graph then runs once at its declared input shape, so what depends on
// shapes is refused at import too. Errors name the node, the op, the attribute and the opset.
// The spatial ops are in onnx_spatial.cpp, Pad/Slice/Resize/Upsample in onnx_resize.cpp.
//   kiln bench --model mnist.onnx --batch 8 --iters 2
//   ctest --test-dir build -R onnx
#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd.h"
#include "engine/checked_size.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "io/onnx/onnx_ops.h"

namespace kiln::onnx {
namespace detail {

// ---- NodeCtx

NodeCtx::NodeCtx(const Node& n, size_t index, int64_t opset_, int64_t version_, const Constants& c)
    : node(n), opset(opset_), version(version_), consts_(c) {
  where_ = "onnx import: node " + (n.name.empty() ? "#" + std::to_string(index) : "'" + n.name + "'") + " (" +
           n.op_type + ", opset " + std::to_string(opset) + "): ";
}

const Attribute* NodeCtx::get(const char* name, int32_t type) {
  const Attribute* a = node.attr(name);
  if (!a) return nullptr;
  used_.insert(name);
  static const char* names[] = {"", "float", "int", "string", "tensor", "graph", "floats", "ints"};
  if (a->type != type)
    refuse("attribute '", name, "' has type ", a->type >= 0 && a->type < 8 ? names[a->type] : "?", ", expected ",
           names[type]);
  return a;
}
int64_t NodeCtx::i(const char* name, int64_t dflt) {
  const Attribute* a = get(name, kAttrInt);
  return a ? a->i : dflt;
}
double NodeCtx::f(const char* name, double dflt) {
  const Attribute* a = get(name, kAttrFloat);
  return a ? double(a->f) : dflt;
}
std::string NodeCtx::s(const char* name, const std::string& dflt) {
  const Attribute* a = get(name, kAttrString);
  return a ? a->s : dflt;
}
std::vector<int64_t> NodeCtx::ints(const char* name, const std::vector<int64_t>& dflt) {
  const Attribute* a = get(name, kAttrInts);
  return a ? a->ints : dflt;
}
std::vector<float> NodeCtx::floats(const char* name, const std::vector<float>& dflt) {
  const Attribute* a = get(name, kAttrFloats);
  return a ? a->floats : dflt;
}

bool NodeCtx::is_const(size_t k) const {
  return has_input(k) && (consts_.ints.count(node.inputs[k]) || consts_.floats.count(node.inputs[k]));
}
std::vector<int64_t> NodeCtx::const_ints(size_t k, const char* what) const {
  if (!has_input(k)) refuse("input ", k, " (", what, ") is missing");
  auto it = consts_.ints.find(node.inputs[k]);
  if (it == consts_.ints.end())
    refuse("input ", k, " (", what, ", '", node.inputs[k],
           "') must be a constant integer tensor (an initializer or a Constant node): kiln fixes it at import");
  return it->second;
}
std::vector<float> NodeCtx::const_floats(size_t k, const char* what) const {
  if (!has_input(k)) refuse("input ", k, " (", what, ") is missing");
  auto it = consts_.floats.find(node.inputs[k]);
  if (it == consts_.floats.end())
    refuse("input ", k, " (", what, ", '", node.inputs[k],
           "') must be a constant float tensor (an initializer or a Constant node): kiln fixes it at import");
  return *it->second;
}
void NodeCtx::finish() const {
  for (const Attribute& a : node.attrs)
    if (!used_.count(a.name))
      refuse("attribute '", a.name, "' is not implemented by kiln for ", node.op_type, "-", version,
             " (or is not an attribute of it)");
}

int64_t norm_axis(const NodeCtx& c, int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank) c.refuse(what, " ", axis, " is out of range for a ", rank, "-d input");
  return axis < 0 ? axis + rank : axis;
}

Tensor take(const Tensor& x, int64_t axis, const std::vector<int64_t>& idx) {
  // Runs of equal indices become one expanded slice, runs of consecutive ones one slice.
  std::vector<Tensor> parts;
  for (size_t a = 0; a < idx.size();) {
    size_t b = a + 1;
    if (b < idx.size() && idx[b] == idx[a]) {
      while (b < idx.size() && idx[b] == idx[a]) ++b;
      Shape s = x.sizes();
      s[size_t(axis)] = int64_t(b - a);
      parts.push_back(x.slice(axis, idx[a], idx[a] + 1).expand(s));
    } else {
      while (b < idx.size() && idx[b] == idx[b - 1] + 1) ++b;
      parts.push_back(x.slice(axis, idx[a], idx[b - 1] + 1));
    }
    a = b;
  }
  if (parts.size() == 1) return parts[0].contiguous();
  return ops::cat(parts, axis);
}

namespace {

// Each mapped op's schema versions (onnx.defs, onnx 1.23: since_version, inputs min / max (-1:
// variadic), outputs max). The version in force at opset N is the newest since_version <= N.
struct Version {
  int64_t since;
  int min_in, max_in, max_out;
};
const std::map<std::string, std::vector<Version>>& schemas() {
  static const std::map<std::string, std::vector<Version>> t = {
      {"Add", {{1, 2, 2, 1}, {6, 2, 2, 1}, {7, 2, 2, 1}, {13, 2, 2, 1}, {14, 2, 2, 1}}},
      {"AveragePool", {{1, 1, 1, 1}, {7, 1, 1, 1}, {10, 1, 1, 1}, {11, 1, 1, 1}, {19, 1, 1, 1}, {22, 1, 1, 1}}},
      {"BatchNormalization", {{1, 5, 5, 5}, {6, 5, 5, 5}, {7, 5, 5, 5}, {9, 5, 5, 5}, {14, 5, 5, 3}, {15, 5, 5, 3}}},
      {"Concat", {{1, 1, -1, 1}, {4, 1, -1, 1}, {11, 1, -1, 1}, {13, 1, -1, 1}}},
      {"Constant", {{1, 0, 0, 1}, {9, 0, 0, 1}, {11, 0, 0, 1}, {12, 0, 0, 1}, {13, 0, 0, 1}, {19, 0, 0, 1},
                    {21, 0, 0, 1}, {23, 0, 0, 1}, {24, 0, 0, 1}, {25, 0, 0, 1}}},
      {"Conv", {{1, 2, 3, 1}, {11, 2, 3, 1}, {22, 2, 3, 1}}},
      {"ConvTranspose", {{1, 2, 3, 1}, {11, 2, 3, 1}, {22, 2, 3, 1}}},
      {"Div", {{1, 2, 2, 1}, {6, 2, 2, 1}, {7, 2, 2, 1}, {13, 2, 2, 1}, {14, 2, 2, 1}}},
      {"Dropout",
       {{1, 1, 1, 2}, {6, 1, 1, 2}, {7, 1, 1, 2}, {10, 1, 1, 2}, {12, 1, 3, 2}, {13, 1, 3, 2}, {22, 1, 3, 2}}},
      {"Flatten", {{1, 1, 1, 1}, {9, 1, 1, 1}, {11, 1, 1, 1}, {13, 1, 1, 1}, {21, 1, 1, 1}, {23, 1, 1, 1},
                   {24, 1, 1, 1}, {25, 1, 1, 1}}},
      {"Gemm", {{1, 3, 3, 1}, {6, 3, 3, 1}, {7, 3, 3, 1}, {9, 3, 3, 1}, {11, 2, 3, 1}, {13, 2, 3, 1}}},
      {"GlobalAveragePool", {{1, 1, 1, 1}, {22, 1, 1, 1}}},
      {"GlobalMaxPool", {{1, 1, 1, 1}, {22, 1, 1, 1}}},
      {"Identity", {{1, 1, 1, 1}, {13, 1, 1, 1}, {14, 1, 1, 1}, {16, 1, 1, 1}, {19, 1, 1, 1}, {21, 1, 1, 1},
                    {23, 1, 1, 1}, {24, 1, 1, 1}, {25, 1, 1, 1}}},
      {"LeakyRelu", {{1, 1, 1, 1}, {6, 1, 1, 1}, {16, 1, 1, 1}}},
      {"LogSoftmax", {{1, 1, 1, 1}, {11, 1, 1, 1}, {13, 1, 1, 1}}},
      {"LRN", {{1, 1, 1, 1}, {13, 1, 1, 1}}},
      {"MatMul", {{1, 2, 2, 1}, {9, 2, 2, 1}, {13, 2, 2, 1}}},
      {"MaxPool", {{1, 1, 1, 1}, {8, 1, 1, 2}, {10, 1, 1, 2}, {11, 1, 1, 2}, {12, 1, 1, 2}, {22, 1, 1, 2}}},
      {"Mul", {{1, 2, 2, 1}, {6, 2, 2, 1}, {7, 2, 2, 1}, {13, 2, 2, 1}, {14, 2, 2, 1}}},
      {"Pad", {{1, 1, 1, 1}, {2, 1, 1, 1}, {11, 2, 3, 1}, {13, 2, 3, 1}, {18, 2, 4, 1}, {19, 2, 4, 1}, {21, 2, 4, 1},
               {23, 2, 4, 1}, {24, 2, 4, 1}, {25, 2, 4, 1}}},
      {"ReduceMean", {{1, 1, 1, 1}, {11, 1, 1, 1}, {13, 1, 1, 1}, {18, 1, 2, 1}}},
      {"Relu", {{1, 1, 1, 1}, {6, 1, 1, 1}, {13, 1, 1, 1}, {14, 1, 1, 1}}},
      {"Reshape", {{1, 1, 1, 1}, {5, 2, 2, 1}, {13, 2, 2, 1}, {14, 2, 2, 1}, {19, 2, 2, 1}, {21, 2, 2, 1},
                   {23, 2, 2, 1}, {24, 2, 2, 1}, {25, 2, 2, 1}}},
      {"Resize", {{10, 2, 2, 1}, {11, 3, 4, 1}, {13, 1, 4, 1}, {18, 1, 4, 1}, {19, 1, 4, 1}}},
      {"Sigmoid", {{1, 1, 1, 1}, {6, 1, 1, 1}, {13, 1, 1, 1}}},
      {"Slice", {{1, 1, 1, 1}, {10, 3, 5, 1}, {11, 3, 5, 1}, {13, 3, 5, 1}}},
      {"Softmax", {{1, 1, 1, 1}, {11, 1, 1, 1}, {13, 1, 1, 1}}},
      {"Squeeze", {{1, 1, 1, 1}, {11, 1, 1, 1}, {13, 1, 2, 1}, {21, 1, 2, 1}, {23, 1, 2, 1}, {24, 1, 2, 1},
                   {25, 1, 2, 1}}},
      {"Sub", {{1, 2, 2, 1}, {6, 2, 2, 1}, {7, 2, 2, 1}, {13, 2, 2, 1}, {14, 2, 2, 1}}},
      {"Sum", {{1, 1, -1, 1}, {6, 1, -1, 1}, {8, 1, -1, 1}, {13, 1, -1, 1}}},
      {"Tanh", {{1, 1, 1, 1}, {6, 1, 1, 1}, {13, 1, 1, 1}}},
      {"Transpose", {{1, 1, 1, 1}, {13, 1, 1, 1}, {21, 1, 1, 1}, {23, 1, 1, 1}, {24, 1, 1, 1}, {25, 1, 1, 1}}},
      {"Unsqueeze", {{1, 1, 1, 1}, {11, 1, 1, 1}, {13, 2, 2, 1}, {21, 2, 2, 1}, {23, 2, 2, 1}, {24, 2, 2, 1},
                     {25, 2, 2, 1}}},
      {"Upsample", {{1, 1, 1, 1}, {7, 1, 1, 1}, {9, 2, 2, 1}, {10, 2, 2, 1}}},
  };
  return t;
}

std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (const auto& [op, versions] : schemas()) v.push_back(op);
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// ---- the ops with no spatial structure

// ONNX MatMul (numpy.matmul): 1-d operands get a dim of 1 prepended (a) or appended (b) and
// removed after; the dims before the last two broadcast.
Tensor matmul_nd(const NodeCtx& c, Tensor a, Tensor b) {
  if (a.dim() == 0 || b.dim() == 0) c.refuse("MatMul of a 0-d tensor is not defined");
  const bool vec_a = a.dim() == 1, vec_b = b.dim() == 1;
  if (vec_a) a = a.unsqueeze(0);
  if (vec_b) b = b.unsqueeze(1);
  const int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  if (k != k2) c.refuse("MatMul operands ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), " do not chain");
  Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  const size_t r = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), r - ba.size(), 1);
  bb.insert(bb.begin(), r - bb.size(), 1);
  Shape batch(r);
  for (size_t d = 0; d < r; ++d) {
    if (ba[d] != bb[d] && ba[d] != 1 && bb[d] != 1)
      c.refuse("MatMul batch dims of ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), " do not broadcast");
    batch[d] = ba[d] == 1 ? bb[d] : ba[d];
  }
  const int64_t nb = shape_numel(batch);
  const bool b_shared = shape_numel(bb) == 1;  // one b for every batch: a's rows go to one GEMM
  Tensor y;
  if (b_shared) {
    Shape as = batch;
    as.push_back(m), as.push_back(k);
    y = ops::matmul(a.expand(as).reshape({nb * m, k}), b.reshape({k, n}));
  } else {
    Shape as = batch, bs = batch;
    as.push_back(m), as.push_back(k), bs.push_back(k), bs.push_back(n);
    y = ops::matmul(a.expand(as).reshape({nb, m, k}), b.expand(bs).reshape({nb, k, n}));
  }
  Shape out = batch;
  if (!vec_a) out.push_back(m);
  if (!vec_b) out.push_back(n);
  return y.reshape(out);
}

// Softmax / LogSoftmax before opset 13: the input taken as 2-d [prod(dims < axis), prod(rest)]
// (axis default 1) and normalised over the second dim; from 13 over `axis` alone (default -1).
OpFn softmax_op(NodeCtx& c) {
  const bool log = c.node.op_type == "LogSoftmax";
  const bool coerce = c.version < 13;
  const int64_t axis = c.i("axis", coerce ? 1 : -1);
  return [&c, log, coerce, axis](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const int64_t r = x.dim();
    if (!coerce) {
      const int64_t a = norm_axis(c, axis, r, "axis");
      return log ? ops::log_softmax(x, a) : ops::softmax(x, a);
    }
    if (axis < -r || axis > r) c.refuse("axis ", axis, " is out of range for a ", r, "-d input");
    const int64_t a = axis < 0 ? axis + r : axis;
    int64_t outer = 1;
    for (int64_t d = 0; d < a; ++d) outer *= x.size(d);
    const Tensor x2 = x.reshape({outer, x.numel() / std::max<int64_t>(outer, 1)});
    return (log ? ops::log_softmax(x2, 1) : ops::softmax(x2, 1)).reshape(x.sizes());
  };
}

OpFn gemm_op(NodeCtx& c) {
  const double alpha = c.f("alpha", 1.0), beta = c.f("beta", 1.0);
  const bool ta = c.i("transA", 0) != 0, tb = c.i("transB", 0) != 0;
  return [&c, alpha, beta, ta, tb](const std::vector<Tensor>& in) {
    const Tensor &a = in[0], &b = in[1];
    if (a.dim() != 2 || b.dim() != 2)
      c.refuse("Gemm takes 2-d A and B, got ", shape_str(a.sizes()), " and ", shape_str(b.sizes()));
    const Tensor& cc = in.size() > 2 ? in[2] : Tensor();
    const int64_t n = tb ? b.size(0) : b.size(1);
    // The common form (PyTorch's Linear): one fused GEMM with the bias.
    if (alpha == 1.0 && beta == 1.0 && !ta && cc.defined() && cc.numel() == n && cc.dim() >= 1 &&
        cc.size(-1) == n && cc.dim() <= 2)
      return ops::linear(a, tb ? b : b.t(), cc.reshape({n}));
    Tensor y = ops::matmul(ta ? a.t() : a, tb ? b.t() : b);
    if (alpha != 1.0) y = ops::mul(y, alpha);
    if (cc.defined()) {
      if (cc.dim() > 2) c.refuse("C ", shape_str(cc.sizes()), " has more than 2 dims");
      const Shape prod = y.sizes();
      y = ops::add(y, beta == 1.0 ? cc : ops::mul(cc, beta));
      // C broadcasts to the product's [M, N] one way only.
      if (y.sizes() != prod) c.refuse("C ", shape_str(cc.sizes()), " does not broadcast to ", shape_str(prod));
    }
    return y;
  };
}

OpFn batch_norm_op(NodeCtx& c) {
  const double eps = c.f("epsilon", 1e-5);
  c.ignore("momentum");  // updates running statistics in training only
  if (c.version < 9 && c.i("spatial", 1) != 1)
    c.refuse("attribute 'spatial' = 0 (per-activation statistics) is not implemented");
  if (c.version >= 14 && c.i("training_mode", 0) != 0)
    c.refuse("attribute 'training_mode' = 1 is not implemented (export the model in eval mode)");
  return [&c, eps](const std::vector<Tensor>& in) {
    if (in[0].dim() < 2) c.refuse("input ", shape_str(in[0].sizes()), " has fewer than 2 dims");
    return ops::batch_norm(in[0], in[1], in[2], in[3].detach(), in[4].detach(), false, 0.1, eps);
  };
}

OpFn dropout_op(NodeCtx& c) {
  // Inference: the output is the input. The ratio (attribute before opset 12, an input after) and
  // the seed only matter in training.
  if (c.version < 12) {
    c.ignore("ratio");
  } else {
    c.ignore("seed");
    if (c.has_input(2)) {
      const std::vector<int64_t> t = c.const_ints(2, "training_mode");
      if (t.size() != 1 || t[0] != 0) c.refuse("training_mode true is not implemented (kiln runs inference)");
    }
  }
  return [](const std::vector<Tensor>& in) { return in[0]; };
}

OpFn reshape_op(NodeCtx& c) {
  const std::vector<int64_t> shape = c.const_ints(1, "shape");
  const bool allowzero = c.version >= 14 && c.i("allowzero", 0) != 0;
  if (std::count(shape.begin(), shape.end(), -1) > 1) c.refuse("shape has more than one -1");
  for (int64_t s : shape)
    if (s < -1) c.refuse("shape has the size ", s);
  if (allowzero && std::count(shape.begin(), shape.end(), 0) > 0)
    c.refuse("allowzero = 1 with a 0 in the shape (an empty tensor) is not implemented");
  return [&c, shape](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Shape s = shape;
    int64_t known = 1, infer = -1;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 0) {
        if (int64_t(d) >= x.dim()) c.refuse("shape copies dim ", d, " of a ", x.dim(), "-d input");
        s[d] = x.size(int64_t(d));
      }
      if (s[d] == -1) infer = int64_t(d);
      else known = int64_t(checked_mul(uint64_t(known), uint64_t(s[d]), "onnx import: Reshape's shape"));
    }
    if (infer >= 0) {
      if (known == 0 || x.numel() % known != 0)
        c.refuse("cannot reshape ", shape_str(x.sizes()), " to ", shape_str(shape));
      s[size_t(infer)] = x.numel() / known;
    }
    if (shape_numel(s) != x.numel()) c.refuse("cannot reshape ", shape_str(x.sizes()), " to ", shape_str(shape));
    return x.reshape(s);
  };
}

// ReduceMean: axes an attribute before opset 18, an input after (empty: every dim, or none with
// noop_with_empty_axes).
OpFn reduce_mean_op(NodeCtx& c) {
  std::vector<int64_t> axes;
  bool noop = false;
  if (c.version < 18) {
    axes = c.ints("axes", {});
  } else {
    if (c.has_input(1)) axes = c.const_ints(1, "axes");
    noop = c.i("noop_with_empty_axes", 0) != 0;
  }
  const bool keep = c.i("keepdims", 1) != 0;
  return [&c, axes, noop, keep](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    if (axes.empty() && noop) return x;
    std::vector<int64_t> dims = axes;
    if (dims.empty())
      for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
    std::vector<bool> seen(size_t(x.dim()), false);
    for (int64_t& d : dims) {
      d = norm_axis(c, d, x.dim(), "axis");
      if (seen[size_t(d)]) c.refuse("axis ", d, " is given twice");
      seen[size_t(d)] = true;
    }
    if (x.dim() == 0) return x;
    return ops::mean(x, dims, keep);
  };
}

// Squeeze / Unsqueeze: axes an attribute before opset 13, an input after. Squeeze without axes
// drops every dim of size 1; Unsqueeze's axes index the output.
OpFn squeeze_op(NodeCtx& c) {
  const bool un = c.node.op_type == "Unsqueeze";
  std::vector<int64_t> axes;
  if (c.version < 13) axes = c.ints("axes", {});
  else if (c.has_input(1)) axes = c.const_ints(1, "axes");
  if (un && axes.empty()) c.refuse("axes are required");
  return [&c, un, axes](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const int64_t r = x.dim() + (un ? int64_t(axes.size()) : 0);
    std::vector<bool> pick(size_t(r), false);
    for (int64_t a : axes) {
      const int64_t d = norm_axis(c, a, r, "axis");
      if (pick[size_t(d)]) c.refuse("axis ", d, " is given twice");
      pick[size_t(d)] = true;
    }
    Shape s;
    if (un) {
      for (int64_t d = 0, k = 0; d < r; ++d) s.push_back(pick[size_t(d)] ? 1 : x.size(k++));
    } else {
      for (int64_t d = 0; d < r; ++d) {
        const bool drop = axes.empty() ? x.size(d) == 1 : bool(pick[size_t(d)]);
        if (drop && x.size(d) != 1) c.refuse("dim ", d, " of ", shape_str(x.sizes()), " is not 1");
        if (!drop) s.push_back(x.size(d));
      }
    }
    return x.reshape(s);
  };
}

OpFn simple_op(NodeCtx& c) {
  const std::string& op = c.node.op_type;
  if (op == "Add") return [](const std::vector<Tensor>& in) { return ops::add(in[0], in[1]); };
  if (op == "Sub") return [](const std::vector<Tensor>& in) { return ops::sub(in[0], in[1]); };
  if (op == "Mul") return [](const std::vector<Tensor>& in) { return ops::mul(in[0], in[1]); };
  if (op == "Div") return [](const std::vector<Tensor>& in) { return ops::div(in[0], in[1]); };
  if (op == "Sum")
    return [](const std::vector<Tensor>& in) {
      Tensor y = in[0];
      for (size_t k = 1; k < in.size(); ++k) y = ops::add(y, in[k]);
      return y;
    };
  if (op == "Relu") return [](const std::vector<Tensor>& in) { return ops::relu(in[0]); };
  if (op == "Sigmoid") return [](const std::vector<Tensor>& in) { return ops::sigmoid(in[0]); };
  if (op == "Tanh") return [](const std::vector<Tensor>& in) { return ops::tanh(in[0]); };
  if (op == "Identity") return [](const std::vector<Tensor>& in) { return in[0]; };
  if (op == "LeakyRelu") {
    const double alpha = c.f("alpha", 0.01);
    return [alpha](const std::vector<Tensor>& in) { return ops::leaky_relu(in[0], alpha); };
  }
  if (op == "Softmax" || op == "LogSoftmax") return softmax_op(c);
  if (op == "Gemm") return gemm_op(c);
  if (op == "MatMul") return [&c](const std::vector<Tensor>& in) { return matmul_nd(c, in[0], in[1]); };
  if (op == "BatchNormalization") return batch_norm_op(c);
  if (op == "Dropout") return dropout_op(c);
  if (op == "Reshape") return reshape_op(c);
  if (op == "ReduceMean") return reduce_mean_op(c);
  if (op == "Squeeze" || op == "Unsqueeze") return squeeze_op(c);
  if (op == "LRN") {
    const int64_t size = c.i("size", 0);
    const double alpha = c.f("alpha", 1e-4), beta = c.f("beta", 0.75), bias = c.f("bias", 1.0);
    // ONNX sums channels [c - floor((size-1)/2), c + ceil((size-1)/2)], kiln (PyTorch)
    // [c - size/2, c + (size-1)/2]: the same window for odd sizes only.
    if (size <= 0 || size % 2 == 0) c.refuse("attribute 'size' = ", size, ": kiln's LRN window is odd-sized");
    return [&c, size, alpha, beta, bias](const std::vector<Tensor>& in) {
      if (in[0].dim() != 4) c.refuse("LRN of a ", in[0].dim(), "-d input is not implemented (4-d only)");
      return ops::local_response_norm(in[0], size, alpha, beta, bias);
    };
  }
  if (op == "Concat") {
    if (!c.has("axis")) c.refuse("attribute 'axis' is required");
    const int64_t axis = c.i("axis", 0);
    return [&c, axis](const std::vector<Tensor>& in) {
      return ops::cat(in, norm_axis(c, axis, in[0].dim(), "axis"));
    };
  }
  if (op == "Flatten") {
    const int64_t axis = c.i("axis", 1);
    return [&c, axis](const std::vector<Tensor>& in) {
      const Tensor& x = in[0];
      if (axis < -x.dim() || axis > x.dim()) c.refuse("axis ", axis, " is out of range for a ", x.dim(), "-d input");
      const int64_t a = axis < 0 ? axis + x.dim() : axis;
      int64_t outer = 1;
      for (int64_t d = 0; d < a; ++d) outer *= x.size(d);
      return x.reshape({outer, outer == 0 ? 0 : x.numel() / outer});
    };
  }
  if (op == "Transpose") {
    const std::vector<int64_t> perm = c.ints("perm", {});
    return [&c, perm](const std::vector<Tensor>& in) {
      const Tensor& x = in[0];
      std::vector<int64_t> p = perm;
      if (p.empty())
        for (int64_t d = x.dim() - 1; d >= 0; --d) p.push_back(d);
      std::vector<int64_t> sorted = p;
      std::sort(sorted.begin(), sorted.end());
      for (size_t d = 0; d < sorted.size(); ++d)
        if (sorted[d] != int64_t(d) || int64_t(p.size()) != x.dim())
          c.refuse("perm is not a permutation of the ", x.dim(), " dims");
      return x.permute(p).contiguous();
    };
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return global_pool_op(c);
  if (op == "Conv") return conv_op(c);
  if (op == "ConvTranspose") return conv_transpose_op(c);
  if (op == "MaxPool" || op == "AveragePool") return pool_op(c);
  if (op == "Pad") return pad_op(c);
  if (op == "Slice") return slice_op(c);
  if (op == "Resize" || op == "Upsample") return resize_op(c);
  c.refuse("op not mapped");
}

Tensor to_tensor(const TensorData& t) {
  if (t.elem_type == kFloat) return from_vector(t.f, t.dims, TensorOptions(DType::float32));
  return from_vector(std::vector<double>(t.i.begin(), t.i.end()), t.dims, TensorOptions(DType::float32));
}

class OnnxNet : public Module {
 public:
  explicit OnnxNet(const Model& m) : graph_(m.graph), opset_(m.opset) {
    KILN_CHECK(opset_ >= kOldestOpset && opset_ <= kNewestOpset, "onnx import: the model's opset (ai.onnx) is ",
               opset_, "; kiln reads opsets ", kOldestOpset, " to ", kNewestOpset,
               opset_ == 0 ? " (the model imports no default-domain opset)" : "");
    std::unordered_set<std::string> init_names;
    for (const TensorData& t : graph_.initializers) {
      init_names.insert(t.name);
      if (t.elem_type == kInt64) {
        consts_.ints[t.name] = t.i;
      } else {
        consts_.floats[t.name] = &t.f;
        register_parameter(t.name, to_tensor(t));
      }
    }
    for (const ValueInfo& v : graph_.inputs)
      if (!init_names.count(v.name)) inputs_.push_back(v);
    KILN_CHECK(inputs_.size() == 1, "onnx import: kiln runs graphs with one input, this one has ", inputs_.size());
    KILN_CHECK(inputs_[0].elem_type == kFloat, "onnx import: the graph input '", inputs_[0].name,
               "' has element type ", elem_type_name(inputs_[0].elem_type), "; kiln computes in float32");
    KILN_CHECK(graph_.outputs.size() == 1, "onnx import: the graph has ", graph_.outputs.size(),
               " outputs; kiln's module returns one");
    KILN_CHECK(graph_.outputs[0].elem_type == kFloat || graph_.outputs[0].elem_type == 0,
               "onnx import: the graph output '", graph_.outputs[0].name, "' has element type ",
               elem_type_name(graph_.outputs[0].elem_type), "; kiln computes in float32");
    build_steps();
    plan_frees(init_names);
    trial_run();
  }

  std::string repr() const override {
    return "OnnxNet(" + graph_.name + ", " + std::to_string(graph_.nodes.size()) + " nodes)";
  }

  Tensor forward(const Tensor& x) override {
    std::unordered_map<std::string, Tensor> env;
    for (auto& [name, t] : named_parameters(false)) env[name] = t;
    for (auto& [name, t] : const_tensors_) env[name] = t;
    env[inputs_[0].name] = x;
    for (Step& s : steps_) {
      std::vector<Tensor> in(s.node->inputs.size());
      for (size_t k = 0; k < in.size(); ++k)
        if (s.tensor_input[k]) in[k] = env.at(s.node->inputs[k]);
      try {
        env[s.node->outputs[0]] = s.fn(in);
      } catch (const Error& e) {
        if (e.message().rfind("onnx import:", 0) == 0) throw;
        throw Error(s.ctx->where() + e.message(), __FILE__, __LINE__);
      }
      for (const std::string& name : s.frees) env.erase(name);
    }
    return env.at(graph_.outputs[0].name);
  }

 private:
  struct Step {
    const Node* node;
    std::unique_ptr<NodeCtx> ctx;  // the closures refer to it (its where() for run-time errors)
    OpFn fn;
    std::vector<bool> tensor_input;  // read from the environment (else absent or fixed at import)
    std::vector<std::string> frees;  // values no later step reads: freed after this one
  };

  static const Version* version_at(const std::string& op, int64_t opset) {
    const auto& vs = schemas().at(op);
    const Version* v = nullptr;
    for (const Version& x : vs)
      if (x.since <= opset) v = &x;
    return v;
  }

  void add_constant(NodeCtx& c) {
    const std::string& out = c.node.outputs[0];
    if (c.has("sparse_value") || c.has("value_string") || c.has("value_strings"))
      c.refuse("sparse and string constants are not implemented");
    int given = 0;
    for (const char* a : {"value", "value_float", "value_floats", "value_int", "value_ints"}) given += c.has(a);
    if (given != 1) c.refuse("needs exactly one value attribute, has ", given);
    if (c.has("value")) {
      const Attribute* a = c.node.attr("value");
      if (a->type != kAttrTensor) c.refuse("attribute 'value' is not a tensor");
      c.ignore("value");
      if (a->t.elem_type == kInt64) {
        consts_.ints[out] = a->t.i;
      } else {
        const_floats_[out] = a->t.f;
        const_tensors_[out] = to_tensor(a->t);
      }
    } else if (c.version >= 12 && c.has("value_float")) {
      const_floats_[out] = {float(c.f("value_float", 0))};
      const_tensors_[out] = from_vector(const_floats_[out], {}, TensorOptions(DType::float32));
    } else if (c.version >= 12 && c.has("value_floats")) {
      const_floats_[out] = c.floats("value_floats", {});
      const_tensors_[out] = from_vector(const_floats_[out], {int64_t(const_floats_[out].size())},
                                        TensorOptions(DType::float32));
    } else if (c.version >= 12 && c.has("value_int")) {
      consts_.ints[out] = {c.i("value_int", 0)};
    } else if (c.version >= 12 && c.has("value_ints")) {
      consts_.ints[out] = c.ints("value_ints", {});
    }
    if (const_floats_.count(out)) consts_.floats[out] = &const_floats_.at(out);
    c.finish();
  }

  void build_steps() {
    std::unordered_set<std::string> made;  // values available to later nodes
    for (const ValueInfo& v : inputs_) made.insert(v.name);
    for (const auto& [name, v] : consts_.ints) made.insert(name);
    for (const auto& [name, v] : consts_.floats) made.insert(name);
    for (size_t k = 0; k < graph_.nodes.size(); ++k) {
      const Node& n = graph_.nodes[k];
      const std::string at = "onnx import: node " + (n.name.empty() ? "#" + std::to_string(k) : "'" + n.name + "'") +
                             " (" + n.op_type + ", opset " + std::to_string(opset_) + "): ";
      KILN_CHECK(n.domain.empty() || n.domain == "ai.onnx", at, "domain '", n.domain,
                 "' is not implemented (kiln maps ai.onnx ops)");
      KILN_CHECK(schemas().count(n.op_type), "onnx import: unsupported op ", n.op_type, " node '", n.name,
                 "' (kiln maps: ", join(op_names()), ")");
      const Version* v = version_at(n.op_type, opset_);
      KILN_CHECK(v, at, n.op_type, " does not exist at opset ", opset_);
      const size_t nin = n.inputs.size();
      KILN_CHECK(int(nin) >= v->min_in && (v->max_in < 0 || int(nin) <= v->max_in), at, n.op_type, "-", v->since,
                 " takes ", v->min_in, v->max_in < 0 ? " or more" : " to " + std::to_string(v->max_in),
                 " inputs, the node has ", nin);
      for (int i = 0; i < v->min_in; ++i)
        KILN_CHECK(!n.inputs[size_t(i)].empty(), at, "required input ", i, " is empty");
      KILN_CHECK(!n.outputs.empty() && !n.outputs[0].empty(), at, "the node has no output");
      KILN_CHECK(int(n.outputs.size()) <= v->max_out, at, n.op_type, "-", v->since, " has at most ", v->max_out,
                 " outputs, the node names ", n.outputs.size());
      for (size_t o = 1; o < n.outputs.size(); ++o)
        KILN_CHECK(n.outputs[o].empty(), at, "output ", o, " ('", n.outputs[o],
                   "') is not implemented (kiln computes the first output only)");
      KILN_CHECK(!made.count(n.outputs[0]), at, "output '", n.outputs[0], "' is already defined");
      auto ctx = std::make_unique<NodeCtx>(n, k, opset_, v->since, consts_);
      if (n.op_type == "Constant") {
        add_constant(*ctx);
        made.insert(n.outputs[0]);
        continue;
      }
      for (size_t i = 0; i < nin; ++i)
        KILN_CHECK(n.inputs[i].empty() || made.count(n.inputs[i]), at, "reads '", n.inputs[i],
                   "', which no initializer, graph input or earlier node makes");
      Step s;
      s.node = &n;
      s.fn = simple_op(*ctx);
      ctx->finish();
      // An input is a tensor unless the builder fixed it at import; an integer constant is never
      // a tensor (kiln computes in float32).
      s.tensor_input.assign(nin, false);
      for (size_t i = 0; i < nin; ++i) {
        if (n.inputs[i].empty() || reads_at_import(n, i)) continue;
        KILN_CHECK(!consts_.ints.count(n.inputs[i]), at, "input ", i, " ('", n.inputs[i],
                   "') is an integer tensor; kiln computes in float32");
        s.tensor_input[i] = true;
      }
      s.ctx = std::move(ctx);
      made.insert(n.outputs[0]);
      steps_.push_back(std::move(s));
    }
    KILN_CHECK(made.count(graph_.outputs[0].name), "onnx import: the graph output '", graph_.outputs[0].name,
               "' is never computed");
    KILN_CHECK(!consts_.ints.count(graph_.outputs[0].name), "onnx import: the graph output '",
               graph_.outputs[0].name, "' is an integer constant; kiln computes in float32");
  }

  // The inputs a builder fixes at import (shapes, pads, scales, ...), by op and position.
  bool reads_at_import(const Node& n, size_t i) const {
    const std::string& op = n.op_type;
    const int64_t v = version_at(op, opset_)->since;
    if (op == "Reshape") return i == 1;
    if (op == "Slice") return i >= 1;
    if (op == "Pad") return i >= 1;
    if (op == "Resize" || op == "Upsample") return i >= 1;
    if (op == "Dropout") return i >= 1 && v >= 12;
    if (op == "ReduceMean") return i >= 1 && v >= 18;
    if (op == "Squeeze" || op == "Unsqueeze") return i >= 1 && v >= 13;
    return false;
  }

  void plan_frees(const std::unordered_set<std::string>& init_names) {
    std::unordered_map<std::string, size_t> last;
    for (size_t k = 0; k < steps_.size(); ++k)
      for (size_t i = 0; i < steps_[k].node->inputs.size(); ++i)
        if (steps_[k].tensor_input[i]) last[steps_[k].node->inputs[i]] = k;
    for (const auto& [name, k] : last)
      if (!init_names.count(name) && !const_tensors_.count(name) && name != graph_.outputs[0].name)
        steps_[k].frees.push_back(name);
  }

  // One run at the declared input shape (batch 1 where the batch dim is symbolic): what depends
  // on shapes (ranks, broadcasts, pads against sizes) is refused now rather than at the first
  // forward. Skipped when a sample dim is symbolic.
  void trial_run() {
    Shape s = inputs_[0].dims;
    if (s.empty()) return;
    if (s[0] < 0) s[0] = 1;
    for (int64_t d : s)
      if (d < 0) return;
    // A declared input beyond 2^26 values (256 MiB) is not run at import.
    if (checked_numel(s, "onnx import: the graph input's dims") > (int64_t(1) << 26)) return;
    NoGradGuard g;
    forward(zeros(s, TensorOptions(DType::float32)));
  }

  Graph graph_;
  int64_t opset_;
  std::vector<ValueInfo> inputs_;
  Constants consts_;
  std::map<std::string, std::vector<float>> const_floats_;  // float Constant nodes' values
  std::map<std::string, Tensor> const_tensors_;
  std::vector<Step> steps_;
};

}  // namespace
}  // namespace detail

const std::vector<std::string>& supported_ops() {
  static const std::vector<std::string> ops = detail::op_names();
  return ops;
}

Shape input_shape(const Model& m, int64_t batch) {
  std::unordered_set<std::string> init;
  for (const TensorData& t : m.graph.initializers) init.insert(t.name);
  for (const ValueInfo& v : m.graph.inputs) {
    if (init.count(v.name)) continue;
    KILN_CHECK(!v.dims.empty(), "onnx: graph input '", v.name, "' has no shape");
    Shape s = v.dims;
    s[0] = batch;  // the batch dim, symbolic or fixed
    for (size_t d = 1; d < s.size(); ++d)
      KILN_CHECK(s[d] > 0, "onnx: graph input '", v.name, "' dim ", d, " is symbolic; kiln needs fixed sample dims");
    return s;
  }
  KILN_THROW("onnx: the graph has no input besides its initializers");
}

ModulePtr import_model(const Model& m) { return std::make_shared<detail::OnnxNet>(m); }

}  // namespace kiln::onnx
