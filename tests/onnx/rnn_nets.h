// Recurrent nets for the ONNX tests of LSTM, GRU and RNN (test_onnx_rnn.cpp without Python,
// test_onnx_rnn_runtime.cpp against onnxruntime): a kiln RNN / LSTM / GRU layer called through
// ops::rnn with the forms the exporter must write: stacked and bidirectional layers, batch_first,
// no bias, one reverse direction (ONNX's "reverse"), sequence lengths, learned initial states, an
// unbatched input, a Linear head, and h_n / c_n in the output.
#pragma once

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/ops/rnn.h"
#include "engine/ops/shape.h"
#include "layers/linear.h"
#include "layers/rnn.h"

namespace kiln::rnn_test {

struct Spec {
  std::string mode = "lstm";  // lstm, gru, rnn_tanh, rnn_relu
  int64_t layers = 1;
  bool bidirectional = false, batch_first = false, bias = true, reverse = false;
  bool lengths = false;  // constant lengths (the batch is then fixed)
  bool h0 = false;       // learned initial states (parameters)
  bool unbatched = false;
  bool head = false;    // a Linear on the output sequence
  bool states = false;  // the output is [output, h_n, c_n] flattened and concatenated
  int64_t T = 5, N = 3, I = 4, H = 6;

  std::string str() const {
    std::ostringstream os;
    os << mode << " layers=" << layers << (bidirectional ? " bidirectional" : "") << (batch_first ? " batch_first" : "")
       << (bias ? "" : " no-bias") << (reverse ? " reverse" : "") << (lengths ? " lengths" : "") << (h0 ? " h0" : "")
       << (unbatched ? " unbatched" : "") << (head ? " head" : "") << (states ? " states" : "");
    return os.str();
  }
  // A file name of the spec.
  std::string slug() const {
    std::string s = str();
    for (char& ch : s)
      if (ch == ' ' || ch == '=') ch = '_';
    return s;
  }
  int64_t D() const { return bidirectional ? 2 : 1; }
  Shape input() const {
    if (unbatched) return {T, I};
    return batch_first ? Shape{N, T, I} : Shape{T, N, I};
  }
  RnnMode rnn_mode() const {
    return mode == "lstm" ? RnnMode::lstm : mode == "gru" ? RnnMode::gru
                                          : mode == "rnn_relu" ? RnnMode::rnn_relu : RnnMode::rnn_tanh;
  }
};

// Deterministic values away from 0 and of both signs.
inline Tensor wave(const Shape& s, double f, double scale = 1.0) {
  const int64_t n = shape_numel(s);
  std::vector<float> v(size_t(n), 0.f);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(scale * std::sin(f * double(i) + 0.3));
  return from_vector(v, s);
}

class RecNet : public Module {
 public:
  explicit RecNet(const Spec& s) : s_(s) {
    RNNOptions o(s.I, s.H);
    o.num_layers = s.layers;
    o.bidirectional = s.bidirectional;
    o.batch_first = s.batch_first;
    o.bias = s.bias;
    o.nonlinearity = s.mode == "rnn_relu" ? Nonlinearity::relu : Nonlinearity::tanh;
    if (s.mode == "lstm") rnn_ = register_module("rnn", std::make_shared<LSTM>(o));
    else if (s.mode == "gru") rnn_ = register_module("rnn", std::make_shared<GRU>(o));
    else rnn_ = register_module("rnn", std::make_shared<RNN>(o));
    const int64_t L = s.D() * s.layers;
    if (s.h0) {
      const Shape st = s.unbatched ? Shape{L, s.H} : Shape{L, s.N, s.H};
      register_parameter("h0", wave(st, 0.7, 0.8));
      if (s.mode == "lstm") register_parameter("c0", wave(st, 1.3, 0.9));
    }
    if (s.lengths) {
      std::vector<double> len;
      for (int64_t n = 0; n < s.N; ++n) len.push_back(double(n == 0 ? s.T : 1 + (n * 2) % s.T));
      lengths_ = from_vector(len, {s.N}, TensorOptions(DType::int64));
    }
    if (s.head) head_ = register_module("head", std::make_shared<Linear>(s.D() * s.H, 2));
  }

  Tensor forward(const Tensor& x) override {
    const CallScope scope(*this);
    ops::RnnOptions o;
    o.mode = s_.rnn_mode();
    o.num_layers = s_.layers;
    o.bias = s_.bias;
    o.batch_first = s_.batch_first;
    o.bidirectional = s_.bidirectional;
    o.reverse = s_.reverse;
    o.training = is_training();
    const Tensor h0 = s_.h0 ? param("h0") : Tensor(), c0 = s_.h0 && s_.mode == "lstm" ? param("c0") : Tensor();
    const ops::RnnOutput r = ops::rnn(x, h0, c0, rnn_->flat_weights(), o, lengths_);
    Tensor y = head_ ? (*head_)(r.output) : r.output;
    if (!s_.states) return y;
    std::vector<Tensor> parts = {y.reshape({-1}), r.h_n.reshape({-1})};
    if (r.c_n.defined()) parts.push_back(r.c_n.reshape({-1}));
    return ops::cat(parts, 0);
  }
  std::string repr() const override { return "RecNet(" + s_.str() + ")"; }
  RNNBase& rnn() { return *rnn_; }

 private:
  Spec s_;
  std::shared_ptr<RNNBase> rnn_;
  std::shared_ptr<Linear> head_;
  Tensor lengths_;
};

// The nets both tests export: every mode, and the forms above.
inline std::vector<Spec> specs() {
  std::vector<Spec> v;
  auto add = [&](Spec s) { v.push_back(s); };
  Spec s;
  for (const char* m : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    s = Spec();
    s.mode = m;
    add(s);  // one layer, time-major, zero states
    s.layers = 2, s.bidirectional = true, s.batch_first = true, s.states = true;
    add(s);  // two bidirectional layers, batch-first, h_n (and c_n) in the output
  }
  s = Spec(), s.mode = "lstm", s.layers = 3, s.lengths = true, s.h0 = true, s.states = true, s.head = true;
  add(s);
  s = Spec(), s.mode = "gru", s.layers = 2, s.bidirectional = true, s.lengths = true, s.h0 = true, s.states = true;
  add(s);
  s = Spec(), s.mode = "rnn_relu", s.reverse = true, s.lengths = true, s.batch_first = true, s.states = true;
  add(s);
  s = Spec(), s.mode = "lstm", s.reverse = true, s.bias = false, s.h0 = true, s.states = true;
  add(s);
  s = Spec(), s.mode = "gru", s.bias = false, s.layers = 2, s.unbatched = true, s.states = true, s.h0 = true;
  add(s);
  s = Spec(), s.mode = "lstm", s.bidirectional = true, s.unbatched = true, s.head = true;
  add(s);
  return v;
}

}  // namespace kiln::rnn_test
