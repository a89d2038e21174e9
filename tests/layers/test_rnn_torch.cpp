// kiln's RNN, LSTM and GRU against PyTorch's nn.RNN / nn.LSTM / nn.GRU with the same weights:
// tests/layers/torch_rnn.py draws a net and its inputs, runs forward and backward and saves
// state_dict, inputs, outputs and every gradient as safetensors; kiln loads the state_dict with
// load_state_dict, runs the same loss and compares outputs, h_n / c_n, the loss and the gradients
// of the input, h0 / c0 and every parameter. float64 (ref) to 1e-10 and float32 (native) to 1e-5;
// batch_first, bidirectional, 3 layers, proj_size, variable lengths (pack_padded_sequence).
// Needs the test venv's torch and safetensors (Skipped without them, failed under CI=true).
//   ctest --test-dir build -R layers.test_rnn_torch
#include "tests/support/testing.h"

#include <map>
#include <sstream>

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "io/formats/safetensors.h"
#include "layers/rnn.h"

using namespace kiln;

namespace {

struct Spec {
  const char* mode;
  int64_t layers;
  bool bidirectional, batch_first, lengths, bias;
  int64_t proj;
  const char* dtype;
};

std::string json(const Spec& s, uint64_t seed) {
  std::ostringstream os;
  os << "{\"mode\": \"" << s.mode << "\", \"layers\": " << s.layers << ", \"bidirectional\": "
     << (s.bidirectional ? "true" : "false") << ", \"batch_first\": " << (s.batch_first ? "true" : "false")
     << ", \"lengths\": " << (s.lengths ? "true" : "false") << ", \"bias\": " << (s.bias ? "true" : "false")
     << ", \"proj\": " << s.proj << ", \"dtype\": \"" << s.dtype << "\", \"seed\": " << seed
     << ", \"L\": 5, \"N\": 4, \"I\": 3, \"H\": 6}";
  return os.str();
}

std::map<std::string, Tensor> as_map(const NamedTensors& v) {
  std::map<std::string, Tensor> m;
  for (const auto& [k, t] : v) m[k] = t;
  return m;
}

std::shared_ptr<RNNBase> make_net(const Spec& s) {
  RNNOptions o(3, 6);
  o.num_layers = s.layers;
  o.bidirectional = s.bidirectional;
  o.batch_first = s.batch_first;
  o.bias = s.bias;
  o.proj_size = s.proj;
  const std::string mode = s.mode;
  if (mode == "lstm") return std::make_shared<LSTM>(o);
  if (mode == "gru") return std::make_shared<GRU>(o);
  o.nonlinearity = mode == "rnn_relu" ? Nonlinearity::relu : Nonlinearity::tanh;
  return std::make_shared<RNN>(o);
}

void check_spec(const Spec& s, uint64_t seed) {
  test::TempDir dir("rnn_torch");
  const std::string script = std::string(KILN_SOURCE_DIR) + "/tests/layers/torch_rnn.py";
  int rc = 0;
  const std::string log = test::run_capture(test::shell_quote(test::python()) + " " + test::shell_quote(script) + " " +
                                                test::shell_quote(dir.path.string()) + " " +
                                                test::shell_quote(json(s, seed)) + " 2>&1",
                                            &rc);
  REQUIRE_MESSAGE(rc == 0, log);
  auto in = as_map(load_safetensors(dir / "inputs.safetensors"));
  auto want = as_map(load_safetensors(dir / "expected.safetensors"));
  const bool lstm = std::string(s.mode) == "lstm";
  const double tol = std::string(s.dtype) == "float64" ? 1e-10 : 1e-5;

  std::shared_ptr<RNNBase> net = make_net(s);
  const DType dt = in["x"].dtype();
  net->to(dt);
  NamedTensors sd;
  for (const std::string& n : net->flat_weight_names()) {
    REQUIRE_MESSAGE(in.count(n), "PyTorch's state_dict has no " << n);
    sd.push_back({n, in[n]});
  }
  net->load_state_dict(sd);  // strict: the same names both ways
  Tensor x = in["x"].clone().requires_grad_(true), h0 = in["h0"].clone().requires_grad_(true);
  Tensor c0 = lstm ? in["c0"].clone().requires_grad_(true) : Tensor();
  const RnnOutput r = s.lengths ? net->forward_packed(x, in["lengths"], h0, c0) : net->forward(x, h0, c0);
  Tensor loss = ops::sum(r.output * in["wy"]) + ops::sum(r.h_n * in["wh"]);
  if (lstm) loss = loss + ops::sum(r.c_n * in["wc"]);
  loss.backward();

  CHECK_CLOSE(r.output, want["output"], tol, tol);
  CHECK_CLOSE(r.h_n, want["h_n"], tol, tol);
  if (lstm) CHECK_CLOSE(r.c_n, want["c_n"], tol, tol);
  CHECK_CLOSE(loss.reshape({1}), want["loss"], tol, tol);
  CHECK_CLOSE(x.grad(), want["grad.x"], tol, tol);
  CHECK_CLOSE(h0.grad(), want["grad.h0"], tol, tol);
  if (lstm) CHECK_CLOSE(c0.grad(), want["grad.c0"], tol, tol);
  for (auto& named : net->named_parameters()) {
    const std::string& name = named.first;  // a structured binding cannot be captured in C++17
    const Tensor& p = named.second;
    CAPTURE(name);
    REQUIRE(want.count("grad." + name));
    CHECK_CLOSE(p.grad(), want["grad." + name], tol, tol);
  }
}

}  // namespace

TEST_CASE("RNN, LSTM and GRU match PyTorch in outputs, states, loss and every gradient") {
  if (!test::need_python("torch, safetensors.torch")) return;
  const Spec specs[] = {
      {"lstm", 1, false, false, false, true, 0, "float64"},
      {"lstm", 3, true, true, true, true, 0, "float64"},
      {"lstm", 2, true, false, true, true, 2, "float64"},
      {"lstm", 2, false, true, false, false, 3, "float32"},
      {"lstm", 3, true, true, true, true, 0, "float32"},
      {"gru", 1, false, false, false, true, 0, "float64"},
      {"gru", 3, true, true, true, true, 0, "float64"},
      {"gru", 2, true, false, true, false, 0, "float32"},
      {"rnn_tanh", 3, true, true, true, true, 0, "float64"},
      {"rnn_relu", 2, true, false, true, true, 0, "float64"},
      {"rnn_tanh", 2, false, true, false, true, 0, "float32"},
  };
  uint64_t seed = 1;
  for (const Spec& s : specs) {
    CAPTURE(json(s, seed));
    check_spec(s, seed++);
  }
}
