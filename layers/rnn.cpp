// Recurrent layers: parameters in PyTorch's names, order and initialisation; forward is ops::rnn.
//   ctest --test-dir build -R rnn
#include "layers/rnn.h"

#include <cmath>
#include <sstream>

#include "layers/init.h"

namespace kiln {
namespace {

const char* cell_name(RnnMode m) {
  switch (m) {
    case RnnMode::lstm: return "LSTMCell";
    case RnnMode::gru: return "GRUCell";
    case RnnMode::rnn_tanh: case RnnMode::rnn_relu: break;
  }
  return "RNNCell";
}

RNNOptions stacked(int64_t input_size, int64_t hidden_size, int64_t num_layers) {
  RNNOptions o(input_size, hidden_size);
  o.num_layers = num_layers;
  return o;
}

void init_uniform(Module& m, int64_t hidden) {
  const double stdv = hidden > 0 ? 1.0 / std::sqrt(double(hidden)) : 0.0;
  for (Tensor& p : m.parameters(false)) init::uniform_(p, -stdv, stdv);
}

}  // namespace

RNNBase::RNNBase(RnnMode mode, const RNNOptions& o, const char* type) : mode_(mode), opt_(o), type_(type) {
  KILN_CHECK(o.input_size >= 1 && o.hidden_size >= 1, type, ": input_size ", o.input_size, " and hidden_size ",
             o.hidden_size, " must be positive");
  KILN_CHECK(o.num_layers >= 1, type, ": num_layers ", o.num_layers, " must be at least 1");
  KILN_CHECK(o.dropout >= 0 && o.dropout <= 1, type, ": dropout ", o.dropout, " outside [0, 1]");
  KILN_CHECK(o.proj_size >= 0, type, ": negative proj_size ", o.proj_size);
  KILN_CHECK(o.proj_size == 0 || mode == RnnMode::lstm, type, ": proj_size exists for LSTM only");
  KILN_CHECK(o.proj_size < o.hidden_size, type, ": proj_size ", o.proj_size, " must be smaller than hidden_size ",
             o.hidden_size);
  const int64_t G = rnn_gate_count(mode), H = o.hidden_size, D = o.bidirectional ? 2 : 1;
  const int64_t Ho = o.proj_size > 0 ? o.proj_size : H;
  const std::vector<std::string> names = flat_weight_names();
  size_t k = 0;
  for (int64_t l = 0; l < o.num_layers; ++l)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t in = l == 0 ? o.input_size : D * Ho;
      register_parameter(names[k++], empty({G * H, in}).requires_grad_(true));
      register_parameter(names[k++], empty({G * H, Ho}).requires_grad_(true));
      if (o.bias) {
        register_parameter(names[k++], empty({G * H}).requires_grad_(true));
        register_parameter(names[k++], empty({G * H}).requires_grad_(true));
      }
      if (o.proj_size > 0) register_parameter(names[k++], empty({o.proj_size, H}).requires_grad_(true));
    }
  reset_parameters();
}

std::vector<std::string> RNNBase::flat_weight_names() const {
  std::vector<std::string> names;
  const int64_t D = opt_.bidirectional ? 2 : 1;
  for (int64_t l = 0; l < opt_.num_layers; ++l)
    for (int64_t d = 0; d < D; ++d) {
      const std::string suffix = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      names.push_back("weight_ih" + suffix);
      names.push_back("weight_hh" + suffix);
      if (opt_.bias) {
        names.push_back("bias_ih" + suffix);
        names.push_back("bias_hh" + suffix);
      }
      if (opt_.proj_size > 0) names.push_back("weight_hr" + suffix);
    }
  return names;
}

std::vector<Tensor> RNNBase::flat_weights() {
  std::vector<Tensor> w;
  for (const std::string& n : flat_weight_names()) w.push_back(param(n));
  return w;
}

void RNNBase::reset_parameters() { init_uniform(*this, opt_.hidden_size); }

RnnOutput RNNBase::run(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& lengths) {
  const CallScope scope(*this);
  KILN_CHECK(mode_ == RnnMode::lstm || !c0.defined(), type_, ": c0 is an LSTM's cell state; a ", type_,
             " has none");
  ops::RnnOptions o;
  o.mode = mode_;
  o.num_layers = opt_.num_layers;
  o.bias = opt_.bias;
  o.batch_first = opt_.batch_first;
  o.dropout = opt_.dropout;
  o.training = is_training();
  o.bidirectional = opt_.bidirectional;
  o.proj_size = opt_.proj_size;
  // Mixed precision (a half-type input, float32 master weights): the layer runs on half copies of
  // the weights and initial states, as PyTorch's autocast runs its recurrent layers, so ops::rnn
  // takes its half kernels (oneDNN bfloat16, cuDNN float16) where they exist, else float32 copies;
  // the gradients flow back to the float32 masters through the conversions.
  std::vector<Tensor> w = flat_weights();
  for (Tensor& p : w) p = half_copy_for(p, x);
  return ops::rnn(x, half_copy_for(h0, x), half_copy_for(c0, x), w, o, lengths);
}

