// Recurrent networks (ops::rnn): every gradient (input, h0, c0, each parameter) against finite
// differences in float64 on ref, and native float32 against ref float64 in outputs and
// gradients (native's backward reads the gates its forward saved; oneDNN's its workspace), for each mode, several
// layers, both directions, per-sequence lengths, batch_first, unbatched input, lstm's
// projection, and the cells.
//   ctest --test-dir build -R grad.test_rnn_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/rnn.h"
#include "engine/ops/shape.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::req;

namespace {

struct Config {
  RnnMode mode;
  int64_t layers;
  bool bidirectional, bias, batch_first, lengths;
  int64_t proj;
};

const int64_t L = 4, N = 3, I = 3, H = 4;

Tensor lengths_of(const std::vector<double>& v) {
  return from_vector(v, {int64_t(v.size())}, TensorOptions(DType::int64));
}

// Inputs: x, h0, (c0), the parameters in PyTorch's order; lengths separately.
std::vector<Tensor> make_inputs(const Config& c) {
  const int64_t G = rnn_gate_count(c.mode), D = c.bidirectional ? 2 : 1, Ho = c.proj > 0 ? c.proj : H;
  std::vector<Tensor> in;
  uint64_t seed = 1;
  in.push_back(req(make_input(c.batch_first ? Shape{N, L, I} : Shape{L, N, I}, seed++)));
  in.push_back(req(make_input({D * c.layers, N, Ho}, seed++)));
  if (c.mode == RnnMode::lstm) in.push_back(req(make_input({D * c.layers, N, H}, seed++)));
  for (int64_t l = 0; l < c.layers; ++l)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t in_size = l == 0 ? I : D * Ho;
      in.push_back(req(make_input({G * H, in_size}, seed++, DType::float64, -0.7, 0.7)));
      in.push_back(req(make_input({G * H, Ho}, seed++, DType::float64, -0.7, 0.7)));
      if (c.bias) {
        in.push_back(req(make_input({G * H}, seed++)));
        in.push_back(req(make_input({G * H}, seed++)));
      }
      if (c.proj > 0) in.push_back(req(make_input({c.proj, H}, seed++)));
    }
  return in;
}

test::Fn rnn_fn(const Config& c) {
  return [c](const std::vector<Tensor>& in) {
    ops::RnnOptions o;
    o.mode = c.mode;
    o.num_layers = c.layers;
    o.bias = c.bias;
    o.batch_first = c.batch_first;
    o.bidirectional = c.bidirectional;
    o.proj_size = c.proj;
    const bool lstm = c.mode == RnnMode::lstm;
    const std::vector<Tensor> params(in.begin() + (lstm ? 3 : 2), in.end());
    const Tensor lengths = c.lengths ? lengths_of({3, 4, 1}) : Tensor();
    const ops::RnnOutput r = ops::rnn(in[0], in[1], lstm ? in[2] : Tensor(), params, o, lengths);
    std::vector<Tensor> parts = {r.output.reshape({-1}), r.h_n.reshape({-1})};
    if (lstm) parts.push_back(r.c_n.reshape({-1}));
    return ops::cat(parts, 0);
  };
}

std::string name(const Config& c) {
  return std::string(rnn_mode_name(c.mode)) + " layers " + std::to_string(c.layers) +
         (c.bidirectional ? " bidirectional" : "") + (c.bias ? "" : " nobias") + (c.batch_first ? " batch_first" : "") +
         (c.lengths ? " lengths" : "") + (c.proj ? " proj " + std::to_string(c.proj) : "");
}

}  // namespace

TEST_CASE("rnn: gradients against finite differences and native against ref") {
  std::vector<Config> configs;
  for (RnnMode m : {RnnMode::rnn_tanh, RnnMode::rnn_relu, RnnMode::lstm, RnnMode::gru}) {
    configs.push_back({m, 1, false, true, false, false, 0});
    configs.push_back({m, 2, true, true, true, true, 0});
    configs.push_back({m, 1, true, false, false, true, 0});
  }
  configs.push_back({RnnMode::lstm, 2, true, true, false, true, 2});
  configs.push_back({RnnMode::lstm, 1, false, true, true, false, 3});
  for (const Config& c : configs) {
    CAPTURE(name(c));
    const std::vector<Tensor> in = make_inputs(c);
    CHECK_GRAD(rnn_fn(c), in);
    CHECK_AGAINST_REF(rnn_fn(c), in);
    // oneDNN's primitives where they apply (no lengths, no projection): its backward reads the
    // workspace its training forward kept.
    if (op_table<kernel_op::rnn_fwd>().has("onednn", DeviceType::cpu) && !c.lengths && c.proj == 0) {
      test::RefCompareOptions o;
      o.backend = "onednn,native";
      CHECK_AGAINST_REF(rnn_fn(c), in, o);
    }
  }
}

