// ONNX LSTM, GRU and RNN both ways, without Python (test_onnx_rnn_runtime.cpp runs kiln's files in
// onnxruntime, test_onnx_rnn_torch.cpp imports PyTorch's, onnx.test_onnx_conformance has the ONNX
// backend node tests): kiln's recurrent nets export as one ONNX node per layer (ONNX's gate order,
// weights named from the state-dict keys, glue between layers) and import back to the same
// outputs; an imported node computes what kiln's layer computes with the gates reordered by hand
// (layouts 0 and 1, reverse, sequence_lens, initial states, every output); PyTorch's zero initial
// state (Expand of zeros) imports; and what kiln does not compute is refused by name, at import
// (clip, peepholes, other activations, input_forget, linear_before_reset = 0, bad sequence_lens)
// and at export (proj_size, weights the graph computes).
//   ctest --test-dir build -R onnx.test_onnx_rnn$
#include "tests/support/testing.h"

#include <algorithm>
#include <cmath>

#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "io/onnx/onnx.h"
#include "tests/onnx/rnn_nets.h"

using namespace kiln;
using namespace kiln::rnn_test;

namespace {

std::vector<float> values(const Tensor& t) { return t.contiguous().to_vector_of<float>(); }

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  return test::max_abs_diff(test::as_doubles(a), test::as_doubles(b));
}

std::vector<float> eval(Module& net, const Tensor& x) {
  NoGradGuard g;
  net.eval();
  return values(net(x));
}

const onnx::TensorData* initializer(const onnx::Model& m, const std::string& name) {
  for (const onnx::TensorData& t : m.graph.initializers)
    if (t.name == name) return &t;
  return nullptr;
}

const onnx::Attribute* attr(const onnx::Node& n, const std::string& name) { return n.attr(name); }

// x reversed along dim 0.
Tensor flip0(const Tensor& x) {
  std::vector<Tensor> parts;
  for (int64_t t = x.size(0) - 1; t >= 0; --t) parts.push_back(x.narrow(0, t, 1));
  return ops::cat(parts, 0);
}

// One recurrent node "n" reading the graph input "X" and initializers; the graph's output is the
// node's output named `out`.
struct RecNode {
  onnx::Model m;
  onnx::Node& node() { return m.graph.nodes[0]; }
  RecNode(const std::string& op, const Shape& x, int64_t opset, std::vector<std::string> outputs,
          const std::string& out) {
    m.opset = opset;
    onnx::Node n;
    n.name = "n";
    n.op_type = op;
    n.inputs = {"X"};
    n.outputs = std::move(outputs);
    m.graph.nodes.push_back(n);
    m.graph.inputs.push_back(onnx::ValueInfo{"X", onnx::kFloat, x, {}});
    m.graph.outputs.push_back(onnx::ValueInfo{out, onnx::kFloat, {}, {}});
  }
  RecNode& input(const std::string& name, const Tensor& t) {
    if (!t.defined()) {
      node().inputs.push_back("");
      return *this;
    }
    onnx::TensorData d;
    d.name = name, d.dims = t.sizes(), d.f = values(t);
    m.graph.initializers.push_back(d);
    node().inputs.push_back(name);
    return *this;
  }
  RecNode& ints(const std::string& name, std::vector<int64_t> v, int32_t type = onnx::kInt32) {
    onnx::TensorData d;
    d.name = name, d.dims = {int64_t(v.size())}, d.elem_type = type, d.i = std::move(v);
    m.graph.initializers.push_back(d);
    node().inputs.push_back(name);
    return *this;
  }
  RecNode& attr_int(const std::string& name, int64_t v) {
    onnx::Attribute a;
    a.name = name, a.type = onnx::kAttrInt, a.i = v;
    node().attrs.push_back(a);
    return *this;
  }
  RecNode& attr_float(const std::string& name, float v) {
    onnx::Attribute a;
    a.name = name, a.type = onnx::kAttrFloat, a.f = v;
    node().attrs.push_back(a);
    return *this;
  }
  RecNode& attr_string(const std::string& name, const std::string& v) {
    onnx::Attribute a;
    a.name = name, a.type = onnx::kAttrString, a.s = v;
    node().attrs.push_back(a);
    return *this;
  }
  RecNode& attr_strings(const std::string& name, std::vector<std::string> v) {
    onnx::Attribute a;
    a.name = name, a.type = onnx::kAttrStrings, a.strings = std::move(v);
    node().attrs.push_back(a);
    return *this;
  }
  // Through the wire format, as a file would come.
  ModulePtr import() const { return onnx::import_model(onnx::decode(onnx::encode(m))); }
};

