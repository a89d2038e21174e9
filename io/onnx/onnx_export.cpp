// ONNX export (io/onnx/onnx.h): one eval-mode forward traced op by op (engine/trace.h), each traced op
// mapped to ONNX (opset 13) nodes. Tracing rather than a per-layer mapping: composite modules
// (residual blocks, inception branches, UNet skips, option-A shortcuts) wire their children with
// plain ops in their own forward, and the trace sees exactly that wiring without each of them
// having to describe it. A recurrent call (ops::rnn, one traced event with output, h_n and c_n)
// becomes one LSTM / GRU / RNN node per layer with PyTorch's exporter's glue (recurrent()).
//   kiln export --onnx resnet18.onnx --model resnet18
//   ctest --test-dir build -R onnx
#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/graph_op.h"
#include "engine/ops/norm.h"
#include "engine/trace.h"
#include "io/onnx/onnx.h"
#include "kernels/common/rnn.h"

namespace kiln::onnx {
namespace {

Attribute attr_ints(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name;
  a.type = kAttrInts;
  a.ints = std::move(v);
  return a;
}
Attribute attr_int(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = kAttrInt;
  a.i = v;
  return a;
}
Attribute attr_float(const std::string& name, double v) {
  Attribute a;
  a.name = name;
  a.type = kAttrFloat;
  a.f = float(v);
  return a;
}
Attribute attr_string(const std::string& name, std::string v) {
  Attribute a;
  a.name = name;
  a.type = kAttrString;
  a.s = std::move(v);
  return a;
}
Attribute attr_strings(const std::string& name, std::vector<std::string> v) {
  Attribute a;
  a.name = name;
  a.type = kAttrStrings;
  a.strings = std::move(v);
  return a;
}

const trace::Attr& find_attr(const trace::Event& e, const char* name) {
  for (const trace::Attr& a : e.attrs)
    if (a.name == name) return a;
  KILN_THROW("onnx export: traced op ", graph::name(e.op), " lacks attribute ", name);
}
// The values of a floating-point tensor as float32, straight from memory where it can (weights
// of large nets: the double round trip of to_vector() would dominate the export).
std::vector<float> host_floats(const Tensor& t) {
  if (t.dtype() == DType::float32 && t.device().type == DeviceType::cpu && t.is_contiguous()) {
    const float* p = t.data<float>();
    return std::vector<float>(p, p + t.numel());
  }
  return t.to_vector_of<float>();
}

std::vector<int64_t> ints_of(const trace::Event& e, const char* name) { return find_attr(e, name).ints; }
int64_t int_of(const trace::Event& e, const char* name) { return find_attr(e, name).ints.at(0); }
double real_of(const trace::Event& e, const char* name) { return find_attr(e, name).real; }

// Records the traced ops as graph nodes. Tensors are known by their TensorImpl: graph values (the
// input and every recorded output, kept alive so the addresses stay unique), parameters and
// buffers (initializers under their state-dict names) and anything else (constants by value).
class Exporter : public trace::Recorder {
 public:
  Exporter(Module& net, Graph& g) : g_(g) {
    for (auto& [name, t] : net.named_parameters()) params_.emplace(t.impl(), name);
    for (auto& [name, t] : net.named_buffers()) params_.emplace(t.impl(), name);
  }

  void set_input(const Tensor& x, const std::string& name) { bind(x, name); }

  std::string value_name(const Tensor& t) const {
    auto it = values_.find(t.impl());
    return it == values_.end() ? std::string() : it->second;
  }

  void record(trace::Event e) override { map(e); }

  // A recurrent op's sequence lengths or initial state was a constant of the traced batch: the
  // graph's dims are then fixed (export_module leaves the batch dim fixed).
  bool fixes_batch() const { return fixes_batch_; }

 private:
  std::string fresh(const std::string& stem) { return stem + "_" + std::to_string(counter_++); }

  void bind(const Tensor& t, const std::string& name) {
    values_[t.impl()] = name;
    keep_.push_back(t);
  }

