// ONNX import (io/onnx/onnx.h): a Module that runs an ONNX graph node by node with kiln ops, so
// `kiln bench --model file.onnx` times a user's own net like a zoo net (forward and, since the
// initializers are parameters, forward+backward too).
//   kiln bench --model mnist.onnx --batch 8 --iters 2
//   ctest --test-dir build -R onnx
#include <algorithm>
#include <climits>
#include <map>
#include <unordered_set>

#include "engine/error.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "io/onnx/onnx.h"

namespace kiln::onnx {
namespace {

using ops::ConvHW;

const std::vector<std::string> kOps = {
    "Add", "AveragePool", "BatchNormalization", "Concat", "Constant", "Conv", "ConvTranspose", "Div", "Dropout",
    "Flatten", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Identity", "LeakyRelu", "LogSoftmax", "LRN", "MatMul",
    "MaxPool", "Mul", "Pad", "Relu", "Reshape", "Resize", "Sigmoid", "Slice", "Softmax", "Sub", "Sum", "Tanh",
    "Transpose"};

int64_t get_int(const Node& n, const char* name, int64_t dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->i : dflt;
}
double get_float(const Node& n, const char* name, double dflt) {
  const Attribute* a = n.attr(name);
  return a ? double(a->f) : dflt;
}
std::string get_string(const Node& n, const char* name, const std::string& dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->s : dflt;
}
std::vector<int64_t> get_ints(const Node& n, const char* name, std::vector<int64_t> dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->ints : dflt;
}

std::string where(const Node& n) { return n.op_type + " node '" + n.name + "'"; }

Tensor to_tensor(const TensorData& t) {
  if (t.elem_type == kFloat) return from_vector(t.f, t.dims, TensorOptions(DType::float32));
  return from_vector(std::vector<double>(t.i.begin(), t.i.end()), t.dims, TensorOptions(DType::float32));
}

class OnnxNet : public Module {
 public:
  explicit OnnxNet(const Model& m) : graph_(m.graph) {
    KILN_CHECK(m.opset == 0 || m.opset >= 7, "onnx import: opset ", m.opset, " is older than kiln reads (7 and up)");
    for (const Node& n : graph_.nodes) {
      KILN_CHECK(n.domain.empty() || n.domain == "ai.onnx",
                 "onnx import: ", where(n), " is in domain '", n.domain, "', which kiln does not implement");
      KILN_CHECK(std::find(kOps.begin(), kOps.end(), n.op_type) != kOps.end(), "onnx import: unsupported op ",
                 where(n), " (kiln maps: ", join(kOps), ")");
    }
    std::unordered_set<std::string> init_names;
    for (const TensorData& t : graph_.initializers) {
      init_names.insert(t.name);
      if (t.elem_type == kInt64) {
        ints_[t.name] = t.i;
      } else {
        register_parameter(t.name, to_tensor(t));
      }
    }
    for (const ValueInfo& v : graph_.inputs)
      if (!init_names.count(v.name)) inputs_.push_back(v.name);
    KILN_CHECK(inputs_.size() == 1, "onnx import: kiln runs graphs with one input, this one has ", inputs_.size());
    KILN_CHECK(graph_.outputs.size() >= 1, "onnx import: the graph has no output");
    std::unordered_set<std::string> kept(init_names);
    for (const ValueInfo& v : graph_.outputs) kept.insert(v.name);
    for (const Node& n : graph_.nodes) {
      if (n.op_type == "Constant") kept.insert(n.outputs[0]);
      for (const std::string& s : n.inputs)
        if (!s.empty()) last_use_[s] = &n;
    }
    for (const std::string& k : kept) last_use_.erase(k);
    for (const Node& n : graph_.nodes)
      if (n.op_type == "Constant") {
        const Attribute* a = n.attr("value");
        KILN_CHECK(a && a->type == kAttrTensor, "onnx import: ", where(n), " needs a tensor 'value'");
        if (a->t.elem_type == kInt64) ints_[n.outputs[0]] = a->t.i;
        else consts_[n.outputs[0]] = to_tensor(a->t);
      }
  }

  std::string repr() const override {
    return "OnnxNet(" + graph_.name + ", " + std::to_string(graph_.nodes.size()) + " nodes)";
  }