// A kiln layer's parameters as ONNX's W, R, B for a node of D directions: gate blocks reordered
// here, independently of the exporter (ONNX: LSTM i o f c, GRU z r h; kiln: i f g o, r z n).
struct OnnxWeights {
  Tensor W, R, B;
};
OnnxWeights onnx_weights(RNNBase& layer, int64_t D, bool bias) {
  const RnnMode mode = layer.mode();
  const int64_t H = layer.options().hidden_size;
  std::vector<int64_t> order = {0};
  if (mode == RnnMode::lstm) order = {0, 3, 1, 2};
  if (mode == RnnMode::gru) order = {1, 0, 2};
  auto reorder = [&](const Tensor& t) {
    std::vector<Tensor> blocks;
    for (int64_t k : order) blocks.push_back(t.narrow(0, k * H, H));
    return ops::cat(blocks, 0);
  };
  const std::vector<Tensor> p = layer.flat_weights();
  const size_t per = bias ? 4 : 2;
  std::vector<Tensor> w, r, b;
  for (int64_t d = 0; d < D; ++d) {
    w.push_back(reorder(p[size_t(d) * per]));
    r.push_back(reorder(p[size_t(d) * per + 1]));
    if (bias) b.push_back(ops::cat({reorder(p[size_t(d) * per + 2]), reorder(p[size_t(d) * per + 3])}, 0));
  }
  OnnxWeights o;
  o.W = ops::stack(w, 0).detach();
  o.R = ops::stack(r, 0).detach();
  if (bias) o.B = ops::stack(b, 0).detach();
  return o;
}

}  // namespace

TEST_CASE("onnx rnn: kiln's recurrent nets export as one node per layer and import back to the same outputs") {
  for (const Spec& s : specs()) {
    CAPTURE(s.str());
    RecNet net(s);
    net.eval();
    const Tensor x = wave(s.input(), 0.37);
    const std::vector<float> want = eval(net, x);
    onnx::ExportOptions opt;
    opt.dynamic_batch = !s.states;  // a flattened output fixes every dim
    const onnx::Model m = onnx::decode(onnx::encode(onnx::export_module(net, s.input(), opt)));
    CHECK(m.opset == 13);
    int nodes = 0;
    const char* type = s.mode == "lstm" ? "LSTM" : s.mode == "gru" ? "GRU" : "RNN";
    for (const onnx::Node& n : m.graph.nodes) nodes += n.op_type == type;
    CHECK(nodes == s.layers);
    // Constant lengths or initial states fix the batch; otherwise dim 0 stays free.
    const bool fixed = s.lengths || s.h0 || s.states;
    CHECK(m.graph.inputs[0].dim_params[0] == (fixed ? "" : "N"));
    ModulePtr back = onnx::import_model(m);
    const std::vector<float> got = eval(*back, x);
    REQUIRE(got.size() == want.size());
    CHECK(max_diff(got, want) <= 1e-5);
    if (!fixed) {  // and at another size of the free dim (the sequence when time-major)
      Shape other = s.input();
      other[0] += 2;
      const Tensor x2 = wave(other, 0.23);
      CHECK(max_diff(eval(*back, x2), eval(net, x2)) <= 1e-5);
    }
  }
}

