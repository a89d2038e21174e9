// ONNX import (io/onnx/onnx.h): a Module that runs an ONNX graph node by node with kiln ops, so
// `kiln bench --model file.onnx` times a user's own net like a zoo net (forward and, since the
// initializers are parameters, forward+backward too).
//
// A wrong answer is never acceptable, a refusal always is: every node is checked when the model is
// imported (its op's schema version at the model's opset, input and output counts, every attribute:
// io/onnx/onnx_ops.h), and the graph then runs once at its declared input shape, so what depends on
// shapes is refused at import too. Errors name the node, the op, the attribute and the opset.
// The op builders: onnx_ops.cpp, onnx_spatial.cpp (Conv, pools), onnx_resize.cpp (Pad, Slice,
// Resize, Upsample), onnx_rnn.cpp (LSTM, GRU, RNN: the only nodes of several outputs). A recurrent
// node's zero initial state computed from Shape(...), as PyTorch's exporters write it, is dropped
// before the nodes are built (drop_zero_initial_states).
// In eval, with no gradient wanted, a Conv whose only reader is a BatchNormalization (both on
// initializers) runs as one convolution with the batch norm folded into its weights, and a Relu
// that alone reads the batch norm as its post-op, as a zoo net's Conv2d, BatchNorm2d and ReLU do
// (layers/conv.h BatchNormFold; KILN_FUSE=0 turns it off).
//   kiln bench --model mnist.onnx --batch 8 --iters 2
//   ctest --test-dir build -R onnx
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd.h"
#include "engine/checked_size.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/shape.h"
#include "engine/trace.h"
#include "io/onnx/onnx_ops.h"
#include "layers/conv.h"

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
  static const char* names[] = {"", "float", "int", "string", "tensor", "graph", "floats", "ints", "strings"};
  if (a->type != type)
    refuse("attribute '", name, "' has type ", a->type >= 0 && a->type < 9 ? names[a->type] : "?", ", expected ",
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
std::vector<std::string> NodeCtx::strings(const char* name, const std::vector<std::string>& dflt) {
  const Attribute* a = get(name, kAttrStrings);
  return a ? a->strings : dflt;
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
      {"GRU", {{7, 3, 6, 2}, {14, 3, 6, 2}, {22, 3, 6, 2}}},
      {"Identity", {{1, 1, 1, 1}, {13, 1, 1, 1}, {14, 1, 1, 1}, {16, 1, 1, 1}, {19, 1, 1, 1}, {21, 1, 1, 1},
                    {23, 1, 1, 1}, {24, 1, 1, 1}, {25, 1, 1, 1}}},
      {"LeakyRelu", {{1, 1, 1, 1}, {6, 1, 1, 1}, {16, 1, 1, 1}}},
      {"LogSoftmax", {{1, 1, 1, 1}, {11, 1, 1, 1}, {13, 1, 1, 1}}},
      {"LRN", {{1, 1, 1, 1}, {13, 1, 1, 1}}},
      {"LSTM", {{7, 3, 8, 3}, {14, 3, 8, 3}, {22, 3, 8, 3}}},
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
      {"RNN", {{7, 3, 6, 2}, {14, 3, 6, 2}, {22, 3, 6, 2}}},
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

// Integer tensors: int64 and, in a model built in memory (the exporter's sequence_lens), int32 and
// bool (decode() reads both as int64).
bool is_int(int32_t elem_type) { return elem_type == kInt64 || elem_type == kInt32 || elem_type == kBool; }

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
      if (is_int(t.elem_type)) {
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
    drop_zero_initial_states();
    build_steps();
    fold_batch_norms();
    fuse_conv_relus();
    plan_frees(init_names);
    trial_run();
  }

  std::string repr() const override {
    return "OnnxNet(" + graph_.name + ", " + std::to_string(graph_.nodes.size()) + " nodes" +
           (folds_ ? ", " + std::to_string(folds_) + " batch norms foldable into their convs (" +
                         std::to_string(relu_folds_) + " with the ReLU after)"
                   : "") +
           (relu_fusions_ ? ", " + std::to_string(relu_fusions_) + " Conv -> Relu fused" : "") +
           ")";
  }

  Tensor forward(const Tensor& x) override {
    const TensorBytesLimit limit(max_tensor_bytes_, kTensorLimitName);
    std::unordered_map<std::string, Tensor> env;
    for (auto& [name, t] : named_parameters(false)) env[name] = t;
    for (auto& [name, t] : const_tensors_) env[name] = t;
    env[inputs_[0].name] = x;
    for (Step& s : steps_) {
      std::vector<Tensor> in(s.node->inputs.size());
      for (size_t k = 0; k < in.size(); ++k)
        if (s.tensor_input[k]) in[k] = env.at(s.node->inputs[k]);
      try {
        if (s.multi) {
          const std::vector<Tensor> out = s.multi(in);
          for (size_t k = 0; k < s.node->outputs.size() && k < out.size(); ++k)
            if (!s.node->outputs[k].empty()) env[s.node->outputs[k]] = out[k];
        } else {
          env[s.node->outputs[0]] = s.fn(in);
        }
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
    MultiOpFn multi;                 // instead of fn: a recurrent node (every output)
    std::vector<bool> tensor_input;  // read from the environment (else absent or fixed at import)
    std::vector<std::string> frees;  // values no later step reads: freed after this one
    bool folded = false;             // a Conv whose batch norm fold_batch_norms took
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
      if (is_int(a->t.elem_type)) {
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

  // The nodes the graph output depends on.
  std::vector<bool> live_nodes() const {
    std::unordered_map<std::string, size_t> made_by;
    for (size_t k = 0; k < graph_.nodes.size(); ++k)
      for (const std::string& o : graph_.nodes[k].outputs)
        if (!o.empty()) made_by[o] = k;
    std::vector<bool> live(graph_.nodes.size(), false);
    std::vector<std::string> work;
    for (const ValueInfo& v : graph_.outputs) work.push_back(v.name);
    while (!work.empty()) {
      const std::string name = work.back();
      work.pop_back();
      auto it = made_by.find(name);
      if (it == made_by.end() || live[it->second]) continue;
      live[it->second] = true;
      for (const std::string& i : graph_.nodes[it->second].inputs)
        if (!i.empty()) work.push_back(i);
    }
    return live;
  }

  // drop_zero_initial_states' test of one value (its callers memoise it).
  static bool zero_value(const std::string& name, int depth,
                         const std::unordered_map<std::string, const Node*>& made_by,
                         const std::unordered_map<std::string, const TensorData*>& inits,
                         const std::function<bool(const std::string&, int)>& zeros) {
    auto all_zero = [](const TensorData& t) {
      return t.elem_type == kFloat && std::all_of(t.f.begin(), t.f.end(), [](float v) { return v == 0.f; });
    };
    if (inits.count(name)) return all_zero(*inits.at(name));
    auto it = made_by.find(name);
    if (it == made_by.end()) return false;
    const Node& c = *it->second;
    if (!(c.domain.empty() || c.domain == "ai.onnx") || c.outputs.size() != 1) return false;
    if (c.op_type == "Constant")
      return c.attrs.size() == 1 && c.attrs[0].name == "value" && c.attrs[0].type == kAttrTensor &&
             all_zero(c.attrs[0].t);
    if (c.op_type == "ConstantOfShape")  // value: one float32 element, 0 by default
      return c.attrs.empty() || (c.attrs.size() == 1 && c.attrs[0].name == "value" &&
                                 c.attrs[0].type == kAttrTensor && c.attrs[0].t.numel() == 1 && all_zero(c.attrs[0].t));
    static const std::set<std::string> moves = {"Expand", "Slice", "Reshape", "Squeeze", "Unsqueeze", "Transpose",
                                                "Identity"};
    return moves.count(c.op_type) && !c.inputs.empty() && !c.inputs[0].empty() && zeros(c.inputs[0], depth + 1);
  }

  // PyTorch's exporters write a recurrent layer's zero initial state so that it follows the batch:
  // Expand(zeros, Concat(..., Shape(x)...)) or ConstantOfShape(...) (the TorchScript exporter),
  // Expand(0, ...) sliced per layer (the dynamo one, a free batch): all zeros whatever the shape,
  // which is what an absent initial_h / initial_c means. Such an input is dropped, and the nodes
  // that only fed it (Shape, Gather, Concat, Expand, ConstantOfShape, ...: kiln has no shape
  // arithmetic) with it. Exact: the node needs that input to be [D, N, H], which zeros, expanded,
  // sliced or reshaped, can only fill with zeros.
  void drop_zero_initial_states() {
    std::unordered_map<std::string, const Node*> made_by;
    for (const Node& n : graph_.nodes)
      for (const std::string& o : n.outputs)
        if (!o.empty()) made_by[o] = &n;
    std::unordered_map<std::string, const TensorData*> inits;
    for (const TensorData& t : graph_.initializers) inits[t.name] = &t;
    // Whether a value is zeros: a zero constant, or zeros through ops that only move or repeat
    // elements (depth-bounded, so a hostile chain cannot recurse far; memoised).
    std::unordered_map<std::string, bool> known;
    std::function<bool(const std::string&, int)> zeros;
    zeros = [&](const std::string& name, int depth) {
      if (depth > 16) return false;
      auto k = known.find(name);
      if (k != known.end()) return k->second;
      const bool z = zero_value(name, depth, made_by, inits, zeros);
      known[name] = z;
      return z;
    };
    const std::vector<bool> before = live_nodes();
    bool dropped = false;
    for (Node& n : graph_.nodes) {
      if (!is_recurrent(n.op_type) || !(n.domain.empty() || n.domain == "ai.onnx")) continue;
      for (size_t i : {size_t(5), size_t(6)}) {
        // Only a state the graph computes (a zero initializer or Constant is read as it is).
        if (i >= n.inputs.size() || n.inputs[i].empty() || !made_by.count(n.inputs[i]) ||
            made_by.at(n.inputs[i])->op_type == "Constant" || !zeros(n.inputs[i], 0))
          continue;
        n.inputs[i].clear();
        dropped = true;
      }
    }
    if (!dropped) return;
    // Only what the rewrite left unread goes (a node that was dead before is checked as ever).
    const std::vector<bool> after = live_nodes();
    std::vector<Node> kept;
    for (size_t k = 0; k < graph_.nodes.size(); ++k)
      if (!before[k] || after[k]) kept.push_back(std::move(graph_.nodes[k]));
    graph_.nodes = std::move(kept);
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
      // The recurrent ops compute every output (each optional); the others their first.
      const bool multi = is_recurrent(n.op_type);
      KILN_CHECK(std::any_of(n.outputs.begin(), n.outputs.end(), [](const std::string& o) { return !o.empty(); }) &&
                     (multi || !n.outputs[0].empty()),
                 at, "the node has no output");
      KILN_CHECK(int(n.outputs.size()) <= v->max_out, at, n.op_type, "-", v->since, " has at most ", v->max_out,
                 " outputs, the node names ", n.outputs.size());
      for (size_t o = 1; o < n.outputs.size() && !multi; ++o)
        KILN_CHECK(n.outputs[o].empty(), at, "output ", o, " ('", n.outputs[o],
                   "') is not implemented (kiln computes the first output only)");
      for (const std::string& o : n.outputs)
        KILN_CHECK(o.empty() || !made.count(o), at, "output '", o, "' is already defined");
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
      if (multi) s.multi = recurrent_op(*ctx);
      else s.fn = build_op(*ctx);
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
      for (const std::string& o : n.outputs)
        if (!o.empty()) made.insert(o);
      steps_.push_back(std::move(s));
    }
    KILN_CHECK(made.count(graph_.outputs[0].name), "onnx import: the graph output '", graph_.outputs[0].name,
               "' is never computed");
    KILN_CHECK(!consts_.ints.count(graph_.outputs[0].name), "onnx import: the graph output '",
               graph_.outputs[0].name, "' is an integer constant; kiln computes in float32");
  }

  // Conv -> BatchNormalization pairs where the conv's output has no other reader and every
  // weight, bias and statistic is an initializer with K values, and the Relu after them when it
  // alone reads the batch norm: the conv step runs them all (folded, the ReLU a post-op, when
  // foldable() says so at run time; else the conv, the batch norm and the ReLU as built) and the
  // later steps pass their input through.
  void fold_batch_norms() {
    std::unordered_map<std::string, int> readers;
    std::unordered_map<std::string, size_t> read_by;  // a value's reader (the last one)
    for (size_t k = 0; k < steps_.size(); ++k)
      for (const std::string& in : steps_[k].node->inputs) {
        ++readers[in];
        read_by[in] = k;
      }
    ++readers[graph_.outputs[0].name];
    std::unordered_map<std::string, const TensorData*> inits;
    for (const TensorData& t : graph_.initializers)
      if (!is_int(t.elem_type)) inits[t.name] = &t;
    std::unordered_map<std::string, size_t> made_by;
    for (size_t k = 0; k < steps_.size(); ++k)
      if (!steps_[k].multi) made_by[steps_[k].node->outputs[0]] = k;
    for (size_t j = 0; j < steps_.size(); ++j) {
      const Node& bn = *steps_[j].node;
      if (bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 || !made_by.count(bn.inputs[0])) continue;
      Step& cs = steps_[made_by.at(bn.inputs[0])];
      const Node& conv = *cs.node;
      if (conv.op_type != "Conv" || readers[conv.outputs[0]] != 1 || !inits.count(conv.inputs[1])) continue;
      const Shape& wd = inits.at(conv.inputs[1])->dims;
      if (wd.size() < 3) continue;
      auto per_channel = [&](const std::string& name) {
        auto it = inits.find(name);
        return it != inits.end() && it->second->dims == Shape{wd[0]};
      };
      const bool has_bias = conv.inputs.size() > 2 && !conv.inputs[2].empty();
      if ((has_bias && !per_channel(conv.inputs[2])) ||
          !std::all_of(bn.inputs.begin() + 1, bn.inputs.end(), per_channel))
        continue;
      const Attribute* e = bn.attr("epsilon");
      const double eps = e ? double(e->f) : 1e-5;
      const std::string& bn_out = bn.outputs[0];
      const bool relu = readers[bn_out] == 1 && read_by.count(bn_out) &&
                        steps_[read_by.at(bn_out)].node->op_type == "Relu";
      auto fold = std::make_shared<BatchNormFold>();
      const std::vector<std::string> bn_params(bn.inputs.begin() + 1, bn.inputs.end());
      OpFn fused_fn = relu ? conv_op(*cs.ctx, true) : cs.fn;
      cs.fn = [this, conv_fn = cs.fn, fused_fn, bn_fn = steps_[j].fn, fold, bn_params, eps,
               relu](const std::vector<Tensor>& in) {
        std::vector<Tensor> p;  // gamma, beta, mean, var
        for (const std::string& n : bn_params) p.push_back(param(n));
        const Tensor& w = in[1];
        const Tensor b = in.size() > 2 ? in[2] : Tensor();
        if (foldable(in[0], {&w, &b, &p[0], &p[1]})) {
          auto [fw, fb] = fold->get(w, b, p[0], p[1], p[2], p[3], eps);
          return fused_fn({in[0], fw, fb});
        }
        Tensor y = bn_fn({conv_fn(in), p[0], p[1], p[2], p[3]});
        return relu ? ops::relu(y) : y;
      };
      auto pass = [](const std::vector<Tensor>& in) { return in[0]; };
      steps_[j].fn = pass;
      cs.folded = true;
      if (relu) {
        steps_[read_by.at(bn_out)].fn = pass;
        ++relu_folds_;
      }
      ++folds_;
    }
  }

  // Conv -> Relu where the Relu alone reads the conv's output (no batch norm between: those
  // fold_batch_norms took): the conv step runs the ReLU as its post-op (ops::conv2d_relu, as a
  // zoo net's Sequential does) and the Relu step passes its input through. Unfused while an op
  // recorder traces (export), so a re-export sees Conv and Relu as they were.
  void fuse_conv_relus() {
    std::unordered_map<std::string, int> readers;
    std::unordered_map<std::string, size_t> read_by;
    for (size_t k = 0; k < steps_.size(); ++k)
      for (const std::string& in : steps_[k].node->inputs) {
        ++readers[in];
        read_by[in] = k;
      }
    ++readers[graph_.outputs[0].name];
    for (size_t k = 0; k < steps_.size(); ++k) {
      Step& cs = steps_[k];
      if (cs.node->op_type != "Conv" || cs.folded) continue;
      const std::string& out = cs.node->outputs[0];
      if (readers[out] != 1 || !read_by.count(out)) continue;
      Step& rs = steps_[read_by.at(out)];
      if (rs.node->op_type != "Relu") continue;
      OpFn fused = conv_op(*cs.ctx, true);
      cs.fn = [conv_fn = cs.fn, relu_fn = rs.fn, fused](const std::vector<Tensor>& in) {
        if (Sequential::fusion() && !trace::active()) return fused(in);
        return relu_fn({conv_fn(in)});
      };
      rs.fn = [](const std::vector<Tensor>& in) { return in[0]; };
      ++relu_fusions_;
    }
  }

  // Folding needs what a zoo net's Conv2d needs (layers/conv.h can_fold): fusion on, eval, no
  // gradient wanted for the parameters, no op recorder tracing, float32 input.
  bool foldable(const Tensor& x, std::initializer_list<const Tensor*> params) const {
    return Sequential::fusion() && !is_training() && !trace::active() && !autograd::needs_grad(params) &&
           x.dtype() == DType::float32;
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
    if (is_recurrent(op)) return i == 4 || (op == "LSTM" && i == 7);  // sequence_lens, P
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
    // Outputs nothing reads (a recurrent node's Y_c, say) go as soon as they are made.
    for (Step& s : steps_)
      for (const std::string& o : s.node->outputs)
        if (!o.empty() && !last.count(o) && o != graph_.outputs[0].name) s.frees.push_back(o);
  }

  // One run at the declared input shape (batch 1 where the batch dim is symbolic): what depends
  // on shapes (ranks, broadcasts, pads against sizes, sizes against max_tensor_bytes) is refused
  // now rather than at the first forward. A declared input over the limit is refused; one
  // beyond 2^26 values (256 MiB) under it is not run at import, nor one with a symbolic sample dim.
  void trial_run() {
    Shape s = inputs_[0].dims;
    if (s.empty()) return;
    if (s[0] < 0) s[0] = 1;
    for (int64_t d : s)
      if (d < 0) return;
    {
      const TensorBytesLimit limit(max_tensor_bytes_, kTensorLimitName);
      check_tensor_bytes(s, sizeof(float), "onnx import: graph input '" + inputs_[0].name + "'");
    }
    if (checked_numel(s, "onnx import: the graph input's dims") > (int64_t(1) << 26)) return;
    NoGradGuard g;
    forward(zeros(s, TensorOptions(DType::float32)));
  }

  Graph graph_;
  const uint64_t max_tensor_bytes_ = max_tensor_bytes();
  int64_t opset_;
  std::vector<ValueInfo> inputs_;
  Constants consts_;
  std::map<std::string, std::vector<float>> const_floats_;  // float Constant nodes' values
  std::map<std::string, Tensor> const_tensors_;
  std::vector<Step> steps_;
  int folds_ = 0;       // Conv -> BatchNormalization pairs run by the conv's step
  int relu_fusions_ = 0;  // Conv -> Relu pairs run by the conv's step (fuse_conv_relus)
  int relu_folds_ = 0;  // of them, those with the Relu after
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

uint64_t max_tensor_bytes() {
  const char* v = std::getenv("KILN_ONNX_MAX_TENSOR_BYTES");
  if (!v || !*v) return uint64_t(4) << 30;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  KILN_CHECK(*v != '-' && end && *end == 0 && errno == 0 && n > 0 && n <= kMaxSize,
             "KILN_ONNX_MAX_TENSOR_BYTES: a whole number of bytes from 1 to 2^63 - 1, not '", v, "'");
  return uint64_t(n);
}

}  // namespace kiln::onnx