  // The name of an input tensor, adding an initializer for parameters and constants.
  std::string use(const Tensor& t, const char* op) {
    if (!t.defined()) return "";
    auto v = values_.find(t.impl());
    if (v != values_.end()) return v->second;
    auto p = params_.find(t.impl());
    std::string name = p != params_.end() ? p->second : fresh("const");
    if (!emitted_.count(name)) {
      KILN_CHECK(is_floating(t.dtype()), "onnx export: ", op, " reads a constant tensor of dtype ",
                 dtype_name(t.dtype()), "; only floating-point constants are written");
      TensorData d;
      d.name = name;
      d.dims = t.sizes();
      d.elem_type = kFloat;
      d.f = host_floats(t);
      g_.initializers.push_back(std::move(d));
      emitted_.insert(name);
    }
    if (p == params_.end()) values_[t.impl()] = name, keep_.push_back(t);
    return name;
  }

  std::string int_const(const std::vector<int64_t>& v, const std::vector<int64_t>& dims) {
    TensorData d;
    d.name = fresh("shape");
    d.dims = dims;
    d.elem_type = kInt64;
    d.i = v;
    g_.initializers.push_back(d);
    return d.name;
  }
  std::string int_const(const std::vector<int64_t>& v) { return int_const(v, {int64_t(v.size())}); }
  std::string float_const(const std::vector<float>& v, const std::vector<int64_t>& dims) {
    TensorData d;
    d.name = fresh("const");
    d.dims = dims;
    d.f = v;
    g_.initializers.push_back(d);
    return d.name;
  }

  // Appends a node of `outputs` outputs; returns their names.
  std::vector<std::string> node_n(const std::string& op_type, std::vector<std::string> inputs,
                                  std::vector<Attribute> attrs, int outputs) {
    Node n;
    n.op_type = op_type;
    n.name = fresh(op_type);
    n.inputs = std::move(inputs);
    while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();  // trailing absent optionals
    for (int k = 0; k < outputs; ++k) n.outputs.push_back(n.name + (k ? "_out" + std::to_string(k) : "_out"));
    n.attrs = std::move(attrs);
    g_.nodes.push_back(n);
    return n.outputs;
  }
  // Appends a node; returns its output's name.
  std::string node(const std::string& op_type, std::vector<std::string> inputs, std::vector<Attribute> attrs = {}) {
    return node_n(op_type, std::move(inputs), std::move(attrs), 1)[0];
  }

  // A constant tensor (neither a graph value nor a parameter) whose elements all equal one value.
  bool is_fill(const Tensor& t, float& value) const {
    if (!t.defined() || values_.count(t.impl()) || params_.count(t.impl()) || !is_floating(t.dtype())) return false;
    const std::vector<float> v = host_floats(t);
    if (v.empty()) return false;
    value = v[0];
    for (float x : v)
      if (x != value) return false;
    return true;
  }

  // cat(fills..., x, fills...) as Pad(x) along the cat dim, or "" when the cat is not of that form.
  std::string cat_as_pad(const trace::Event& e) {
    const int64_t dim = wrap_dim(int_of(e, "dim"), e.output.dim(), "cat");
    int64_t value_at = -1;
    float fill = 0;
    bool have_fill = false;
    int64_t before = 0, after = 0;
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const Tensor& t = e.inputs[i];
      float v = 0;
      if (values_.count(t.impl())) {
        if (value_at >= 0) return "";
        value_at = int64_t(i);
      } else if (is_fill(t, v) && (!have_fill || v == fill)) {
        fill = v;
        have_fill = true;
        (value_at < 0 ? before : after) += t.size(dim);
      } else {
        return "";
      }
    }
    if (value_at < 0 || !have_fill) return "";
    const Tensor& x = e.inputs[size_t(value_at)];
    std::vector<int64_t> pads(size_t(2 * x.dim()), 0);
    pads[size_t(dim)] = before;
    pads[size_t(dim + x.dim())] = after;
    return node("Pad", {use(x, "cat"), int_const(pads), float_const({fill}, {})}, {attr_string("mode", "constant")});
  }

  static std::vector<int64_t> pads4(const std::vector<int64_t>& p) { return {p[0], p[1], p[0], p[1]}; }

  // One exporter per graph op (engine/graph_ops.inc): Exporter::export_<name>, returning its
  // output's value name (an op of several outputs binds the others itself). A graph op without
  // one fails to compile here.
  void map(const trace::Event& e) {
    using Export = std::string (Exporter::*)(const trace::Event&);
    static const Export table[] = {
#define KILN_GRAPH_OP(name, ...) &Exporter::export_##name,
#include "engine/graph_ops.inc"
#undef KILN_GRAPH_OP
    };
    static_assert(sizeof(table) / sizeof(table[0]) == size_t(graph::kCount));
    bind(e.output, (this->*table[size_t(e.op)])(e));
  }