TEST_CASE("onnx rnn: the exported nodes: ONNX's gate order, W / R / B by state-dict names, glue, attributes") {
  Spec s;
  s.layers = 2, s.bidirectional = true, s.batch_first = true;
  RecNet net(s);
  const onnx::Model m = onnx::export_module(net, s.input());
  std::vector<std::string> ops;
  for (const onnx::Node& n : m.graph.nodes) ops.push_back(n.op_type);
  // X to time-major, layer, Y [T, 2, N, H] to [T, N, 2H], layer, the same, back to batch-first
  // (and the layers' Y_h / Y_c concatenated into h_n / c_n, unused here).
  const std::vector<std::string> want = {"Transpose", "LSTM",   "Transpose", "Reshape", "LSTM",
                                         "Transpose", "Reshape", "Concat",    "Concat",  "Transpose"};
  CHECK(ops == want);
  const onnx::Node& lstm = m.graph.nodes[1];
  REQUIRE(lstm.outputs.size() == 3);
  REQUIRE(attr(lstm, "direction"));
  CHECK(attr(lstm, "direction")->s == "bidirectional");
  CHECK(attr(lstm, "hidden_size")->i == s.H);
  CHECK(lstm.inputs[1] == "rnn.W_l0");
  CHECK(lstm.inputs[2] == "rnn.R_l0");
  CHECK(lstm.inputs[3] == "rnn.B_l0");
  const onnx::TensorData* W = initializer(m, "rnn.W_l0");
  const onnx::TensorData* B = initializer(m, "rnn.B_l1");
  REQUIRE(W);
  REQUIRE(B);
  CHECK(W->dims == Shape{2, 4 * s.H, s.I});
  CHECK(B->dims == Shape{2, 8 * s.H});
  // ONNX's o gate (block 1) of the reverse direction is kiln's block 3 (o of i f g o).
  const std::vector<float> w_rev = values(net.rnn().flat_weights()[4]);  // weight_ih_l0_reverse
  const int64_t H = s.H, I = s.I;
  for (int64_t j = 0; j < H * I; ++j) {
    CHECK(W->f[size_t(4 * H * I + 1 * H * I + j)] == w_rev[size_t(3 * H * I + j)]);
    CHECK(W->f[size_t(4 * H * I + 2 * H * I + j)] == w_rev[size_t(1 * H * I + j)]);  // f
  }
  // B: Wb then Rb, each reordered; Rb's c block (3) of layer 1, forward, is bias_hh_l1's g (2).
  const std::vector<float> bhh = values(net.rnn().flat_weights()[8 + 3]);  // bias_hh_l1
  for (int64_t j = 0; j < H; ++j) CHECK(B->f[size_t(4 * H + 3 * H + j)] == bhh[size_t(2 * H + j)]);

  // GRU: PyTorch's linear_before_reset; r / z swapped. RNN relu: its activations.
  Spec g;
  g.mode = "gru";
  RecNet gru(g);
  const onnx::Model gm = onnx::export_module(gru, g.input());
  const onnx::Node& gn = gm.graph.nodes[0];
  CHECK(gn.op_type == "GRU");
  REQUIRE(attr(gn, "linear_before_reset"));
  CHECK(attr(gn, "linear_before_reset")->i == 1);
  const std::vector<float> gw = values(gru.rnn().flat_weights()[0]);
  const onnx::TensorData* GW = initializer(gm, "rnn.W_l0");
  REQUIRE(GW);
  for (int64_t j = 0; j < H * I; ++j) CHECK(GW->f[size_t(j)] == gw[size_t(H * I + j)]);  // ONNX z = kiln z (1)
  Spec r;
  r.mode = "rnn_relu", r.bidirectional = true;
  RecNet relu(r);
  const onnx::Model rm = onnx::export_module(relu, r.input());
  REQUIRE(attr(rm.graph.nodes[0], "activations"));
  CHECK(attr(rm.graph.nodes[0], "activations")->strings == std::vector<std::string>{"Relu", "Relu"});
  // Lengths: an int32 sequence_lens; one reverse direction: direction "reverse".
  Spec l;
  l.mode = "rnn_tanh", l.lengths = true, l.reverse = true;
  RecNet len(l);
  const onnx::Model lm = onnx::export_module(len, l.input());
  const onnx::Node& ln = lm.graph.nodes[0];
  CHECK(attr(ln, "direction")->s == "reverse");
  REQUIRE(ln.inputs.size() >= 5);
  const onnx::TensorData* sl = initializer(lm, ln.inputs[4]);
  REQUIRE(sl);
  CHECK(sl->elem_type == onnx::kInt32);
  CHECK(sl->i == std::vector<int64_t>{5, 3, 5});
  const onnx::Model lm2 = onnx::decode(onnx::encode(lm));  // int32 on the wire, read back as int64
  CHECK(initializer(lm2, ln.inputs[4])->i == std::vector<int64_t>{5, 3, 5});
}

