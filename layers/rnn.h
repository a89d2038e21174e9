// Recurrent layers as torch.nn's: RNN (tanh or relu), LSTM (with proj_size) and GRU over stacked,
// optionally bidirectional layers, and the single-step cells RNNCell, LSTMCell and GRUCell. Same
// options, equations and gate order (LSTM i f g o; GRU r z n, the reset gate applied to
// W_hn h + b_hn), the same parameter names and shapes in the same order (weight_ih_l{k},
// weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, weight_hr_l{k}, with _reverse), so a PyTorch
// state_dict saved as safetensors loads with load_state_dict, and PyTorch's initialisation
// (every parameter uniform in +-1/sqrt(hidden_size)). The computation is ops::rnn
// (engine/ops/rnn.h).
//
//   RNNOptions o(8, 32);  o.num_layers = 2;  o.batch_first = true;
//   LSTM lstm(o);                                                 // or LSTM lstm(8, 32, 2)
//   Tensor y = lstm.forward(x);                                   // the output sequence only
//   RnnOutput r = lstm.forward(x, h0, c0);                        // r.output, r.h_n, r.c_n
//   RnnOutput p = lstm.forward_packed(x, lengths);                // variable-length batch
//   ctest --test-dir build -R rnn
#pragma once

#include <tuple>

#include "engine/ops/rnn.h"
#include "layers/module.h"

namespace kiln {

using ops::RnnOutput;

enum class Nonlinearity : uint8_t { tanh, relu };

// torch.nn.RNN / LSTM / GRU's constructor arguments, as fields (kiln's options are plain structs).
struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size) : input_size(input_size), hidden_size(hidden_size) {}
  int64_t input_size, hidden_size;
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // after every layer but the last, while training
  bool bidirectional = false;
  int64_t proj_size = 0;                       // LSTM only
  Nonlinearity nonlinearity = Nonlinearity::tanh;  // RNN only
};
using LSTMOptions = RNNOptions;
using GRUOptions = RNNOptions;

// What RNN, LSTM and GRU share: the parameters, their order and initialisation, forward.
class RNNBase : public Module {
 public:
  // The output sequence alone ([L, N, D * H_out]; [N, L, ...] batch_first): a recurrent layer in a
  // Sequential. h0 (and c0) zeros.
  Tensor forward(const Tensor& x) override;
  // Output and final states; h0 [D * num_layers, N, H_out] and c0 (LSTM) [D * num_layers, N, H]
  // may be undefined (zeros).
  RnnOutput forward(const Tensor& x, const Tensor& h0, const Tensor& c0 = Tensor());
  // A batch of sequences of different lengths (padded to L): lengths [N] int64 in [1, L], any
  // order. Outputs past each sequence's end are zero; h_n / c_n are each sequence's state after its
  // last valid step (PyTorch's pack_padded_sequence(enforce_sorted=False) through the layer and
  // pad_packed_sequence(total_length=L) back).
  RnnOutput forward_packed(const Tensor& x, const Tensor& lengths, const Tensor& h0 = Tensor(),
                           const Tensor& c0 = Tensor());
  std::string repr() const override;
  // Re-draws every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
  void reset_parameters();

  const RNNOptions& options() const { return opt_; }
  RnnMode mode() const { return mode_; }
  // The parameters in PyTorch's order (its _flat_weights): per layer, per direction,
  // weight_ih, weight_hh, bias_ih, bias_hh, weight_hr.
  std::vector<Tensor> flat_weights();
  std::vector<std::string> flat_weight_names() const;

 protected:
  RNNBase(RnnMode mode, const RNNOptions& o, const char* type);

 private:
  RnnOutput run(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& lengths);
  RnnMode mode_;
  RNNOptions opt_;
  const char* type_;
};

class RNN : public RNNBase {
 public:
  explicit RNN(const RNNOptions& o);
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1);
  using RNNBase::forward;
};

class LSTM : public RNNBase {
 public:
  explicit LSTM(const RNNOptions& o);
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1);
  using RNNBase::forward;
};

class GRU : public RNNBase {
 public:
  explicit GRU(const RNNOptions& o);
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1);
  using RNNBase::forward;
};

// One step (torch.nn.RNNCell / LSTMCell / GRUCell): x [N, I] or [I]; h, c [N, H] or [H], undefined:
// zeros. Parameters weight_ih [G * H, I], weight_hh [G * H, H], bias_ih, bias_hh [G * H].
class RNNCellBase : public Module {
 public:
  std::string repr() const override;
  void reset_parameters();
  int64_t input_size() const { return input_; }
  int64_t hidden_size() const { return hidden_; }

 protected:
  RNNCellBase(RnnMode mode, int64_t input_size, int64_t hidden_size, bool bias, const char* type);
  Tensor b(const char* name);
  RnnMode mode_;
  int64_t input_, hidden_;
  bool bias_;
  const char* type_;
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, Nonlinearity nonlinearity = Nonlinearity::tanh);
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()); }
  Tensor forward(const Tensor& x, const Tensor& h);
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& x) override { return std::get<0>(forward(x, Tensor(), Tensor())); }
  std::tuple<Tensor, Tensor> forward(const Tensor& x, const Tensor& h, const Tensor& c);  // {h', c'}
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()); }
  Tensor forward(const Tensor& x, const Tensor& h);
};

}  // namespace kiln