  // The op's ONNX node from engine/graph_ops.inc.
  static const char* onnx_op(const trace::Event& e) { return graph::info(e.op).onnx; }
  const Tensor& input0(const trace::Event& e) const { return e.inputs.empty() ? e.output : e.inputs[0]; }
  [[noreturn]] static void no_form(const trace::Event& e, const char* why) {
    KILN_THROW("onnx export: ", graph::name(e.op), " has no ONNX form: ", why);
  }
  // An op of one input and no attributes whose ONNX node is the same (Relu, Sigmoid, ...).
  std::string unary(const trace::Event& e) { return node(onnx_op(e), {use(input0(e), name_of(e))}); }
  static const char* name_of(const trace::Event& e) { return graph::name(e.op); }

  std::string conv(const trace::Event& e, bool relu, bool sum) {
    const Tensor& w = e.inputs[1];
    std::string out = node(onnx_op(e), {use(e.inputs[0], name_of(e)), use(w, name_of(e)), use(e.inputs[2], name_of(e))},
                           {attr_ints("kernel_shape", {w.size(2), w.size(3)}), attr_ints("strides", ints_of(e, "stride")),
                            attr_ints("pads", pads4(ints_of(e, "padding"))),
                            attr_ints("dilations", ints_of(e, "dilation")), attr_int("group", int_of(e, "groups"))});
    // conv2d_sum: the residual add (and the ReLU when its flag says so) as their own nodes.
    if (sum) out = node("Add", {out, use(e.inputs[3], name_of(e))});
    return relu ? node("Relu", {out}) : out;
  }
  std::string export_conv2d(const trace::Event& e) { return conv(e, false, false); }
  std::string export_conv2d_relu(const trace::Event& e) { return conv(e, true, false); }
  std::string export_conv2d_sum(const trace::Event& e) { return conv(e, int_of(e, "relu") != 0, true); }

  std::string export_conv_transpose2d(const trace::Event& e) {
    const Tensor& w = e.inputs[1];
    return node(onnx_op(e), {use(e.inputs[0], name_of(e)), use(w, name_of(e)), use(e.inputs[2], name_of(e))},
                {attr_ints("kernel_shape", {w.size(2), w.size(3)}), attr_ints("strides", ints_of(e, "stride")),
                 attr_ints("pads", pads4(ints_of(e, "padding"))), attr_ints("dilations", ints_of(e, "dilation")),
                 attr_ints("output_padding", ints_of(e, "output_padding")), attr_int("group", int_of(e, "groups"))});
  }

  std::string export_linear(const trace::Event& e) {
    const Tensor& x = e.inputs[0];
    const std::string w = use(e.inputs[1], name_of(e)), b = use(e.inputs[2], name_of(e));
    if (x.dim() == 2) return node(onnx_op(e), {use(x, name_of(e)), w, b}, {attr_int("transB", 1)});
    std::string out = node("MatMul", {use(x, name_of(e)), node("Transpose", {w}, {attr_ints("perm", {1, 0})})});
    return b.empty() ? out : node("Add", {out, b});
  }
  std::string export_matmul(const trace::Event& e) {
    return node(onnx_op(e), {use(e.inputs[0], name_of(e)), use(e.inputs[1], name_of(e))});
  }

  std::string batch_norm(const trace::Event& e, bool relu) {
    KILN_CHECK(int_of(e, "training") == 0,
               "onnx export: batch_norm ran in training mode (export runs the net in eval)");
    KILN_CHECK(e.inputs[3].defined() && e.inputs[4].defined(),
               "onnx export: batch_norm without running statistics (track_running_stats=false) has no ONNX form");
    const int64_t c = e.inputs[0].size(1);
    const std::string scale =
        e.inputs[1].defined() ? use(e.inputs[1], name_of(e)) : float_const(std::vector<float>(size_t(c), 1.f), {c});
    const std::string shift =
        e.inputs[2].defined() ? use(e.inputs[2], name_of(e)) : float_const(std::vector<float>(size_t(c), 0.f), {c});
    const std::string out =
        node(onnx_op(e), {use(e.inputs[0], name_of(e)), scale, shift, use(e.inputs[3], name_of(e)), use(e.inputs[4], name_of(e))},
             {attr_float("epsilon", real_of(e, "eps"))});
    return relu ? node("Relu", {out}) : out;
  }
  std::string export_batch_norm(const trace::Event& e) { return batch_norm(e, false); }
  std::string export_batch_norm_relu(const trace::Event& e) { return batch_norm(e, true); }

