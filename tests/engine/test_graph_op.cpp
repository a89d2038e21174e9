// Graph ops (engine/graph_ops.inc, engine/graph_op.h): the table, call()'s tracing and its
// float32 routing of half types, and call_multi()'s (the recurrent ops, one event of three outputs).
//   ctest --test-dir build -R graph_op
#include "tests/support/testing.h"

#include <cstring>
#include <string>
#include <vector>

#include "engine/graph_op.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/pool.h"
#include "engine/ops/rnn.h"
#include "engine/ops/softmax.h"
#include "engine/trace.h"

using namespace kiln;

namespace {

struct Sink : trace::Recorder {
  std::vector<trace::Event> events;
  void record(trace::Event e) override { events.push_back(std::move(e)); }
};

Tensor ramp(Shape s, DType dt = DType::float32) {
  const int64_t n = shape_numel(s);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = 0.25 * double(i % 7) - 0.6;
  return from_vector(v, s, dt);
}

}  // namespace

TEST_CASE("graph ops: every entry has a name that maps back to it, kernels and a known half policy") {
  CHECK(graph::kCount >= 30);
  for (int i = 0; i < graph::kCount; ++i) {
    const graph::OpInfo& op = graph::info(GraphOp(i));
    CAPTURE(op.name);
    CHECK(graph::from_name(op.name) == GraphOp(i));
    CHECK(!op.kernels.empty());
    CHECK(op.opset >= 1);
    CHECK(op.opset <= 13);
  }
  CHECK(std::strcmp(graph::info(GraphOp::conv2d).onnx, "Conv") == 0);
  CHECK(graph::info(GraphOp::conv2d).kernels.size() == 3);
  CHECK(std::strcmp(graph::info(GraphOp::conv2d).kernels[0], "conv2d_fwd") == 0);
  CHECK_THROWS_WITH_AS(graph::from_name("conv3d"), doctest::Contains("no graph op 'conv3d'"), Error);
}

TEST_CASE("graph ops: a trace records the outermost op once, with its declared attributes") {
  Sink sink;
  const Tensor x = ramp({1, 2, 5, 5}), w = ramp({3, 2, 3, 3});
  Tensor y;
  {
    trace::Scope scope(&sink);
    y = ops::softmax(ops::conv2d_relu(x, w, Tensor(), {1, 1}, {1, 1}, {1, 1}, 1), 1);
  }
  REQUIRE(sink.events.size() == 2);  // conv2d_relu's own relu and reshapes are not recorded
  CHECK(sink.events[0].op == GraphOp::conv2d_relu);
  CHECK(sink.events[1].op == GraphOp::softmax);
  CHECK(sink.events[1].output.is_same(y));
  REQUIRE(sink.events[0].attrs.size() == 4);
  CHECK(sink.events[0].attrs[3].name == "groups");
  CHECK(sink.events[0].attrs[3].ints == std::vector<int64_t>{1});
}

TEST_CASE("graph ops: a traced attribute graph_ops.inc does not declare is an error") {
  Sink sink;
  trace::Scope scope(&sink);
  const Tensor x = ramp({4});
  auto bogus = [] { return std::vector<trace::Attr>{trace::ints("bogus", {1})}; };
  CHECK_THROWS_WITH_AS(graph::call(GraphOp::relu, {x}, bogus, [](const Tensor* in) { return ops::relu(in[0]); }),
                       doctest::Contains("records attribute 'bogus'"), Error);
}

