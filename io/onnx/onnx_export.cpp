// ONNX export (io/onnx/onnx.h): one eval-mode forward traced op by op (engine/trace.h), each traced op
// mapped to ONNX (opset 13) nodes. Tracing rather than a per-layer mapping: composite modules
// (residual blocks, inception branches, UNet skips, option-A shortcuts) wire their children with
// plain ops in their own forward, and the trace sees exactly that wiring without each of them
// having to describe it.
//   kiln export --onnx resnet18.onnx --model resnet18
//   ctest --test-dir build -R onnx
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/graph_op.h"
#include "engine/ops/norm.h"
#include "engine/trace.h"
#include "io/onnx/onnx.h"

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

  // Appends a node; returns its output's name.
  std::string node(const std::string& op_type, std::vector<std::string> inputs, std::vector<Attribute> attrs = {}) {
    Node n;
    n.op_type = op_type;
    n.name = fresh(op_type);
    n.inputs = std::move(inputs);
    while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();  // trailing absent optionals
    n.outputs = {n.name + "_out"};
    n.attrs = std::move(attrs);
    g_.nodes.push_back(n);
    return n.outputs[0];
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
  // output's value name. A graph op without one fails to compile here.
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

  Graph& g_;
  std::unordered_map<const TensorImpl*, std::string> values_, params_;
  std::unordered_set<std::string> emitted_;
  std::vector<Tensor> keep_;
  int counter_ = 0;
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
    if (options.dynamic_batch) vi.dim_params[0] = "N";
    return vi;
  };
  m.graph.inputs.push_back(info("input", input_shape));
  m.graph.outputs.push_back(info("output", y.sizes()));
  if (options.verify) verify_export(net, m, input_shape);
  return m;
}

}  // namespace kiln::onnx