  std::string export_local_response_norm(const trace::Event& e) {
    const int64_t size = int_of(e, "size");
    // kiln's (and PyTorch's) window is [c - size/2, c + (size-1)/2]; ONNX's the same for odd sizes.
    KILN_CHECK(size % 2 == 1, "onnx export: local_response_norm with an even size (", size,
               ") windows differently in ONNX");
    return node(onnx_op(e), {use(e.inputs[0], name_of(e))},
                {attr_int("size", size), attr_float("alpha", real_of(e, "alpha")),
                 attr_float("beta", real_of(e, "beta")), attr_float("bias", real_of(e, "k"))});
  }
  std::string export_dropout(const trace::Event& e) { no_form(e, "it ran in training mode (export runs the net in eval)"); }

  std::string export_add(const trace::Event& e) {
    return node(onnx_op(e), {use(e.inputs[0], name_of(e)), use(e.inputs[1], name_of(e))});
  }
  std::string export_add_n(const trace::Event& e) {
    std::vector<std::string> ins;
    for (const Tensor& t : e.inputs) ins.push_back(use(t, name_of(e)));
    return node(onnx_op(e), ins);
  }
  std::string export_relu(const trace::Event& e) { return unary(e); }
  std::string export_sigmoid(const trace::Event& e) { return unary(e); }
  std::string export_tanh(const trace::Event& e) { return unary(e); }
  std::string export_identity(const trace::Event& e) { return unary(e); }
  std::string export_leaky_relu(const trace::Event& e) {
    return node(onnx_op(e), {use(e.inputs[0], name_of(e))}, {attr_float("alpha", real_of(e, "slope"))});
  }

  std::vector<Attribute> pool_attrs(const trace::Event& e) {
    std::vector<int64_t> k = ints_of(e, "kernel"), s = ints_of(e, "stride");
    if (s[0] == 0 && s[1] == 0) s = k;
    return {attr_ints("kernel_shape", k), attr_ints("strides", s), attr_ints("pads", pads4(ints_of(e, "padding"))),
            attr_int("ceil_mode", int_of(e, "ceil_mode"))};
  }
  std::string export_max_pool2d(const trace::Event& e) {
    std::vector<Attribute> a = pool_attrs(e);
    a.push_back(attr_ints("dilations", ints_of(e, "dilation")));
    return node(onnx_op(e), {use(e.inputs[0], name_of(e))}, a);
  }
  std::string export_avg_pool2d(const trace::Event& e) {
    KILN_CHECK(int_of(e, "divisor_override") == 0, "onnx export: avg_pool2d with divisor_override has no ONNX form");
    std::vector<Attribute> a = pool_attrs(e);
    a.push_back(attr_int("count_include_pad", int_of(e, "count_include_pad")));
    return node(onnx_op(e), {use(e.inputs[0], name_of(e))}, a);
  }
  // Global pooling for a 1x1 output; equal windows otherwise (the adaptive pool is then a plain
  // pool with kernel = stride = in/out). ONNX has no adaptive pooling.
  std::string adaptive_pool(const trace::Event& e, const char* plain) {
    const Tensor& x = e.inputs[0];
    const std::vector<int64_t> o = ints_of(e, "output_size");
    const int64_t h = x.size(x.dim() - 2), w = x.size(x.dim() - 1);
    if (o[0] == 1 && o[1] == 1) return node(onnx_op(e), {use(x, name_of(e))});
    KILN_CHECK(h % o[0] == 0 && w % o[1] == 0, "onnx export: ", name_of(e), " from ", h, "x", w, " to ", o[0], "x",
               o[1], " has unequal windows; ONNX has no adaptive pooling");
    const std::vector<int64_t> k = {h / o[0], w / o[1]};
    return node(plain, {use(x, name_of(e))}, {attr_ints("kernel_shape", k), attr_ints("strides", k)});
  }
  std::string export_adaptive_avg_pool2d(const trace::Event& e) { return adaptive_pool(e, "AveragePool"); }
  std::string export_adaptive_max_pool2d(const trace::Event& e) { return adaptive_pool(e, "MaxPool"); }