TEST_CASE("graph ops: Half::float32 runs half inputs on float32 copies and casts the output back") {
  for (DType dt : {DType::bfloat16, DType::float16}) {
    CAPTURE(dt);
    const Tensor x = ramp({2, 3, 4, 4}, dt);
    DType seen = DType::float64;
    const Tensor y = graph::call(GraphOp::max_pool2d, {x}, graph::no_attrs, [&](const Tensor* in) {
      seen = in[0].dtype();
      return ops::max_pool2d(in[0], {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
    });
    CHECK(seen == DType::float32);
    CHECK(y.dtype() == dt);
    // the same values as the float32 op, rounded once to the half type
    const Tensor want = ops::max_pool2d(x.to(DType::float32), {2, 2}, {2, 2}, {0, 0}, {1, 1}, false).to(dt);
    CHECK(y.to_vector() == want.to_vector());
  }
  // float32 inputs reach the body as they are
  const Tensor x = ramp({3});
  const Tensor y = graph::call(GraphOp::softmax, {x}, graph::no_attrs, [&](const Tensor* in) {
    CHECK(in[0].is_same(x));
    return ops::softmax(in[0], 0);
  });
  CHECK(y.dtype() == DType::float32);
}

TEST_CASE("graph ops: Half::kernel falls back to float32 only for half inputs") {
  const Tensor h = ramp({5}, DType::bfloat16);
  int calls = 0;
  const Tensor y = graph::call(GraphOp::linear, {h}, graph::no_attrs, [&](const Tensor* in) {
    ++calls;
    return in[0].dtype() == DType::bfloat16 ? graph::float32_fallback() : ops::relu(in[0]);
  });
  CHECK(calls == 2);
  CHECK(y.dtype() == DType::bfloat16);
  CHECK(y.to_vector() == ops::relu(h.to(DType::float32)).to(DType::bfloat16).to_vector());
  // A float32 input has nothing to fall back to.
  const Tensor f = ramp({5});
  CHECK_THROWS_WITH_AS(graph::call(GraphOp::linear, {f}, graph::no_attrs,
                                   [](const Tensor*) { return graph::float32_fallback(); }),
                       doctest::Contains("returned no tensor"), Error);
  // Nor has a Half::float32 op.
  CHECK_THROWS_WITH_AS(graph::call(GraphOp::softmax, {h}, graph::no_attrs,
                                   [](const Tensor*) { return graph::float32_fallback(); }),
                       doctest::Contains("returned no tensor"), Error);
}

TEST_CASE("graph ops: call_multi traces one event with every output and casts each back from float32") {
  // Two stacked LSTM layers: one lstm event for the whole call (its cats, stacks and transposes
  // are not recorded), with output, h_n and c_n, and the options as attributes.
  const int64_t T = 3, N = 2, I = 4, H = 5;
  std::vector<Tensor> params;
  for (int64_t l = 0; l < 2; ++l) {
    params.push_back(ramp({4 * H, l ? H : I}));
    params.push_back(ramp({4 * H, H}));
    params.push_back(ramp({4 * H}));
    params.push_back(ramp({4 * H}));
  }
  ops::RnnOptions o;
  o.num_layers = 2;
  o.batch_first = true;
  Sink sink;
  ops::RnnOutput r;
  {
    trace::Scope scope(&sink);
    r = ops::rnn(ramp({N, T, I}), Tensor(), Tensor(), params, o);
  }
  REQUIRE(sink.events.size() == 1);
  const trace::Event& e = sink.events[0];
  CHECK(e.op == GraphOp::lstm);
  CHECK(std::strcmp(graph::info(e.op).onnx, "LSTM") == 0);
  REQUIRE(e.outputs.size() == 3);
  CHECK(e.output.is_same(r.output));
  CHECK(e.outputs[0].is_same(r.output));
  CHECK(e.outputs[1].is_same(r.h_n));
  CHECK(e.outputs[2].is_same(r.c_n));
  CHECK(e.inputs.size() == 4 + params.size());  // input, h0, c0, lengths, then the parameters
  CHECK(!e.inputs[1].defined());
  bool layers = false;
  for (const trace::Attr& a : e.attrs) layers |= a.name == "num_layers" && a.ints == std::vector<int64_t>{2};
  CHECK(layers);
  // A GRU's third output is undefined; half inputs run in float32 and every output comes back half.
  ops::RnnOptions g;
  g.mode = RnnMode::gru;
  const std::vector<Tensor> gp = {ramp({3 * H, I}), ramp({3 * H, H})};
  g.bias = false;
  for (DType dt : {DType::float16, DType::bfloat16}) {
    CAPTURE(dt);
    Sink half_sink;
    ops::RnnOutput h;
    {
      trace::Scope scope(&half_sink);
      h = ops::rnn(ramp({T, N, I}, dt), ramp({1, N, H}, dt), Tensor(), gp, g);
    }
    CHECK(h.output.dtype() == dt);
    CHECK(h.h_n.dtype() == dt);
    CHECK(!h.c_n.defined());
    REQUIRE(half_sink.events.size() == 1);
    CHECK(half_sink.events[0].op == GraphOp::gru);
    CHECK(!half_sink.events[0].outputs[2].defined());
    const ops::RnnOutput f = ops::rnn(ramp({T, N, I}, dt).to(DType::float32), ramp({1, N, H}, dt).to(DType::float32),
                                      Tensor(), gp, g);
    CHECK(h.h_n.to_vector() == f.h_n.to(dt).to_vector());
  }
}