  Tensor forward(const Tensor& x) override {
    std::map<std::string, Tensor> env;
    for (auto& [name, t] : named_parameters(false)) env[name] = t;
    for (auto& [name, t] : consts_) env[name] = t;
    env[inputs_[0]] = x;
    for (const Node& n : graph_.nodes) {
      if (n.op_type == "Constant") continue;
      std::vector<Tensor> in;
      for (const std::string& s : n.inputs) {
        if (s.empty() || ints_.count(s)) {
          in.emplace_back();
          continue;
        }
        auto it = env.find(s);
        KILN_CHECK(it != env.end(), "onnx import: ", where(n), " reads '", s, "', which nothing before it makes");
        in.push_back(it->second);
      }
      env[n.outputs.at(0)] = run(n, in);
      // Activations go as soon as their last reader has run (peak memory as the zoo net's).
      for (const std::string& s : n.inputs) {
        auto last = last_use_.find(s);
        if (last != last_use_.end() && last->second == &n) env.erase(s);
      }
    }
    auto it = env.find(graph_.outputs[0].name);
    KILN_CHECK(it != env.end(), "onnx import: the graph output '", graph_.outputs[0].name, "' is never computed");
    return it->second;
  }

 private:
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }

  const std::vector<int64_t>& int_input(const Node& n, size_t i) const {
    KILN_CHECK(i < n.inputs.size() && ints_.count(n.inputs[i]), "onnx import: ", where(n), " needs input ", i,
               " as a constant int64 tensor (an initializer or Constant)");
    return ints_.at(n.inputs[i]);
  }
  std::vector<float> float_input(const Node& n, size_t i) const {
    if (i >= n.inputs.size() || n.inputs[i].empty()) return {};
    for (const TensorData& t : graph_.initializers)
      if (t.name == n.inputs[i]) return t.f;
    auto c = consts_.find(n.inputs[i]);
    KILN_CHECK(c != consts_.end(), "onnx import: ", where(n), " needs input ", i, " as a constant");
    return c->second.to_vector_of<float>();
  }

  // ONNX pads [h_begin, w_begin, h_end, w_end]: kiln's ops pad both sides alike.
  static ConvHW sym_pads(const Node& n) {
    KILN_CHECK(get_string(n, "auto_pad", "NOTSET") == "NOTSET", "onnx import: ", where(n),
               " uses auto_pad, which kiln does not map");
    std::vector<int64_t> p = get_ints(n, "pads", {0, 0, 0, 0});
    KILN_CHECK(p.size() == 4 && p[0] == p[2] && p[1] == p[3], "onnx import: ", where(n),
               " has asymmetric or non-2-d pads; kiln maps symmetric 2-d ones");
    return ConvHW(p[0], p[1]);
  }
  static ConvHW hw(const Node& n, const char* name, int64_t dflt) {
    std::vector<int64_t> v = get_ints(n, name, {dflt, dflt});
    KILN_CHECK(v.size() == 2, "onnx import: ", where(n), " attribute ", name, " must have 2 values (2-d ops only)");
    return ConvHW(v[0], v[1]);
  }