TEST_CASE("onnx rnn: what ONNX cannot express is refused at export, naming it") {
  // LSTM's projection.
  struct Proj : Module {
    std::shared_ptr<LSTM> lstm;
    Proj() {
      RNNOptions o(3, 5);
      o.proj_size = 2;
      lstm = register_module("lstm", std::make_shared<LSTM>(o));
    }
    Tensor forward(const Tensor& x) override { return (*lstm)(x); }
    std::string repr() const override { return "Proj"; }
  } proj;
  CHECK_THROWS_KILN(onnx::export_module(proj, {4, 2, 3}), "lstm with proj_size 2 has no ONNX form");
  // Weights the graph computes from the input are not initializers.
  struct Computed : Module {
    std::shared_ptr<GRU> gru = register_module("gru", std::make_shared<GRU>(3, 3));
    Tensor forward(const Tensor& x) override {
      std::vector<Tensor> p = gru->flat_weights();
      p[1] = ops::add(p[1], ops::mean(x, {0, 1, 2}, false));
      ops::RnnOptions o;
      o.mode = RnnMode::gru;
      return ops::rnn(x, Tensor(), Tensor(), p, o).output;
    }
    std::string repr() const override { return "Computed"; }
  } computed;
  CHECK_THROWS_KILN(onnx::export_module(computed, {4, 2, 3}), "gru's weight_hh is computed by the graph");
}

TEST_CASE("onnx rnn: an imported node computes kiln's layer with ONNX's gate order, layouts, directions and outputs") {
  const int64_t T = 5, N = 3, I = 4, H = 6;
  for (const char* mode : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    for (bool bidir : {false, true}) {
      CAPTURE(mode);
      CAPTURE(bidir);
      Spec s;
      s.mode = mode, s.bidirectional = bidir, s.T = T, s.N = N, s.I = I, s.H = H;
      RecNet net(s);
      RNNBase& layer = net.rnn();
      const int64_t D = bidir ? 2 : 1;
      const bool lstm = s.mode == "lstm";
      const std::string op = lstm ? "LSTM" : s.mode == "gru" ? "GRU" : "RNN";
      const OnnxWeights w = onnx_weights(layer, D, true);
      const Tensor x = wave({T, N, I}, 0.41), h0 = wave({D, N, H}, 0.9, 0.5), c0 = wave({D, N, H}, 1.7, 0.5);
      NoGradGuard g;
      const RnnOutput want = layer.forward(x, h0, lstm ? c0 : Tensor());
      auto make = [&](int64_t opset, bool batch_major, const std::string& out) {
        std::vector<std::string> outs = {"Y", "Y_h"};
        if (lstm) outs.push_back("Y_c");
        RecNode n(op, batch_major ? Shape{N, T, I} : Shape{T, N, I}, opset, outs, out);
        n.input("W", w.W).input("R", w.R).input("B", w.B).input("", Tensor());
        n.input("h0", batch_major ? h0.transpose(0, 1).contiguous() : h0);
        if (lstm) n.input("c0", batch_major ? c0.transpose(0, 1).contiguous() : c0);
        n.attr_int("hidden_size", H);
        if (bidir) n.attr_string("direction", "bidirectional");
        if (s.mode == "gru") n.attr_int("linear_before_reset", 1);
        if (s.mode == "rnn_relu") n.attr_strings("activations", std::vector<std::string>(size_t(D), "Relu"));
        if (batch_major) n.attr_int("layout", 1);
        return n.import();
      };
      // Layout 0 at opset 7: Y [T, D, N, H], Y_h / Y_c [D, N, H].
      const Tensor want_y = want.output.reshape({T, N, D, H}).permute({0, 2, 1, 3}).contiguous();
      CHECK_CLOSE((*make(7, false, "Y"))(x), want_y, 1e-5, 1e-6);
      CHECK_CLOSE((*make(13, false, "Y_h"))(x), want.h_n, 1e-5, 1e-6);
      if (lstm) CHECK_CLOSE((*make(22, false, "Y_c"))(x), want.c_n, 1e-5, 1e-6);
      // Layout 1 (opset 14): batch first, states [N, D, H].
      const Tensor xb = x.transpose(0, 1).contiguous();
      CHECK_CLOSE((*make(14, true, "Y"))(xb), want_y.permute({2, 0, 1, 3}).contiguous(), 1e-5, 1e-6);
      CHECK_CLOSE((*make(14, true, "Y_h"))(xb), want.h_n.transpose(0, 1).contiguous(), 1e-5, 1e-6);
    }
  }
}