Tensor RNNBase::forward(const Tensor& x) { return run(x, Tensor(), Tensor(), Tensor()).output; }

RnnOutput RNNBase::forward(const Tensor& x, const Tensor& h0, const Tensor& c0) { return run(x, h0, c0, Tensor()); }

RnnOutput RNNBase::forward_packed(const Tensor& x, const Tensor& lengths, const Tensor& h0, const Tensor& c0) {
  KILN_CHECK(lengths.defined(), type_, ": forward_packed needs the lengths of the sequences");
  return run(x, h0, c0, lengths);
}

std::string RNNBase::repr() const {
  std::ostringstream os;
  os << type_ << "(" << opt_.input_size << ", " << opt_.hidden_size;
  if (opt_.proj_size > 0) os << ", proj_size=" << opt_.proj_size;
  if (opt_.num_layers != 1) os << ", num_layers=" << opt_.num_layers;
  if (mode_ == RnnMode::rnn_relu) os << ", nonlinearity='relu'";
  if (!opt_.bias) os << ", bias=False";
  if (opt_.batch_first) os << ", batch_first=True";
  if (opt_.dropout != 0) os << ", dropout=" << opt_.dropout;
  if (opt_.bidirectional) os << ", bidirectional=True";
  os << ")";
  return os.str();
}

RNN::RNN(const RNNOptions& o)
    : RNNBase(o.nonlinearity == Nonlinearity::relu ? RnnMode::rnn_relu : RnnMode::rnn_tanh, o, "RNN") {}
RNN::RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers)
    : RNN(stacked(input_size, hidden_size, num_layers)) {}

LSTM::LSTM(const RNNOptions& o) : RNNBase(RnnMode::lstm, o, "LSTM") {}
LSTM::LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers)
    : LSTM(stacked(input_size, hidden_size, num_layers)) {}

GRU::GRU(const RNNOptions& o) : RNNBase(RnnMode::gru, o, "GRU") {}
GRU::GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers)
    : GRU(stacked(input_size, hidden_size, num_layers)) {}

RNNCellBase::RNNCellBase(RnnMode mode, int64_t input_size, int64_t hidden_size, bool bias, const char* type)
    : mode_(mode), input_(input_size), hidden_(hidden_size), bias_(bias), type_(type) {
  KILN_CHECK(input_size >= 1 && hidden_size >= 1, type, ": input_size ", input_size, " and hidden_size ",
             hidden_size, " must be positive");
  const int64_t G = rnn_gate_count(mode);
  register_parameter("weight_ih", empty({G * hidden_size, input_size}).requires_grad_(true));
  register_parameter("weight_hh", empty({G * hidden_size, hidden_size}).requires_grad_(true));
  if (bias) {
    register_parameter("bias_ih", empty({G * hidden_size}).requires_grad_(true));
    register_parameter("bias_hh", empty({G * hidden_size}).requires_grad_(true));
  }
  reset_parameters();
}

void RNNCellBase::reset_parameters() { init_uniform(*this, hidden_); }

Tensor RNNCellBase::b(const char* name) { return bias_ ? param(name) : Tensor(); }

std::string RNNCellBase::repr() const {
  std::ostringstream os;
  os << type_ << "(" << input_ << ", " << hidden_;
  if (!bias_) os << ", bias=False";
  if (mode_ == RnnMode::rnn_relu) os << ", nonlinearity='relu'";
  os << ")";
  return os.str();
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, bool bias, Nonlinearity nonlinearity)
    : RNNCellBase(nonlinearity == Nonlinearity::relu ? RnnMode::rnn_relu : RnnMode::rnn_tanh, input_size, hidden_size,
                  bias, cell_name(RnnMode::rnn_tanh)) {}

Tensor RNNCell::forward(const Tensor& x, const Tensor& h) {
  const CallScope scope(*this);
  return mode_ == RnnMode::rnn_relu
             ? ops::rnn_relu_cell(x, h, param("weight_ih"), param("weight_hh"), b("bias_ih"), b("bias_hh"))
             : ops::rnn_tanh_cell(x, h, param("weight_ih"), param("weight_hh"), b("bias_ih"), b("bias_hh"));
}

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, bool bias)
    : RNNCellBase(RnnMode::lstm, input_size, hidden_size, bias, cell_name(RnnMode::lstm)) {}

std::tuple<Tensor, Tensor> LSTMCell::forward(const Tensor& x, const Tensor& h, const Tensor& c) {
  const CallScope scope(*this);
  const std::vector<Tensor> r =
      ops::lstm_cell(x, h, c, param("weight_ih"), param("weight_hh"), b("bias_ih"), b("bias_hh"));
  return {r[0], r[1]};
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, bool bias)
    : RNNCellBase(RnnMode::gru, input_size, hidden_size, bias, cell_name(RnnMode::gru)) {}

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) {
  const CallScope scope(*this);
  return ops::gru_cell(x, h, param("weight_ih"), param("weight_hh"), b("bias_ih"), b("bias_hh"));
}

}  // namespace kiln