  std::string softmax(const trace::Event& e) {
    return node(onnx_op(e), {use(e.inputs[0], name_of(e))}, {attr_int("axis", int_of(e, "dim"))});
  }
  std::string export_softmax(const trace::Event& e) { return softmax(e); }
  std::string export_log_softmax(const trace::Event& e) { return softmax(e); }

  std::string export_cross_entropy(const trace::Event& e) { no_form(e, "a training loss"); }
  std::string export_nll_loss(const trace::Event& e) { no_form(e, "a training loss"); }
  std::string export_mse_loss(const trace::Event& e) { no_form(e, "a training loss"); }
  std::string export_binary_cross_entropy_with_logits(const trace::Event& e) { no_form(e, "a training loss"); }

  std::string export_cat(const trace::Event& e) {
    // A graph value between filled constants (an option-A shortcut's zero channels) is a Pad,
    // which keeps the batch dim free where constants would fix it.
    std::string out = cat_as_pad(e);
    if (!out.empty()) return out;
    std::vector<std::string> ins;
    for (const Tensor& t : e.inputs) ins.push_back(use(t, name_of(e)));
    return node(onnx_op(e), ins, {attr_int("axis", int_of(e, "dim"))});
  }
  std::string export_pad(const trace::Event& e) {
    const Tensor& x = e.inputs[0];
    const std::vector<int64_t> p = ints_of(e, "pads");
    const int64_t r = x.dim();
    std::vector<int64_t> onnx_pads(size_t(2 * r), 0);
    onnx_pads[size_t(r - 1)] = p[0];
    onnx_pads[size_t(2 * r - 1)] = p[1];
    if (p.size() == 4) {
      onnx_pads[size_t(r - 2)] = p[2];
      onnx_pads[size_t(2 * r - 2)] = p[3];
    }
    const int64_t mode = int_of(e, "mode");
    const char* modes[] = {"constant", "reflect", "edge"};
    KILN_CHECK(mode >= 0 && mode <= 2, "onnx export: pad mode circular has no ONNX (opset 13) form");
    return node(onnx_op(e), {use(x, name_of(e)), int_const(onnx_pads), float_const({float(real_of(e, "value"))}, {})},
                {attr_string("mode", modes[mode])});
  }
  std::string resize(const trace::Event& e, std::vector<Attribute> a) {
    const Tensor& x = e.inputs[0];
    bool by_scale = false;
    for (const trace::Attr& t : e.attrs) by_scale |= t.name == "scale_h";
    const std::string roi = float_const({}, {0});
    if (by_scale)
      return node(onnx_op(e),
                  {use(x, name_of(e)), roi,
                   float_const({1.f, 1.f, float(real_of(e, "scale_h")), float(real_of(e, "scale_w"))}, {4})},
                  a);
    const std::vector<int64_t> s = ints_of(e, "size");
    return node(onnx_op(e),
                {use(x, name_of(e)), roi, float_const({}, {0}), int_const({x.size(0), x.size(1), s[0], s[1]})}, a);
  }
  std::string export_upsample_nearest2d(const trace::Event& e) {
    return resize(e, {attr_string("mode", "nearest"), attr_string("coordinate_transformation_mode", "asymmetric"),
                      attr_string("nearest_mode", "floor")});
  }
  std::string export_upsample_bilinear2d(const trace::Event& e) {
    return resize(e, {attr_string("mode", "linear"),
                      attr_string("coordinate_transformation_mode",
                                  int_of(e, "align_corners") ? "align_corners" : "pytorch_half_pixel")});
  }
  std::string export_reshape(const trace::Event& e) {
    const Tensor& x = e.inputs[0];
    std::vector<int64_t> shape = e.output.sizes();
    // 0 copies the input's dim: keeps the batch dim free when the reshape keeps it.
    if (x.dim() > 0 && !shape.empty() && shape[0] == x.size(0)) shape[0] = 0;
    return node(onnx_op(e), {use(x, name_of(e)), int_const(shape)});
  }
  std::string export_slice(const trace::Event& e) {
    const std::vector<int64_t> s = ints_of(e, "slice");  // dim, start, end, step
    return node(onnx_op(e), {use(e.inputs[0], name_of(e)), int_const({s[1]}), int_const({s[2]}), int_const({s[0]}),
                             int_const({s[3]})});
  }