TEST_CASE("onnx rnn: direction reverse, sequence_lens, Y_h alone, an all-zero P, no bias") {
  const int64_t T = 5, N = 3, I = 4, H = 6;
  Spec s;
  s.mode = "lstm", s.bias = false, s.T = T, s.N = N, s.I = I, s.H = H;
  RecNet net(s);
  const OnnxWeights w = onnx_weights(net.rnn(), 1, false);
  const Tensor x = wave({T, N, I}, 0.53);
  NoGradGuard g;
  // Reverse: the forward layer on the reversed sequence, its output reversed back.
  RecNode rev("LSTM", {T, N, I}, 13, {"Y"}, "Y");
  rev.input("W", w.W).input("R", w.R).attr_string("direction", "reverse");
  const Tensor want_rev = flip0(net.rnn().forward(flip0(x)));
  CHECK_CLOSE((*rev.import())(x).reshape({T, N, H}), want_rev, 1e-5, 1e-6);
  // sequence_lens as PyTorch's packed sequences; Y_h alone (the first output left out).
  const Tensor lengths = from_vector(std::vector<double>{5, 2, 4}, {3}, TensorOptions(DType::int64));
  const RnnOutput packed = net.rnn().forward_packed(x, lengths);
  RecNode lens("LSTM", {T, N, I}, 13, {"", "Y_h"}, "Y_h");
  lens.input("W", w.W).input("R", w.R).input("", Tensor()).ints("sl", {5, 2, 4});
  CHECK_CLOSE((*lens.import())(x), packed.h_n, 1e-5, 1e-6);
  RecNode lens_y("LSTM", {T, N, I}, 13, {"Y", "Y_h", "Y_c"}, "Y");
  lens_y.input("W", w.W).input("R", w.R).input("", Tensor()).ints("sl", {5, 2, 4});
  const Tensor y = (*lens_y.import())(x);
  CHECK_CLOSE(y.reshape({T, N, H}), packed.output, 1e-5, 1e-6);
  CHECK(ops::amax(ops::abs(y.narrow(0, 2, 3).narrow(2, 1, 1))).item() == 0.0);  // past sequence 1's end
  // An all-zero P is no peephole at all.
  RecNode p("LSTM", {T, N, I}, 13, {"", "Y_h"}, "Y_h");
  p.input("W", w.W).input("R", w.R).input("", Tensor()).input("", Tensor()).input("", Tensor()).input("", Tensor());
  p.input("P", from_vector(std::vector<float>(size_t(3 * H), 0.f), {1, 3 * H}));
  CHECK_CLOSE((*p.import())(x), net.rnn().forward(x, Tensor()).h_n, 1e-5, 1e-6);
}

