// The ONNX importer's recurrent ops (io/onnx/onnx_ops.h): an LSTM, GRU or RNN node is one layer of
// ops::rnn (engine/ops/rnn.h) in the node's direction (forward, reverse or both), with ONNX's
// weights taken to kiln's (PyTorch's) gate order at run time (slices of W, R and B, so that the
// initializers stay trainable parameters): LSTM i o f c -> i f g o, GRU z r h -> r z n. Layout 0
// (time-major) and 1 (batch-major, opset 14 on), sequence_lens (a constant, each in [1, seq]),
// initial_h / initial_c, and any of the outputs Y, Y_h, Y_c.
// Refused by name: what kiln's layers do not compute: peepholes (P, unless an all-zero constant),
// clip, activations other than ONNX's defaults (RNN: Tanh or Relu, the same both ways),
// activation_alpha / beta, input_forget = 1, and GRU's linear_before_reset = 0 (kiln's GRU is
// PyTorch's, which ONNX writes as linear_before_reset = 1).
//   ctest --test-dir build -R onnx
#include <cctype>

#include "engine/ops/rnn.h"
#include "engine/ops/shape.h"
#include "io/onnx/onnx_ops.h"

namespace kiln::onnx::detail {
namespace {

// kiln's gate block k is ONNX's block order[k].
std::vector<int64_t> kiln_gate_order(RnnMode m) {
  if (m == RnnMode::lstm) return {0, 2, 3, 1};  // i f g o <- i o f c
  if (m == RnnMode::gru) return {1, 0, 2};      // r z n <- z r h
  return {0};
}

// The [G*H, ...] rows of one direction's W, R or half of B, in kiln's gate order.
Tensor to_kiln_gates(const Tensor& t, RnnMode m, int64_t H) {
  if (rnn_gate_count(m) == 1) return t;
  std::vector<Tensor> blocks;
  for (int64_t k : kiln_gate_order(m)) blocks.push_back(t.slice(0, k * H, (k + 1) * H));
  return ops::cat(blocks, 0);
}

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The mode the node's `activations` give (onnxruntime compares their names without case):
// ONNX's defaults, or Relu for both directions of an RNN; anything else is refused by name.
RnnMode read_activations(NodeCtx& c, int64_t D, const std::string& dir) {
  const std::string& op = c.node.op_type;
  const std::vector<std::string> defaults = op == "LSTM"  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                            : op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                          : std::vector<std::string>{"Tanh"};
  const RnnMode base = op == "LSTM" ? RnnMode::lstm : op == "GRU" ? RnnMode::gru : RnnMode::rnn_tanh;
  const std::vector<std::string> given = c.strings("activations", {});
  if (given.empty()) return base;
  if (given.size() != defaults.size() * size_t(D))
    c.refuse("attribute 'activations' lists ", given.size(), " functions; ", op, " with direction '", dir, "' takes ",
             defaults.size() * size_t(D));
  if (op == "RNN") {
    const std::string first = lower(given[0]);
    for (size_t k = 0; k < given.size(); ++k)
      if ((first != "tanh" && first != "relu") || lower(given[k]) != first)
        c.refuse("attribute 'activations'[", k, "] = '", given[k],
                 "' is not implemented: kiln's RNN computes Tanh or Relu, the same in both directions (activations ",
                 join(given), ")");
    return first == "relu" ? RnnMode::rnn_relu : RnnMode::rnn_tanh;
  }
  for (size_t k = 0; k < given.size(); ++k)
    if (lower(given[k]) != lower(defaults[k % defaults.size()]))
      c.refuse("attribute 'activations'[", k, "] = '", given[k], "' is not implemented: kiln's ", op, " computes ",
               join(defaults), " (ONNX's defaults)");
  return base;
}

}  // namespace

bool is_recurrent(const std::string& op) { return op == "LSTM" || op == "GRU" || op == "RNN"; }

MultiOpFn recurrent_op(NodeCtx& c) {
  const std::string& op = c.node.op_type;
  const std::string dir = c.s("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    c.refuse("attribute 'direction' = '", dir, "' is not one of forward, reverse, bidirectional");
  const int64_t D = dir == "bidirectional" ? 2 : 1;
  const int64_t hidden = c.i("hidden_size", 0);
  if (c.has("hidden_size") && hidden <= 0) c.refuse("attribute 'hidden_size' = ", hidden, " is not positive");
  const int64_t layout = c.version >= 14 ? c.i("layout", 0) : 0;
  if (layout != 0 && layout != 1) c.refuse("attribute 'layout' = ", layout, " is not 0 or 1");
  if (c.has("clip"))
    c.refuse("attribute 'clip' (cell clipping) is not implemented: kiln's recurrent layers do not clip");
  for (const char* a : {"activation_alpha", "activation_beta"})
    if (c.has(a))
      c.refuse("attribute '", a, "' is not implemented (it parameterises activations kiln does not compute)");
  const RnnMode mode = read_activations(c, D, dir);
  if (op == "LSTM" && c.i("input_forget", 0) != 0)
    c.refuse("attribute 'input_forget' = 1 (input and forget gates coupled) is not implemented");
  if (op == "GRU" && c.i("linear_before_reset", 0) == 0)
    c.refuse("attribute 'linear_before_reset' = 0 (ONNX's default: the reset gate applied before the recurrent "
             "product) is not implemented; kiln's GRU is PyTorch's, linear_before_reset = 1");
  if (op == "LSTM" && c.has_input(7)) {
    bool zero = c.is_const(7);
    if (zero)
      for (float v : c.const_floats(7, "P")) zero = zero && v == 0.f;
    if (!zero)
      c.refuse("input 7 (P, peephole weights) is not implemented: kiln's LSTM has no peephole connections (only "
               "an all-zero constant P is accepted)");
  }
  const bool has_lens = c.has_input(4);
  const std::vector<int64_t> lens = has_lens ? c.const_ints(4, "sequence_lens") : std::vector<int64_t>();

  return [&c, mode, D, hidden, layout, dir, has_lens, lens](const std::vector<Tensor>& in) {
    auto input = [&](size_t k) { return k < in.size() ? in[k] : Tensor(); };
    const Tensor X = in[0], W = in[1], R = in[2], B = input(3);
    Tensor h0 = input(5), c0 = input(6);
    const int64_t G = rnn_gate_count(mode);
    if (X.dim() != 3)
      c.refuse("input X ", shape_str(X.sizes()), " is not 3-d (", layout ? "[batch, seq, input]" : "[seq, batch, input]",
               ")");
    const int64_t T = X.size(layout ? 1 : 0), N = X.size(layout ? 0 : 1), I = X.size(2);
    if (R.dim() != 3 || R.size(0) != D || R.size(2) < 1 || R.size(1) != G * R.size(2))
      c.refuse("input R ", shape_str(R.sizes()), " is not [", D, ", ", G, " * hidden_size, hidden_size]");
    const int64_t H = R.size(2);
    if (hidden && hidden != H) c.refuse("attribute 'hidden_size' = ", hidden, ", but R ", shape_str(R.sizes()), " has ", H);
    if (W.sizes() != Shape{D, G * H, I})
      c.refuse("input W ", shape_str(W.sizes()), " is not [", D, ", ", G * H, ", ", I, "]");
    if (B.defined() && B.sizes() != Shape{D, 2 * G * H})
      c.refuse("input B ", shape_str(B.sizes()), " is not [", D, ", ", 2 * G * H, "]");
    const Shape state = layout ? Shape{N, D, H} : Shape{D, N, H};
    for (Tensor* s : {&h0, &c0}) {
      if (!s->defined()) continue;
      if (s->sizes() != state)
        c.refuse(s == &h0 ? "input initial_h " : "input initial_c ", shape_str(s->sizes()), " is not ", shape_str(state));
      if (layout) *s = s->transpose(0, 1);
    }
    Tensor lengths;
    if (has_lens) {
      if (int64_t(lens.size()) != N) c.refuse("sequence_lens has ", lens.size(), " values for a batch of ", N);
      for (size_t k = 0; k < lens.size(); ++k)
        if (lens[k] < 1 || lens[k] > T)
          c.refuse("sequence_lens[", k, "] = ", lens[k], " is outside [1, ", T,
                   "]: kiln runs every sequence for at least one step and at most the input's ", T);
      lengths = from_vector(std::vector<double>(lens.begin(), lens.end()), {N}, TensorOptions(DType::int64));
    }
    std::vector<Tensor> params;
    for (int64_t d = 0; d < D; ++d) {
      params.push_back(to_kiln_gates(W.select(0, d), mode, H));
      params.push_back(to_kiln_gates(R.select(0, d), mode, H));
      if (B.defined()) {
        const Tensor b = B.select(0, d);
        params.push_back(to_kiln_gates(b.slice(0, 0, G * H), mode, H));
        params.push_back(to_kiln_gates(b.slice(0, G * H, 2 * G * H), mode, H));
      }
    }
    ops::RnnOptions o;
    o.mode = mode;
    o.bias = B.defined();
    o.batch_first = layout == 1;
    o.bidirectional = D == 2;
    o.reverse = dir == "reverse";
    const ops::RnnOutput r = ops::rnn(X, h0, mode == RnnMode::lstm ? c0 : Tensor(), params, o, lengths);
    // kiln's output [T, N, D * H] (batch-major [N, T, D * H]) is ONNX's Y [T, D, N, H] ([N, T, D, H]).
    const Tensor Y = layout ? r.output.reshape({N, T, D, H}) : r.output.reshape({T, N, D, H}).permute({0, 2, 1, 3}).contiguous();
    auto state_out = [&](const Tensor& s) { return layout ? s.transpose(0, 1).contiguous() : s; };
    std::vector<Tensor> out = {Y, state_out(r.h_n)};
    if (mode == RnnMode::lstm) out.push_back(state_out(r.c_n));
    return out;
  };
}

}  // namespace kiln::onnx::detail
