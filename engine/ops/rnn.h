// Recurrent networks, differentiable, with PyTorch's semantics: torch.lstm / gru / rnn_tanh /
// rnn_relu over stacked layers and both directions, and the single-step cells. Each layer and
// direction is one kernel op (kernel_op::rnn_fwd / rnn_bwd, kernels/common/rnn.h) with its own
// autograd node; the layers are stacked here, with dropout between them while training.
// float32 and float64 (ref); float16 / bfloat16 inputs compute in float32 and return their dtype.
// A call is one graph op (engine/graph_ops.inc: lstm, gru, rnn_tanh, rnn_relu), traced whole for the
// ONNX export.
//   ctest --test-dir build -R rnn
#pragma once

#include <vector>

#include "engine/tensor.h"
#include "kernels/common/rnn.h"

namespace kiln::ops {

struct RnnOptions {
  RnnMode mode = RnnMode::lstm;
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // on the output of every layer but the last, while training
  bool training = false;
  bool bidirectional = false;
  // One direction run from the last step to the first (ONNX's direction = "reverse", which the
  // ONNX importer maps here; PyTorch has no such layer): the parameters are one direction's, as
  // without it. Not with bidirectional.
  bool reverse = false;
  int64_t proj_size = 0;  // lstm only
};

struct RnnOutput {
  Tensor output;  // [L, N, D * H_out] ([N, L, ...] batch_first; [L, D * H_out] unbatched)
  Tensor h_n;     // [D * num_layers, N, H_out] ([D * num_layers, H_out] unbatched)
  Tensor c_n;     // lstm: [D * num_layers, N, H] (undefined otherwise)
};

// input [L, N, I] ([N, L, I] batch_first, [L, I] unbatched); h0 [D * num_layers, N, H_out] and
// c0 [D * num_layers, N, H] (lstm) or undefined (zeros); params in PyTorch's order (its
// _flat_weights): per layer, per direction (forward, then reverse), w_ih, w_hh, then b_ih, b_hh
// when o.bias, then w_hr when o.proj_size > 0. lengths (optional) [N] int64 in [1, L]: the valid
// steps of each sequence, PyTorch's packed-sequence meaning (any order; outputs past a sequence's
// end are zero and h_n / c_n hold its state at its last valid step, in both directions).
// Shapes, dtypes, devices and lengths are checked: a kiln::Error names the argument.
RnnOutput rnn(const Tensor& input, const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& params,
              const RnnOptions& o, const Tensor& lengths = Tensor());

// One step: x [N, I] or [I], h / c [N, H] or [H] (undefined: zeros), weights as one layer's.
Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
// Returns {h', c'}.
std::vector<Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih,
                              const Tensor& w_hh, const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih = Tensor(),
                const Tensor& b_hh = Tensor());

}  // namespace kiln::ops