  // ---- recurrent layers: lstm, gru, rnn_tanh, rnn_relu (one event for the whole ops::rnn call).
  // One ONNX node per layer, both directions in one (direction "bidirectional"), time-major
  // (layout 0, which opset 13 has: the file stays opset 13 whatever it holds; PyTorch's h_n is
  // [D * layers, N, H] even with batch_first, which ONNX's layout 1 would make batch-major too, so
  // Transposes are needed either way), with PyTorch's exporter's glue: X transposed from
  // batch-first, each layer's Y [T, D, N, H] back to [T, N, D * H] for the next, and h_n / c_n
  // the layers' Y_h / Y_c concatenated. Weights are written as ONNX's W [D, G*H, I], R [D, G*H, H]
  // and B [D, 2*G*H] (Wb then Rb) in ONNX's gate order (LSTM i o f c, from PyTorch's i f g o; GRU
  // z r h, from r z n), under names made from the state-dict keys ("lstm.W_l0" from
  // "lstm.weight_ih_l0").
  // A tensor the graph computes (the input or an op's output), not an initializer.
  bool is_graph_value(const Tensor& t) const {
    auto v = values_.find(t.impl());
    return v != values_.end() && !emitted_.count(v->second);
  }
  static RnnMode mode_of(const trace::Event& e) {
    switch (e.op) {
      case GraphOp::lstm: return RnnMode::lstm;
      case GraphOp::gru: return RnnMode::gru;
      case GraphOp::rnn_relu: return RnnMode::rnn_relu;
      default: return RnnMode::rnn_tanh;
    }
  }
  // ONNX's gate blocks in kiln's (PyTorch's) numbering: ONNX block k is kiln block order[k].
  static std::vector<int64_t> onnx_gate_order(RnnMode m) {
    if (m == RnnMode::lstm) return {0, 3, 1, 2};  // i o f c <- i f g o
    if (m == RnnMode::gru) return {1, 0, 2};      // z r h <- r z n
    return {0};
  }

  // The rows of kiln's [G*H, ...] parameters, directions stacked, in ONNX's gate order, as an
  // initializer named after the first one's state-dict key ("weight_ih" -> "W"); a second use
  // of the same parameters (a layer called twice) reuses it.
  std::string rnn_weights(const trace::Event& e, const std::vector<const Tensor*>& per_dir, const char* key,
                          const char* onnx_name, const std::vector<int64_t>& dims) {
    const RnnMode mode = mode_of(e);
    const Tensor& first = *per_dir[0];
    for (const Tensor* t : per_dir)
      KILN_CHECK(!is_graph_value(*t), "onnx export: ", name_of(e), "'s ", key,
                 " is computed by the graph; kiln writes recurrent weights as initializers (parameters or "
                 "constants)");
    auto p = params_.find(first.impl());
    std::string name;
    if (p != params_.end() && p->second.rfind(key) != std::string::npos) {
      name = p->second;
      name.replace(name.rfind(key), std::strlen(key), onnx_name);
      if (emitted_.count(name)) return name;
    } else {
      name = fresh(onnx_name);
    }
    TensorData d;
    d.name = name;
    d.dims = dims;
    const int64_t G = rnn_gate_count(mode);
    for (const Tensor* t : per_dir) {
      const std::vector<float> v = host_floats(t->contiguous());
      const int64_t rows = t->size(0) / G, cols = t->dim() > 1 ? t->size(1) : 1;
      for (int64_t k : onnx_gate_order(mode))
        d.f.insert(d.f.end(), v.begin() + std::ptrdiff_t(k * rows * cols), v.begin() + std::ptrdiff_t((k + 1) * rows * cols));
    }
    g_.initializers.push_back(std::move(d));
    emitted_.insert(name);
    return name;
  }
  // ONNX's B [D, 2*G*H]: per direction Wb (b_ih) then Rb (b_hh), each in ONNX's gate order.
  std::string rnn_bias(const trace::Event& e, const std::vector<std::pair<const Tensor*, const Tensor*>>& per_dir,
                       int64_t GH) {
    std::vector<const Tensor*> flat;
    for (const auto& [bi, bh] : per_dir) flat.push_back(bi), flat.push_back(bh);
    // rnn_weights permutes each tensor's gate blocks; b_ih and b_hh alternate per direction.
    return rnn_weights(e, flat, "bias_ih", "B", {int64_t(per_dir.size()), 2 * GH});
  }
  // A state (h0 / c0: [D * layers, N, H], or [D * layers, H] unbatched) for layer l: [D, N, H].
  std::string rnn_state(const trace::Event& e, const Tensor& s, int64_t l, int64_t D, int64_t layers, bool unbatched) {
    if (!s.defined()) return "";
    std::string v = use(s, name_of(e));
    if (layers > 1) v = node("Slice", {v, int_const({l * D}), int_const({(l + 1) * D}), int_const({0})});
    return unbatched ? node("Unsqueeze", {v, int_const({1})}) : v;
  }

