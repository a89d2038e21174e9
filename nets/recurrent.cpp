// Registers the recurrent nets of the zoo. Their input is a sequence [L, features] per sample
// (the batch goes first: [N, L, features], batch_first), where the convnets' is [C, H, W].
//  - lstm-forecast, gru-forecast: the DEEP Hybrid DataCloud intrusion-detection forecaster
//    (network-traffic time series in sliding windows of 6 hourly steps, Keras): one recurrent
//    layer over the window, its last step to a linear layer, one output per predicted column;
//    regression (MSE or MAE). Options: in_channels = input columns (3), classes = predicted
//    columns (3), width = hidden size (64), depth = recurrent layers (1).
//  - lstm-h1024-t25, lstm-h1536-t50, gru-h512-t1500, gru-h2816-t375: one recurrent layer at
//    DeepBench's sizes (input = hidden), the output sequence as the net's output; timed by kiln
//    bench at DeepBench's batches (128 training for the LSTM, 4 inference for the h1536 LSTM,
//    32 for the GRUs).
//   ctest --test-dir build -R nets.test_recurrent     build/tools/kiln bench --model lstm-h1024-t25 --batch 128
#include "layers/linear.h"
#include "layers/rnn.h"
#include "nets/zoo.h"

namespace kiln::nets {
namespace {

// An LSTM or GRU over a window, its last step to a linear layer: [N, L, F] -> [N, outputs].
class Forecaster : public Module {
 public:
  Forecaster(RnnMode mode, int64_t features, int64_t hidden, int64_t layers, int64_t outputs) {
    RNNOptions o(features, hidden);
    o.num_layers = layers;
    o.batch_first = true;
    if (mode == RnnMode::lstm)
      rnn_ = register_module("rnn", std::static_pointer_cast<RNNBase>(std::make_shared<LSTM>(o)));
    else
      rnn_ = register_module("rnn", std::static_pointer_cast<RNNBase>(std::make_shared<GRU>(o)));
    fc_ = register_module("fc", std::make_shared<Linear>(hidden, outputs));
  }
  Tensor forward(const Tensor& x) override {
    const CallScope scope(*this);
    KILN_CHECK(x.dim() == 3, "forecaster: input ", shape_str(x.sizes()), " must be [N, L, features]");
    const Tensor seq = (*rnn_)(x);                     // [N, L, H]
    return (*fc_)(seq.select(1, seq.size(1) - 1));     // the last step
  }
  std::string repr() const override { return "Forecaster"; }

 private:
  std::shared_ptr<RNNBase> rnn_;
  std::shared_ptr<Linear> fc_;
};

void check_unused(const std::string& net, const NetOptions& o, bool sizes) {
  KILN_CHECK(o.image_size == 0, net, ": option image_size does not apply to a sequence net");
  KILN_CHECK(!o.lrn && !o.aux, net, ": options lrn and aux do not apply to a sequence net");
  KILN_CHECK(o.in_channels >= 0 && o.classes >= 0 && o.width >= 0 && o.depth >= 0, net, ": sizes must be positive");
  if (!sizes)
    KILN_CHECK(o.in_channels == 0 && o.classes == 0 && o.width == 0 && o.depth == 0, net,
               ": a DeepBench shape takes no size options (its name fixes them)");
}

ModulePtr forecaster(RnnMode mode, const char* name, const NetOptions& o) {
  check_unused(name, o, true);
  return std::make_shared<Forecaster>(mode, o.in_channels ? o.in_channels : 3, o.width ? o.width : 64,
                                      o.depth ? o.depth : 1, o.classes ? o.classes : 3);
}

// One batch-first layer whose output sequence is the net's output.
ModulePtr single_layer(RnnMode mode, const char* name, int64_t hidden, const NetOptions& o) {
  check_unused(name, o, false);
  RNNOptions r(hidden, hidden);
  r.batch_first = true;
  if (mode == RnnMode::lstm) return std::make_shared<LSTM>(r);
  return std::make_shared<GRU>(r);
}

// Parameters of one layer: G * H * (I + H) weights and 2 * G * H biases.
constexpr int64_t layer_params(int64_t gates, int64_t in, int64_t hidden) {
  return gates * hidden * (in + hidden) + 2 * gates * hidden;
}

}  // namespace

void register_recurrent_nets(std::vector<NetInfo>& zoo) {
  zoo.push_back({"lstm-forecast",
                 "DEEP intrusion-detection forecaster: LSTM(3, 64) over 6 hourly steps, the last step to Linear(64, 3)",
                 {6, 3}, 3, layer_params(4, 3, 64) + 64 * 3 + 3,
                 [](const NetOptions& o) { return forecaster(RnnMode::lstm, "lstm-forecast", o); }});
  zoo.push_back({"gru-forecast",
                 "DEEP intrusion-detection forecaster: GRU(3, 64) over 6 hourly steps, the last step to Linear(64, 3)",
                 {6, 3}, 3, layer_params(3, 3, 64) + 64 * 3 + 3,
                 [](const NetOptions& o) { return forecaster(RnnMode::gru, "gru-forecast", o); }});
  zoo.push_back({"lstm-h1024-t25", "DeepBench LSTM training shape: hidden 1024, 25 steps (batch 128)", {25, 1024},
                 1024, layer_params(4, 1024, 1024),
                 [](const NetOptions& o) { return single_layer(RnnMode::lstm, "lstm-h1024-t25", 1024, o); }});
  zoo.push_back({"lstm-h1536-t50", "DeepBench LSTM inference shape: hidden 1536, 50 steps (batch 4)", {50, 1536},
                 1536, layer_params(4, 1536, 1536),
                 [](const NetOptions& o) { return single_layer(RnnMode::lstm, "lstm-h1536-t50", 1536, o); }});
  zoo.push_back({"gru-h512-t1500", "DeepBench GRU training shape: hidden 512, 1500 steps (batch 32)", {1500, 512},
                 512, layer_params(3, 512, 512),
                 [](const NetOptions& o) { return single_layer(RnnMode::gru, "gru-h512-t1500", 512, o); }});
  zoo.push_back({"gru-h2816-t375", "DeepBench GRU training shape: hidden 2816, 375 steps (batch 32)", {375, 2816},
                 2816, layer_params(3, 2816, 2816),
                 [](const NetOptions& o) { return single_layer(RnnMode::gru, "gru-h2816-t375", 2816, o); }});
}

}  // namespace kiln::nets
