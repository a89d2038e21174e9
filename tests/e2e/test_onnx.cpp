// ONNX export and import in kiln alone: zoo nets (with non-trivial batch-norm statistics; the
// inception ones in test_onnx_runtime.cpp) exported by kiln and imported back with the same
// eval-mode outputs; a CNN exported by PyTorch
// (the committed fixture of tests/fixtures/make_torch_cnn_onnx.py) imported with PyTorch's output;
// the protobuf wire format and the importer's errors. onnx.checker and onnxruntime on kiln's
// exports: test_onnx_runtime.cpp.
//   ctest --test-dir build -R e2e.test_onnx
#include "tests/support/testing.h"

#include <algorithm>
#include <cmath>

#include "engine/ops/elementwise.h"
#include "io/formats/protobuf.h"
#include "io/onnx/onnx.h"
#include "nets/zoo.h"
#include "tests/e2e/onnx_testing.h"

using namespace kiln;
namespace fs = std::filesystem;

using namespace kiln::onnx_test;

TEST_CASE("protobuf: varints, fixed32, packed and unpacked repeated fields round-trip") {
  pb::Writer w;
  w.varint(1, 0);
  w.varint(2, 300);
  w.int64(3, -5);  // ten bytes on the wire
  w.float32(4, 1.5f);
  w.packed_int64(5, {1, 128, 1ll << 40});
  w.int64(5, 7);  // the same field unpacked: readers must take both
  w.string(6, "kiln");
  const std::string& d = w.data();
  pb::Reader r(reinterpret_cast<const uint8_t*>(d.data()), d.size(), "test");
  pb::Field f;
  std::vector<int64_t> ints;
  int seen = 0;
  while (r.next(f)) {
    ++seen;
    if (f.number == 1) CHECK(f.value == 0);
    if (f.number == 2) CHECK(f.value == 300);
    if (f.number == 3) CHECK(int64_t(f.value) == -5);
    if (f.number == 4) CHECK(f.as_float() == 1.5f);
    if (f.number == 5) pb::append_int64s(f, ints, "test");
    if (f.number == 6) CHECK(f.str() == "kiln");
  }
  CHECK(seen == 7);
  CHECK(ints == std::vector<int64_t>{1, 128, 1ll << 40, 7});
  const std::string cut = d.substr(0, d.size() - 2);
  pb::Reader bad(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), "cut message");
  CHECK_THROWS_KILN(
      {
        while (bad.next(f)) {
        }
      },
      "cut message");
}

TEST_CASE("onnx: a model encodes and decodes to the same graph; the importer names unsupported ops") {
  onnx::Model m;
  m.graph.name = "g";
  onnx::Node n;
  n.name = "n0";
  n.op_type = "HardSwish";
  n.inputs = {"input"};
  n.outputs = {"output"};
  n.attrs.push_back(onnx::Attribute{"alpha", onnx::kAttrFloat, 0.25f, 0, "", {}, {}, {}});
  n.attrs.push_back(onnx::Attribute{"pads", onnx::kAttrInts, 0, 0, "", {}, {1, 2, 1, 2}, {}});
  m.graph.nodes.push_back(n);
  onnx::TensorData t;
  t.name = "w";
  t.dims = {2, 2};
  t.f = {1, 2, 3, 4};
  m.graph.initializers.push_back(t);
  m.graph.inputs.push_back(onnx::ValueInfo{"input", onnx::kFloat, {-1, 3}, {"N", ""}});
  m.graph.outputs.push_back(onnx::ValueInfo{"output", onnx::kFloat, {-1, 3}, {"N", ""}});
  onnx::Model back = onnx::decode(onnx::encode(m));
  CHECK(back.opset == onnx::kOpset);
  REQUIRE(back.graph.nodes.size() == 1);
  CHECK(back.graph.nodes[0].op_type == "HardSwish");
  CHECK(back.graph.nodes[0].attr("alpha")->f == 0.25f);
  CHECK(back.graph.nodes[0].attr("pads")->ints == std::vector<int64_t>{1, 2, 1, 2});
  CHECK(back.graph.initializers[0].f == t.f);
  CHECK(back.graph.inputs[0].dim_params[0] == "N");
  CHECK(onnx::input_shape(back, 5) == Shape{5, 3});
  CHECK_THROWS_KILN(onnx::import_model(back), "unsupported op HardSwish node 'n0'");
  CHECK_THROWS_KILN(onnx::decode(std::string("\x3a\x05xy", 4)), "claims 5 bytes");
}