TEST_CASE("onnx rnn: PyTorch's zero initial states, Expand(zeros, Shape...) or ConstantOfShape, import as none") {
  const int64_t T = 4, N = 2, I = 3, H = 5;
  GRU gru(I, H);
  const OnnxWeights w = onnx_weights(gru, 1, true);
  const Tensor x = wave({T, N, I}, 0.61);
  // initial_h = Expand(zeros [1, 1, H], Concat([1], Unsqueeze(Gather(Shape(X), 1)), [H])), as
  // torch.onnx.export(dynamo=False) writes it.
  auto model = [&](float fill) {
    RecNode n("GRU", {T, N, I}, 13, {"Y", "Y_h"}, "Y_h");
    n.input("W", w.W).input("R", w.R).input("B", w.B).input("", Tensor());
    n.node().inputs.push_back("h0");
    n.attr_int("hidden_size", H).attr_int("linear_before_reset", 1);
    auto constant = [&](const std::string& out, onnx::TensorData t) {
      onnx::Node c;
      c.op_type = "Constant", c.name = out, c.outputs = {out};
      onnx::Attribute a;
      a.name = "value", a.type = onnx::kAttrTensor, a.t = std::move(t);
      c.attrs = {a};
      return c;
    };
    auto ints = [](std::vector<int64_t> v, Shape dims) {
      onnx::TensorData t;
      t.elem_type = onnx::kInt64, t.i = std::move(v), t.dims = std::move(dims);
      return t;
    };
    onnx::TensorData zeros;
    zeros.dims = {1, 1, H}, zeros.f.assign(size_t(H), fill);
    auto plain = [](const std::string& op, std::vector<std::string> in, const std::string& out) {
      onnx::Node k;
      k.op_type = op, k.name = out, k.inputs = std::move(in), k.outputs = {out};
      return k;
    };
    std::vector<onnx::Node> pre = {
        constant("zeros", zeros), plain("Shape", {"X"}, "shape"), constant("one", ints({1}, {})),
        plain("Gather", {"shape", "one"}, "batch"), constant("axes", ints({0}, {1})),
        plain("Unsqueeze", {"batch", "axes"}, "batch1"), constant("d", ints({1}, {1})),
        constant("h", ints({H}, {1})), plain("Concat", {"d", "batch1", "h"}, "dims"),
        plain("Expand", {"zeros", "dims"}, "h0")};
    onnx::Attribute axis;
    axis.name = "axis", axis.type = onnx::kAttrInt, axis.i = 0;
    pre[8].attrs = {axis};
    n.m.graph.nodes.insert(n.m.graph.nodes.begin(), pre.begin(), pre.end());
    return n.import();
  };
  NoGradGuard g;
  CHECK_CLOSE((*model(0.f))(x), gru.forward(x, Tensor()).h_n, 1e-5, 1e-6);
  // A state of another value is no such pattern: Shape, Gather and Expand are then refused.
  CHECK_THROWS_KILN(model(0.5f), "unsupported op");
  // ConstantOfShape (zeros by default), sliced: the TorchScript exporter's form with a free batch.
  {
    RecNode n("GRU", {T, N, I}, 13, {"Y", "Y_h"}, "Y_h");
    n.input("W", w.W).input("R", w.R).input("B", w.B).input("", Tensor());
    n.node().inputs.push_back("h0");
    n.attr_int("hidden_size", H).attr_int("linear_before_reset", 1);
    onnx::Node shape, cos, slice;
    shape.op_type = "Shape", shape.name = "shape", shape.inputs = {"X"}, shape.outputs = {"shape"};
    cos.op_type = "ConstantOfShape", cos.name = "cos", cos.inputs = {"shape3"}, cos.outputs = {"zeros"};
    slice.op_type = "Slice", slice.name = "slice", slice.inputs = {"zeros", "s0", "s1", "s2"}, slice.outputs = {"h0"};
    onnx::Node shape3;  // [T, N, I] -> the state's [1, N, H] is not computed here: any shape of zeros
    shape3.op_type = "Identity", shape3.name = "shape3", shape3.inputs = {"shape"}, shape3.outputs = {"shape3"};
    n.m.graph.nodes.insert(n.m.graph.nodes.begin(), {shape, shape3, cos, slice});
    for (const char* s : {"s0", "s1", "s2"}) {
      onnx::TensorData t;
      t.name = s, t.elem_type = onnx::kInt64, t.dims = {1}, t.i = {s[1] == '1' ? 1 : 0};
      n.m.graph.initializers.push_back(t);
    }
    CHECK_CLOSE((*n.import())(x), gru.forward(x, Tensor()).h_n, 1e-5, 1e-6);
  }
}