  Tensor run(const Node& n, const std::vector<Tensor>& in) {
    const std::string& op = n.op_type;
    const Tensor& x = in.at(0);
    auto opt = [&](size_t i) { return i < in.size() ? in[i] : Tensor(); };
    if (op == "Conv") {
      return ops::conv2d(x, in.at(1), opt(2), hw(n, "strides", 1), sym_pads(n), hw(n, "dilations", 1),
                         get_int(n, "group", 1));
    }
    if (op == "ConvTranspose") {
      KILN_CHECK(!n.attr("output_shape"), "onnx import: ", where(n), " with output_shape is not mapped");
      return ops::conv_transpose2d(x, in.at(1), opt(2), hw(n, "strides", 1), sym_pads(n), hw(n, "output_padding", 0),
                                   hw(n, "dilations", 1), get_int(n, "group", 1));
    }
    if (op == "Gemm") {
      KILN_CHECK(get_float(n, "alpha", 1) == 1 && get_float(n, "beta", 1) == 1 && get_int(n, "transA", 0) == 0,
                 "onnx import: ", where(n), " maps only alpha = beta = 1 and transA = 0");
      Tensor w = get_int(n, "transB", 0) ? in.at(1) : in.at(1).transpose(0, 1);
      Tensor b = opt(2);
      if (b.defined()) b = b.reshape({b.numel()});
      return ops::linear(x, w, b);
    }
    if (op == "MatMul") return ops::matmul(x, in.at(1));
    if (op == "Transpose") {
      std::vector<int64_t> perm = get_ints(n, "perm", {});
      if (perm.empty())
        for (int64_t d = x.dim() - 1; d >= 0; --d) perm.push_back(d);
      return x.permute(perm).contiguous();
    }
    if (op == "Add") return ops::add(x, in.at(1));
    if (op == "Sub") return ops::sub(x, in.at(1));
    if (op == "Mul") return ops::mul(x, in.at(1));
    if (op == "Div") return ops::div(x, in.at(1));
    if (op == "Sum") return in.size() == 1 ? x : ops::add_n(in);
    if (op == "Relu") return ops::relu(x);
    if (op == "LeakyRelu") return ops::leaky_relu(x, get_float(n, "alpha", 0.01));
    if (op == "Sigmoid") return ops::sigmoid(x);
    if (op == "Tanh") return ops::tanh(x);
    if (op == "MaxPool" || op == "AveragePool") {
      KILN_CHECK(get_int(n, "storage_order", 0) == 0, "onnx import: ", where(n), " with storage_order 1 is not mapped");
      const ConvHW k = hw(n, "kernel_shape", 0), s = hw(n, "strides", 1), p = sym_pads(n);
      const bool ceil = get_int(n, "ceil_mode", 0) != 0;
      if (op == "MaxPool") {
        const ConvHW d = hw(n, "dilations", 1);
        return ops::max_pool2d(x, {k.h, k.w}, {s.h, s.w}, {p.h, p.w}, {d.h, d.w}, ceil);
      }
      return ops::avg_pool2d(x, {k.h, k.w}, {s.h, s.w}, {p.h, p.w}, ceil, get_int(n, "count_include_pad", 0) != 0);
    }
    if (op == "GlobalAveragePool") return ops::adaptive_avg_pool2d(x, {1, 1});
    if (op == "GlobalMaxPool") return ops::adaptive_max_pool2d(x, {1, 1});
    if (op == "BatchNormalization") {
      KILN_CHECK(get_int(n, "training_mode", 0) == 0 && n.outputs.size() == 1, "onnx import: ", where(n),
                 " in training mode is not mapped (export in eval mode)");
      return ops::batch_norm(x, in.at(1), in.at(2), in.at(3).detach(), in.at(4).detach(), false, 0.1,
                             get_float(n, "epsilon", 1e-5));
    }
    if (op == "LRN")
      return ops::local_response_norm(x, get_int(n, "size", 5), get_float(n, "alpha", 1e-4), get_float(n, "beta", 0.75),
                                      get_float(n, "bias", 1.0));
    if (op == "Softmax") return ops::softmax(x, get_int(n, "axis", -1));
    if (op == "LogSoftmax") return ops::log_softmax(x, get_int(n, "axis", -1));
    if (op == "Concat") return ops::cat(in, get_int(n, "axis", 0));
    if (op == "Identity" || op == "Dropout") return x;
    if (op == "Flatten") {
      int64_t axis = get_int(n, "axis", 1);
      if (axis < 0) axis += x.dim();
      int64_t outer = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
      return x.reshape({outer, x.numel() / std::max<int64_t>(outer, 1)});
    }
    if (op == "Reshape") {
      KILN_CHECK(get_int(n, "allowzero", 0) == 0, "onnx import: ", where(n), " with allowzero is not mapped");
      std::vector<int64_t> shape = int_input(n, 1);
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] == 0) shape[d] = x.size(int64_t(d));
      return x.reshape(shape);
    }
    if (op == "Slice") {
      const std::vector<int64_t>& starts = int_input(n, 1);
      const std::vector<int64_t>& ends = int_input(n, 2);
      std::vector<int64_t> axes, steps(starts.size(), 1);
      if (n.inputs.size() > 3 && !n.inputs[3].empty()) axes = int_input(n, 3);
      else for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
      if (n.inputs.size() > 4 && !n.inputs[4].empty()) steps = int_input(n, 4);
      Tensor y = x;
      for (size_t i = 0; i < starts.size(); ++i) {
        const int64_t d = axes[i] < 0 ? axes[i] + x.dim() : axes[i], size = x.size(d);
        KILN_CHECK(steps[i] > 0, "onnx import: ", where(n), " with a negative step is not mapped");
        auto clampi = [&](int64_t v) { return std::min(std::max(v < 0 ? v + size : v, int64_t(0)), size); };
        y = y.slice(d, clampi(starts[i]), clampi(ends[i]), steps[i]);
      }
      return y;
    }
    if (op == "Pad") {
      const std::vector<int64_t>& p = int_input(n, 1);
      const int64_t r = x.dim();
      KILN_CHECK(int64_t(p.size()) == 2 * r, "onnx import: ", where(n), " has ", p.size(), " pads for a ", r,
                 "-d input");
      const std::vector<float> value = float_input(n, 2);
      const double v = value.empty() ? 0.0 : double(value[0]);
      const std::string mode = get_string(n, "mode", "constant");
      KILN_CHECK(mode == "constant" || mode == "reflect" || mode == "edge", "onnx import: ", where(n), " mode ", mode);
      const PadMode m = mode == "reflect" ? PadMode::reflect : mode == "edge" ? PadMode::replicate : PadMode::constant;
      Tensor y = x;
      // Dims before the last two: constant padding as a concatenation with filled blocks.
      for (int64_t d = 0; d < r - 2 || (r < 2 && d < r); ++d) {
        const int64_t b = p[size_t(d)], a = p[size_t(d + r)];
        if (b == 0 && a == 0) continue;
        KILN_CHECK(m == PadMode::constant && b >= 0 && a >= 0, "onnx import: ", where(n), " pads dim ", d,
                   " with mode ", mode, " or negative pads; kiln maps those on the last two dims only");
        std::vector<Tensor> parts;
        Shape s = y.sizes();
        if (b > 0) s[size_t(d)] = b, parts.push_back(full(s, v, TensorOptions(y.dtype()).with_device(y.device())));
        parts.push_back(y);
        if (a > 0) s[size_t(d)] = a, parts.push_back(full(s, v, TensorOptions(y.dtype()).with_device(y.device())));
        y = ops::cat(parts, d);
      }
      if (r < 2) return y;
      const std::vector<int64_t> last = {p[size_t(r - 1)], p[size_t(2 * r - 1)], p[size_t(r - 2)],
                                         p[size_t(2 * r - 2)]};
      if (last == std::vector<int64_t>{0, 0, 0, 0}) return y;
      return ops::pad(y, last, m, v);
    }
    if (op == "Resize") {
      const std::string mode = get_string(n, "mode", "nearest");
      const std::string ct = get_string(n, "coordinate_transformation_mode", "half_pixel");
      std::vector<float> scales = float_input(n, 2);
      std::vector<int64_t> sizes;
      if (n.inputs.size() > 3 && !n.inputs[3].empty()) sizes = int_input(n, 3);
      KILN_CHECK(x.dim() == 4, "onnx import: ", where(n), " resizes 4-d inputs only");
      if (mode == "nearest") {
        KILN_CHECK(ct == "asymmetric" && get_string(n, "nearest_mode", "round_prefer_floor") == "floor",
                   "onnx import: ", where(n),
                   " maps nearest with asymmetric coordinates and floor rounding (PyTorch's) only");
        if (!sizes.empty()) return ops::upsample_nearest2d(x, {sizes[2], sizes[3]});
        return ops::upsample_nearest2d(x, double(scales.at(2)), double(scales.at(3)));
      }
      KILN_CHECK(mode == "linear" && (ct == "align_corners" || ct == "pytorch_half_pixel" || ct == "half_pixel"),
                 "onnx import: ", where(n), " mode ", mode, " / ", ct, " is not mapped");
      const bool ac = ct == "align_corners";
      if (!sizes.empty()) return ops::upsample_bilinear2d(x, {sizes[2], sizes[3]}, ac);
      return ops::upsample_bilinear2d(x, double(scales.at(2)), double(scales.at(3)), ac);
    }
    KILN_THROW("onnx import: unsupported op ", where(n));
  }

  Graph graph_;
  std::vector<std::string> inputs_;
  std::map<std::string, std::vector<int64_t>> ints_;
  std::map<std::string, Tensor> consts_;
  std::map<std::string, const Node*> last_use_;  // the node that reads a value last (not kept ones)
};

}  // namespace

const std::vector<std::string>& supported_ops() { return kOps; }

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

ModulePtr import_model(const Model& m) { return std::make_shared<OnnxNet>(m); }

}  // namespace kiln::onnx