TEST_CASE("rnn: lengths leave outputs past each end zero and h_n at the last valid step") {
  // One sequence run alone (length 2) equals it inside a padded batch with lengths {2, 4}.
  const Config c{RnnMode::gru, 1, true, true, false, false, 0};
  std::vector<Tensor> in = make_inputs(c);
  NoGradGuard ng;
  ops::RnnOptions o;
  o.mode = RnnMode::gru;
  o.bidirectional = true;
  const std::vector<Tensor> params(in.begin() + 2, in.end());
  const Tensor x = in[0].narrow(1, 0, 2);  // [L, 2, I]
  const Tensor h0 = in[1].narrow(1, 0, 2);
  const ops::RnnOutput batch = ops::rnn(x, h0, Tensor(), params, o, lengths_of({2, 4}));
  const ops::RnnOutput alone = ops::rnn(x.narrow(0, 0, 2).narrow(1, 0, 1), h0.narrow(1, 0, 1), Tensor(), params, o);
  CHECK_CLOSE(batch.output.narrow(0, 0, 2).narrow(1, 0, 1), alone.output, 1e-12, 1e-12);
  CHECK_CLOSE(batch.h_n.narrow(1, 0, 1), alone.h_n, 1e-12, 1e-12);
  CHECK(ops::amax(ops::abs(batch.output.narrow(0, 2, 2).narrow(1, 0, 1))).item() == 0.0);
  // The full-length sequence is what it is without lengths.
  const ops::RnnOutput full = ops::rnn(x.narrow(1, 1, 1), h0.narrow(1, 1, 1), Tensor(), params, o);
  CHECK_CLOSE(batch.output.narrow(1, 1, 1), full.output, 1e-12, 1e-12);
}

TEST_CASE("rnn cells: one step of the layer, with gradients") {
  for (RnnMode m : {RnnMode::rnn_tanh, RnnMode::rnn_relu, RnnMode::lstm, RnnMode::gru}) {
    CAPTURE(rnn_mode_name(m));
    const int64_t G = rnn_gate_count(m);
    std::vector<Tensor> in = {req(make_input({N, I}, 1)), req(make_input({N, H}, 2)), req(make_input({N, H}, 3)),
                              req(make_input({G * H, I}, 4)), req(make_input({G * H, H}, 5)),
                              req(make_input({G * H}, 6)), req(make_input({G * H}, 7))};
    const test::Fn f = [m](const std::vector<Tensor>& v) {
      switch (m) {
        case RnnMode::rnn_tanh: return ops::rnn_tanh_cell(v[0], v[1], v[3], v[4], v[5], v[6]);
        case RnnMode::rnn_relu: return ops::rnn_relu_cell(v[0], v[1], v[3], v[4], v[5], v[6]);
        case RnnMode::gru: return ops::gru_cell(v[0], v[1], v[3], v[4], v[5], v[6]);
        case RnnMode::lstm: break;
      }
      const std::vector<Tensor> hc = ops::lstm_cell(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
      return ops::cat({hc[0], hc[1]}, 0);
    };
    CHECK_GRAD(f, in);
    CHECK_AGAINST_REF(f, in);
    // Unbatched: [I] and [H].
    NoGradGuard ng;
    const Tensor one = f({in[0].select(0, 1), in[1].select(0, 1), in[2].select(0, 1), in[3], in[4], in[5], in[6]});
    const Tensor all = f(in);
    CHECK_CLOSE(one, m == RnnMode::lstm ? ops::cat({all.select(0, 1), all.select(0, N + 1)}, 0) : all.select(0, 1),
                1e-12, 1e-12);
  }
}

TEST_CASE("rnn: bad arguments are errors that name them") {
  const Config c{RnnMode::lstm, 1, false, true, false, false, 0};
  std::vector<Tensor> in = make_inputs(c);
  const std::vector<Tensor> params(in.begin() + 3, in.end());
  ops::RnnOptions o;
  CHECK_THROWS_KILN(ops::rnn(in[0], in[1], in[2], {params[0], params[1]}, o), "2 parameters, expected 4");
  CHECK_THROWS_KILN(ops::rnn(in[0].narrow(2, 0, 2), in[1], in[2], params, o), "weight_ih_l0 has shape [16, 3]");
  CHECK_THROWS_KILN(ops::rnn(in[0], in[1].narrow(1, 0, 2), in[2], params, o), "h0 has shape");
  CHECK_THROWS_KILN(ops::rnn(in[0], in[1], in[2], params, o, lengths_of({1, 5, 2})),
                    "lengths[1] = 5 is outside [1, 4]");
  CHECK_THROWS_KILN(ops::rnn(in[0], in[1], in[2], params, o, lengths_of({1, 2})), "lengths has shape");
  CHECK_THROWS_KILN(ops::rnn(in[0], in[1], in[2], params, o, lengths_of({0, 1, 2})),
                    "lengths[0] = 0");
  CHECK_THROWS_KILN(ops::rnn(in[0].to(DType::float32), in[1], in[2], params, o), "is float64, the input float32");
  o.proj_size = 9;
  std::vector<Tensor> with_proj = params;
  with_proj.push_back(params[0]);
  CHECK_THROWS_KILN(ops::rnn(in[0], in[1], in[2], with_proj, o), "proj_size 9 must be smaller than hidden_size 4");
  o.proj_size = 0;
  o.mode = RnnMode::gru;
  CHECK_THROWS_KILN(ops::rnn(in[0], in[1], in[2], params, o), "weight_ih_l0 has shape [16, 3], expected [3 * hidden_size");
}