TEST_CASE("onnx rnn: what kiln does not compute is refused at import, naming node, op and attribute") {
  const int64_t T = 3, N = 2, I = 2, H = 3;
  auto node = [&](const std::string& op, int64_t G, int64_t opset = 13) {
    RecNode n(op, {T, N, I}, opset, {"Y"}, "Y");
    n.input("W", wave({1, G * H, I}, 0.3)).input("R", wave({1, G * H, H}, 0.5));
    if (op == "GRU") n.attr_int("linear_before_reset", 1);
    return n;
  };
  CHECK_NOTHROW(node("LSTM", 4).import());
  CHECK_THROWS_KILN(node("LSTM", 4).attr_float("clip", 3.f).import(),
                    "node 'n' (LSTM, opset 13): attribute 'clip' (cell clipping) is not implemented");
  CHECK_THROWS_KILN(node("LSTM", 4).attr_strings("activations", {"Sigmoid", "HardSigmoid", "Tanh"}).import(),
                    "(LSTM, opset 13): attribute 'activations'[1] = 'HardSigmoid' is not implemented");
  CHECK_NOTHROW(node("LSTM", 4).attr_strings("activations", {"sigmoid", "Tanh", "tanh"}).import());
  CHECK_THROWS_KILN(node("LSTM", 4).attr_strings("activations", {"Sigmoid", "Tanh"}).import(),
                    "attribute 'activations' lists 2 functions; LSTM with direction 'forward' takes 3");
  CHECK_THROWS_KILN(node("LSTM", 4).attr_float("activation_alpha", 1.f).import(),
                    "attribute 'activation_alpha' is not implemented");
  CHECK_THROWS_KILN(node("LSTM", 4).attr_int("input_forget", 1).import(),
                    "(LSTM, opset 13): attribute 'input_forget' = 1");
  CHECK_NOTHROW(node("LSTM", 4).attr_int("input_forget", 0).import());
  {
    RecNode p = node("LSTM", 4);
    p.input("", Tensor()).input("", Tensor()).input("", Tensor()).input("", Tensor());
    p.input("P", wave({1, 3 * H}, 0.2));
    CHECK_THROWS_KILN(p.import(), "(LSTM, opset 13): input 7 (P, peephole weights) is not implemented");
  }
  // GRU without linear_before_reset (ONNX's default) is another GRU than PyTorch's.
  {
    RecNode gru("GRU", {T, N, I}, 13, {"Y"}, "Y");
    gru.input("W", wave({1, 3 * H, I}, 0.3)).input("R", wave({1, 3 * H, H}, 0.5));
    CHECK_THROWS_KILN(gru.import(), "(GRU, opset 13): attribute 'linear_before_reset' = 0");
    gru.attr_int("linear_before_reset", 0);
    CHECK_THROWS_KILN(gru.import(), "attribute 'linear_before_reset' = 0");
  }
  CHECK_THROWS_KILN(node("RNN", 1).attr_strings("activations", {"Sigmoid"}).import(),
                    "(RNN, opset 13): attribute 'activations'[0] = 'Sigmoid' is not implemented");
  {
    RecNode mixed("RNN", {T, N, I}, 13, {"Y"}, "Y");
    mixed.input("W", wave({2, H, I}, 0.3)).input("R", wave({2, H, H}, 0.5));
    mixed.attr_string("direction", "bidirectional").attr_strings("activations", {"Tanh", "Relu"});
    CHECK_THROWS_KILN(mixed.import(), "attribute 'activations'[1] = 'Relu' is not implemented");
  }
  CHECK_THROWS_KILN(node("RNN", 1).attr_string("direction", "sideways").import(),
                    "attribute 'direction' = 'sideways' is not one of forward, reverse, bidirectional");
  // layout came with opset 14: at 13 it is no attribute of RNN-7.
  CHECK_THROWS_KILN(node("RNN", 1).attr_int("layout", 1).import(),
                    "attribute 'layout' is not implemented by kiln for RNN-7");
  CHECK_NOTHROW(node("RNN", 1, 14).attr_int("layout", 0).import());
  CHECK_THROWS_KILN(node("RNN", 1).attr_int("hidden_size", 4).import(), "attribute 'hidden_size' = 4, but R");
  // sequence_lens: in [1, T], one per sequence, known at import.
  CHECK_THROWS_KILN(node("RNN", 1).input("", Tensor()).ints("sl", {3, 0}).import(),
                    "(RNN, opset 13): sequence_lens[1] = 0 is outside [1, 3]");
  CHECK_THROWS_KILN(node("RNN", 1).input("", Tensor()).ints("sl", {4, 1}).import(), "sequence_lens[0] = 4");
  CHECK_THROWS_KILN(node("RNN", 1).input("", Tensor()).ints("sl", {3}).import(),
                    "sequence_lens has 1 values for a batch of 2");
  // Wrong weight shapes are errors naming the input.
  RecNode bad("LSTM", {T, N, I}, 13, {"Y"}, "Y");
  bad.input("W", wave({1, 4 * H, I + 1}, 0.3)).input("R", wave({1, 4 * H, H}, 0.5));
  CHECK_THROWS_KILN(bad.import(), "(LSTM, opset 13): input W [1, 12, 3] is not [1, 12, 2]");
  // A node's outputs: at most 3 for LSTM, 2 for GRU / RNN.
  RecNode many = node("RNN", 1);
  many.node().outputs = {"Y", "Y_h", "Y_c"};
  CHECK_THROWS_KILN(many.import(), "RNN-7 has at most 2 outputs, the node names 3");
}