TEST_CASE("onnx: zoo nets exported by kiln import back into kiln with the same outputs") {
  test::TempDir dir("onnx");
  for (const Case& c : zoo_cases()) {
    // The two inception nets (9 s each to export on 2 cores) take this round trip in
    // test_onnx_runtime.cpp, beside onnxruntime, which CI runs.
    if (c.name == "googlenet" || c.name == "inception3") continue;
    CAPTURE(c.name);
    ModulePtr net = eval_net(c);
    const Tensor x = input_for(c.input);
    const std::vector<float> want = forward(*net, x);
    const double scale = std::max(1.0, max_abs(want));
    const std::string path = (dir.path / (c.name + ".onnx")).string();
    Shape traced = c.input;  // traced at batch 1, run at the case's batch: the batch dim stays free
    traced[0] = 1;
    onnx::save(onnx::export_module(*net, traced), path);
    CHECK(net->is_training() == false);
    ModulePtr back = onnx::import_model(onnx::load(path));
    back->eval();
    const std::vector<float> got = forward(*back, x);
    REQUIRE(got.size() == want.size());
    const double d = max_diff(got, want);
    CHECK_MESSAGE(d <= 1e-5 * scale, c.name, ": kiln import differs by ", d, " (output scale ", scale, ")");
  }
}

TEST_CASE("onnx: a CNN exported by PyTorch's torch.onnx.export runs in kiln with PyTorch's outputs") {
  // The committed fixture of tests/fixtures/make_torch_cnn_onnx.py: PyTorch's export of a small
  // CNN (with BatchNormalization, pooling, Gemm, Softmax), its input and PyTorch's output.
  const std::string fx = KILN_SOURCE_DIR "/tests/fixtures/";
  const onnx::Model m = onnx::load(fx + "torch_cnn.onnx");
  std::string ops;
  for (const onnx::Node& n : m.graph.nodes) ops += n.op_type + " ";
  CHECK(ops == "Conv BatchNormalization Relu MaxPool Conv Relu AveragePool Flatten Gemm Softmax ");
  ModulePtr net = onnx::import_model(m);
  net->eval();
  const std::vector<float> xv = read_floats(fx + "torch_cnn_input.bin");
  REQUIRE(xv.size() == 2 * 3 * 16 * 16);
  const Tensor x = from_vector(xv, onnx::input_shape(m, 2));
  CHECK(x.sizes() == Shape{2, 3, 16, 16});
  const std::vector<float> want = read_floats(fx + "torch_cnn_output.bin");
  REQUIRE(want.size() == 2 * 10);
  const std::vector<float> got = forward(*net, x);
  const double d = max_diff(got, want);
  MESSAGE("PyTorch-exported CNN (" << ops << "): max |kiln - torch| " << d);
  CHECK(d <= 1e-5);
  // The batch dim is free: one sample alone gives the first row.
  const std::vector<float> one = forward(*net, x.narrow(0, 0, 1).contiguous());
  CHECK(max_diff(one, std::vector<float>(want.begin(), want.begin() + 10)) <= 1e-5);
}

namespace {
// Builds its activation through raw memory, which no op hook sees: the trace would bake this
// input's values into the graph as a constant.
class Untraced : public Module {
 public:
  Tensor forward(const Tensor& x) override {
    Tensor c = x.contiguous();
    Tensor y = empty(x.sizes());
    const float* src = c.data<float>();
    float* dst = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) dst[i] = 2 * src[i];
    return ops::relu(y);
  }
  std::string repr() const override { return "Untraced"; }
};
}  // namespace

TEST_CASE("onnx: an export that does not reproduce the net on a second input is an error, not a file") {
  Untraced net;
  CHECK_THROWS_WITH_AS(onnx::export_module(net, {2, 3}), doctest::Contains("does not reproduce the net"), Error);
  onnx::ExportOptions unchecked;
  unchecked.verify = false;
  CHECK_NOTHROW(onnx::export_module(net, {2, 3}, unchecked));  // the trace alone cannot tell
}