  std::string recurrent(const trace::Event& e) {
    const RnnMode mode = mode_of(e);
    const bool lstm = mode == RnnMode::lstm;
    const int64_t layers = int_of(e, "num_layers"), proj = int_of(e, "proj_size");
    const bool bias = int_of(e, "bias") != 0, batch_first = int_of(e, "batch_first") != 0;
    const bool bidir = int_of(e, "bidirectional") != 0, reverse = int_of(e, "reverse") != 0;
    KILN_CHECK(proj == 0, "onnx export: lstm with proj_size ", proj,
               " has no ONNX form (ONNX's LSTM has no projection of the hidden state)");
    if (int_of(e, "training") != 0 && real_of(e, "dropout") > 0 && layers > 1)
      no_form(e, "it ran in training mode with dropout between its layers (export runs the net in eval)");
    const Tensor &x = e.inputs[0], &h0 = e.inputs[1], &c0 = e.inputs[2], &lengths = e.inputs[3];
    const int64_t D = bidir ? 2 : 1, G = rnn_gate_count(mode), per = 2 + (bias ? 2 : 0);
    const int64_t H = e.inputs[4].size(0) / G;
    const bool unbatched = x.dim() == 2;
    for (const Tensor* s : {&h0, &c0, &lengths})
      if (s->defined() && !is_graph_value(*s)) fixes_batch_ = true;
    std::string seq = use(x, name_of(e));
    if (unbatched) seq = node("Unsqueeze", {seq, int_const({1})});
    else if (batch_first) seq = node("Transpose", {seq}, {attr_ints("perm", {1, 0, 2})});
    std::string lens;
    if (lengths.defined()) {
      TensorData d;
      d.name = fresh("sequence_lens");
      d.dims = {lengths.numel()};
      d.elem_type = kInt32;
      d.i = lengths.to(Device()).to(DType::int64).contiguous().to_vector_of<int64_t>();
      g_.initializers.push_back(d);
      lens = d.name;
    }
    std::vector<Attribute> attrs = {attr_int("hidden_size", H),
                                    attr_string("direction", bidir ? "bidirectional" : reverse ? "reverse" : "forward")};
    if (mode == RnnMode::gru) attrs.push_back(attr_int("linear_before_reset", 1));  // PyTorch's GRU
    if (mode == RnnMode::rnn_relu) attrs.push_back(attr_strings("activations", std::vector<std::string>(size_t(D), "Relu")));
    std::vector<std::string> hns, cns;
    for (int64_t l = 0; l < layers; ++l) {
      std::vector<const Tensor*> w_ih, w_hh;
      std::vector<std::pair<const Tensor*, const Tensor*>> b;
      for (int64_t d = 0; d < D; ++d) {
        const Tensor* p = &e.inputs[size_t(4 + (l * D + d) * per)];
        w_ih.push_back(&p[0]);
        w_hh.push_back(&p[1]);
        if (bias) b.push_back({&p[2], &p[3]});
      }
      const int64_t in = w_ih[0]->size(1);
      const std::vector<std::string> outs = node_n(
          onnx_op(e),
          {seq, rnn_weights(e, w_ih, "weight_ih", "W", {D, G * H, in}), rnn_weights(e, w_hh, "weight_hh", "R", {D, G * H, H}),
           bias ? rnn_bias(e, b, G * H) : "", lens, rnn_state(e, h0, l, D, layers, unbatched),
           lstm ? rnn_state(e, c0, l, D, layers, unbatched) : ""},
          attrs, lstm ? 3 : 2);
      // Y [T, D, N, H] -> [T, N, D * H], the next layer's input.
      seq = D == 1 ? node("Squeeze", {outs[0], int_const({1})})
                   : node("Reshape", {node("Transpose", {outs[0]}, {attr_ints("perm", {0, 2, 1, 3})}), int_const({0, 0, -1})});
      hns.push_back(outs[1]);
      if (lstm) cns.push_back(outs[2]);
    }
    auto states = [&](const std::vector<std::string>& v) {
      const std::string s = v.size() == 1 ? v[0] : node("Concat", v, {attr_int("axis", 0)});
      return unbatched ? node("Squeeze", {s, int_const({1})}) : s;
    };
    bind(e.outputs[1], states(hns));
    if (lstm) bind(e.outputs[2], states(cns));
    if (unbatched) return node("Squeeze", {seq, int_const({1})});
    return batch_first ? node("Transpose", {seq}, {attr_ints("perm", {1, 0, 2})}) : seq;
  }
  std::string export_lstm(const trace::Event& e) { return recurrent(e); }
  std::string export_gru(const trace::Event& e) { return recurrent(e); }
  std::string export_rnn_tanh(const trace::Event& e) { return recurrent(e); }
  std::string export_rnn_relu(const trace::Event& e) { return recurrent(e); }