TEST_CASE("onnx rnn: an imported recurrent node trains: ONNX's W, R and B get gradients") {
  Spec s;
  s.mode = "gru", s.bidirectional = true;
  RecNet net(s);
  ModulePtr back = onnx::import_model(onnx::export_module(net, s.input()));
  back->train();
  Tensor loss = ops::sum(ops::mul((*back)(wave(s.input(), 0.3)), wave({s.T, s.N, 2 * s.H}, 0.2)));
  loss.backward();
  int with_grad = 0;
  for (auto& [name, p] : back->named_parameters())
    if (name.find("rnn.") == 0 && p.grad().defined() && ops::amax(ops::abs(p.grad())).item() > 0) ++with_grad;
  CHECK(with_grad == 3);  // rnn.W_l0, rnn.R_l0, rnn.B_l0
}

TEST_CASE("onnx rnn: the fuzz seeds of the recurrent nodes import (the fuzzer starts from the success path)") {
  NoGradGuard g;
  ModulePtr lstm = onnx::import_model(onnx::load(KILN_SOURCE_DIR "/fuzz/corpus/onnx/lstm-bidir.onnx"));
  CHECK((*lstm)(wave({4, 2, 3}, 0.3)).sizes() == Shape{2, 2, 2});
  ModulePtr gru = onnx::import_model(onnx::load(KILN_SOURCE_DIR "/fuzz/corpus/onnx/gru-zero-state.onnx"));
  CHECK((*gru)(wave({4, 2, 2}, 0.3)).sizes() == Shape{4, 1, 2, 2});
}