  Graph& g_;
  std::unordered_map<const TensorImpl*, std::string> values_, params_;
  std::unordered_set<std::string> emitted_;
  std::vector<Tensor> keep_;
  int counter_ = 0;
  bool fixes_batch_ = false;
};

// Restores a module's train/eval mode.
struct ModeGuard {
  Module& m;
  bool training;
  ~ModeGuard() { m.train(training); }
};

}  // namespace

// The exported graph, run by kiln's importer on an input unlike the traced one, must give the
// net's own output (both in eval mode).
static void verify_export(Module& net, const Model& m, const Shape& input_shape) {
  const int64_t n = shape_numel(input_shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(std::cos(0.37 * double(i)) + 0.25);
  const Tensor x = from_vector(v, input_shape);
  const std::vector<float> want = net(x).contiguous().to_vector_of<float>();
  ModulePtr graph = import_model(m);
  graph->eval();
  const std::vector<float> got = (*graph)(x).contiguous().to_vector_of<float>();
  KILN_CHECK(got.size() == want.size(), "onnx export: the graph gives ", got.size(), " outputs, the net ", want.size());
  double worst = 0, scale = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, double(std::abs(got[i] - want[i])));
    scale = std::max(scale, double(std::abs(want[i])));
  }
  KILN_CHECK(worst <= 1e-3 * scale, "onnx export: the graph does not reproduce the net on a second input (max "
             "difference ", worst, " at output scale ", scale, "); an op that is not traced was recorded as a "
             "constant");
}

Model export_module(Module& net, const Shape& input_shape, const ExportOptions& options) {
  KILN_CHECK(input_shape.size() >= 2, "onnx export: input shape ", shape_str(input_shape), " needs a batch dim");
  Model m;
  m.graph.name = options.graph_name;
  ModeGuard mode{net, net.is_training()};
  net.eval();
  NoGradGuard no_grad;
  // A fixed, smooth input: the trace does not depend on values, but a test may rerun it.
  const int64_t n = shape_numel(input_shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(std::sin(0.1 * double(i)));
  Tensor x = from_vector(v, input_shape);

  Exporter ex(net, m.graph);
  ex.set_input(x, "input");
  Tensor y;
  {
    trace::Scope scope(&ex);
    y = net(x);
  }
  const std::string out = ex.value_name(y);
  KILN_CHECK(!out.empty() && out != "input",
             "onnx export: the net's output was not made by a traced op (an op kiln cannot trace yet?)");
  // Rename the output value "output".
  for (Node& nd : m.graph.nodes) {
    for (std::string& s : nd.inputs)
      if (s == out) s = "output";
    for (std::string& s : nd.outputs)
      if (s == out) s = "output";
  }
  auto info = [&](const std::string& name, const Shape& s) {
    ValueInfo vi;
    vi.name = name;
    vi.dims = s;
    vi.dim_params.assign(s.size(), "");
    if (options.dynamic_batch && !ex.fixes_batch()) vi.dim_params[0] = "N";
    return vi;
  };
  m.graph.inputs.push_back(info("input", input_shape));
  m.graph.outputs.push_back(info("output", y.sizes()));
  if (options.verify) verify_export(net, m, input_shape);
  return m;
}

}  // namespace kiln::onnx
