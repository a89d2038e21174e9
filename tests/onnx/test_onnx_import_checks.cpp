// The ONNX importer's checks without Python (onnx.test_onnx_conformance has the ONNX test suite):
// what kiln does not implement exactly is refused when the model is imported, with the node, the
// op, the attribute and the opset in the message (an unknown or misplaced attribute, an older
// opset's attribute, extra outputs, malformed Slice/Resize argument lists, opsets out of range);
// the exporters' common forms compute what numpy's definitions give (batched and broadcast MatMul,
// Gemm with alpha, beta, transposes and a broadcast C, Softmax before opset 13).
//   ctest --test-dir build -R onnx.test_onnx_import_checks
#include "tests/support/testing.h"

#include <cmath>

#include "engine/autograd.h"
#include "io/onnx/onnx.h"

using namespace kiln;

namespace {

onnx::Attribute ints_attr(const std::string& name, std::vector<int64_t> v) {
  onnx::Attribute a;
  a.name = name, a.type = onnx::kAttrInts, a.ints = std::move(v);
  return a;
}
onnx::Attribute int_attr(const std::string& name, int64_t v) {
  onnx::Attribute a;
  a.name = name, a.type = onnx::kAttrInt, a.i = v;
  return a;
}
onnx::Attribute float_attr(const std::string& name, float v) {
  onnx::Attribute a;
  a.name = name, a.type = onnx::kAttrFloat, a.f = v;
  return a;
}
onnx::Attribute string_attr(const std::string& name, const std::string& v) {
  onnx::Attribute a;
  a.name = name, a.type = onnx::kAttrString, a.s = v;
  return a;
}

// One node "n" reading the graph input "x" (shape `in`) and initializers.
struct OneNode {
  onnx::Model m;
  onnx::Node& node() { return m.graph.nodes[0]; }
  OneNode(const std::string& op, const Shape& in, int64_t opset) {
    m.opset = opset;
    onnx::Node n;
    n.name = "n";
    n.op_type = op;
    n.inputs = {"x"};
    n.outputs = {"y"};
    m.graph.nodes.push_back(n);
    m.graph.inputs.push_back(onnx::ValueInfo{"x", onnx::kFloat, in, {}});
    m.graph.outputs.push_back(onnx::ValueInfo{"y", onnx::kFloat, {}, {}});
  }
  OneNode& floats(const std::string& name, const Shape& dims, std::vector<float> v) {
    onnx::TensorData t;
    t.name = name, t.dims = dims, t.f = std::move(v);
    m.graph.initializers.push_back(t);
    node().inputs.push_back(name);
    return *this;
  }
  OneNode& ints(const std::string& name, std::vector<int64_t> v) {
    onnx::TensorData t;
    t.name = name, t.dims = {int64_t(v.size())}, t.elem_type = onnx::kInt64, t.i = std::move(v);
    m.graph.initializers.push_back(t);
    node().inputs.push_back(name);
    return *this;
  }
  // Through the wire format, as a file would come.
  ModulePtr import() const { return onnx::import_model(onnx::decode(onnx::encode(m))); }
};

std::vector<float> iota_values(int64_t n, float scale = 0.1f) {
  std::vector<float> v(size_t(n), 0.f);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * float((i * 7) % 11) - 0.4f;
  return v;
}

std::vector<float> run(const ModulePtr& net, const Shape& in) {
  NoGradGuard g;
  return (*net)(from_vector(iota_values(shape_numel(in)), in)).contiguous().to_vector_of<float>();
}

}  // namespace

TEST_CASE("onnx import: an attribute kiln does not implement is refused at import, naming node, op, attribute, opset") {
  OneNode relu("Relu", {2, 3}, 13);
  relu.node().attrs.push_back(float_attr("alpha", 0.5f));
  CHECK_THROWS_KILN(relu.import(), "node 'n' (Relu, opset 13): attribute 'alpha' is not implemented");

  // ceil_mode came with AveragePool-10: at opset 7 it is no attribute of the op's version.
  OneNode pool("AveragePool", {1, 1, 5, 5}, 7);
  pool.node().attrs = {ints_attr("kernel_shape", {2, 2}), int_attr("ceil_mode", 1)};
  CHECK_THROWS_KILN(pool.import(),
                    "(AveragePool, opset 7): attribute 'ceil_mode' is not implemented by kiln for AveragePool-7");
  pool.m.opset = 10;
  CHECK_NOTHROW(pool.import());
  // Dilated average pooling (AveragePool-19) is refused, not ignored.
  pool.m.opset = 19;
  pool.node().attrs.push_back(ints_attr("dilations", {2, 2}));
  CHECK_THROWS_KILN(pool.import(), "(AveragePool, opset 19): attribute 'dilations' other than 1");

  // Pad-11 takes pads as an input: a 'pads' attribute there is refused.
  OneNode pad("Pad", {1, 1, 3, 3}, 11);
  pad.ints("p", {0, 0, 1, 1, 0, 0, 1, 1});
  pad.node().attrs.push_back(ints_attr("pads", {0, 0, 1, 1, 0, 0, 1, 1}));
  CHECK_THROWS_KILN(pad.import(), "(Pad, opset 11): attribute 'pads' is not implemented by kiln for Pad-11");

  // A Resize transformation outside the ONNX reference.
  OneNode resize("Resize", {1, 1, 2, 2}, 13);
  resize.node().inputs = {"x", "", ""};
  resize.floats("scales", {4}, {1, 1, 2, 2});
  resize.node().attrs = {string_attr("coordinate_transformation_mode", "tf_half_pixel_for_nn")};
  CHECK_THROWS_KILN(resize.import(),
                    "(Resize, opset 13): attribute 'coordinate_transformation_mode' = 'tf_half_pixel_for_nn'");

  // An attribute of the wrong type.
  OneNode leaky("LeakyRelu", {2, 3}, 13);
  leaky.node().attrs = {int_attr("alpha", 1)};
  CHECK_THROWS_KILN(leaky.import(), "(LeakyRelu, opset 13): attribute 'alpha' has type int, expected float");
}

TEST_CASE("onnx import: node inputs, outputs, argument lists and opsets are checked at import") {
  // No output at all (a crash before): an error.
  OneNode none("Relu", {2, 3}, 13);
  none.node().outputs.clear();
  CHECK_THROWS_KILN(none.import(), "(Relu, opset 13): the node has no output");
  // A second output kiln does not compute (MaxPool's Indices).
  OneNode idx("MaxPool", {1, 1, 4, 4}, 12);
  idx.node().attrs = {ints_attr("kernel_shape", {2, 2})};
  idx.node().outputs = {"y", "indices"};
  CHECK_THROWS_KILN(idx.import(), "(MaxPool, opset 12): output 1 ('indices') is not implemented");
  // Too many inputs for the op's version.
  OneNode two("Relu", {2, 3}, 13);
  two.floats("extra", {1}, {1});
  CHECK_THROWS_KILN(two.import(), "(Relu, opset 13): Relu-13 takes 1 to 1 inputs, the node has 2");
  // Slice lists of different lengths (read past their end before).
  OneNode slice1("Slice", {4, 5}, 9);
  slice1.node().attrs = {ints_attr("starts", {0, 1}), ints_attr("ends", {2, 3}), ints_attr("axes", {1})};
  CHECK_THROWS_KILN(slice1.import(), "(Slice, opset 9): axes has 1 values, starts 2");
  OneNode slice10("Slice", {4, 5}, 13);
  slice10.ints("starts", {0, 1}).ints("ends", {2});
  CHECK_THROWS_KILN(slice10.import(), "(Slice, opset 13): starts has 2 values, ends 1");
  OneNode steps("Slice", {4, 5}, 13);
  steps.ints("starts", {0, 1}).ints("ends", {2, 3}).ints("axes", {0, 1}).ints("steps", {1});
  CHECK_THROWS_KILN(steps.import(), "steps has 1 values, starts 2");
  // Resize scales shorter than the input's rank: refused at import (the trial run), not read past.
  OneNode resize("Resize", {1, 1, 2, 2}, 13);
  resize.node().inputs = {"x", ""};
  resize.floats("scales", {2}, {2, 2});
  CHECK_THROWS_KILN(resize.import(), "(Resize, opset 13): scales has 2 values for 4 axes");
  // A shape-dependent refusal also comes at import: 3-d convolution.
  OneNode conv3("Conv", {1, 1, 3, 3, 3}, 13);
  conv3.floats("w", {1, 1, 1, 1, 1}, {1});
  CHECK_THROWS_KILN(conv3.import(), "(Conv, opset 13): 3-d convolution is not implemented");
  // Opsets outside 7 .. newest.
  OneNode old("Relu", {2, 3}, 6);
  CHECK_THROWS_KILN(old.import(), "opset (ai.onnx) is 6; kiln reads opsets 7 to");
  OneNode future("Relu", {2, 3}, onnx::kNewestOpset + 1);
  CHECK_THROWS_KILN(future.import(), "kiln reads opsets 7 to");
  // A non-float graph input.
  OneNode ints("Relu", {2, 3}, 13);
  ints.m.graph.inputs[0].elem_type = onnx::kInt64;
  CHECK_THROWS_KILN(ints.import(), "the graph input 'x' has element type int64; kiln computes in float32");
}

TEST_CASE("onnx import: Softmax before opset 13 normalises the input flattened to 2-d at axis") {
  const Shape in = {2, 3, 4};
  const std::vector<float> x = iota_values(24);
  for (int64_t opset : {7, 11, 13}) {
    CAPTURE(opset);
    OneNode sm("Softmax", in, opset);
    sm.node().attrs = {int_attr("axis", 1)};
    const std::vector<float> got = run(sm.import(), in);
    // Before 13: each of the 2 rows of 12 sums to 1; from 13: each of the 2 x 4 columns of 3.
    for (int64_t b = 0; b < 2; ++b) {
      if (opset < 13) {
        double s = 0, want0 = 0;
        for (int64_t k = 0; k < 12; ++k) s += got[size_t(b * 12 + k)], want0 += std::exp(double(x[size_t(b * 12 + k)]));
        CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
        CHECK(got[size_t(b * 12)] == doctest::Approx(std::exp(double(x[size_t(b * 12)])) / want0).epsilon(1e-5));
      } else {
        for (int64_t w = 0; w < 4; ++w) {
          double s = 0;
          for (int64_t c = 0; c < 3; ++c) s += got[size_t(b * 12 + c * 4 + w)];
          CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
        }
      }
    }
  }
}

TEST_CASE("onnx import: MatMul over batched and broadcast N-d operands, Gemm with alpha, beta, transposes and C") {
  // [2, 1, 3, 4] @ [5, 4, 6] -> [2, 5, 3, 6]: a's batch broadcasts over b's 5, b's over a's 2.
  OneNode mm("MatMul", {2, 1, 3, 4}, 13);
  const std::vector<float> bv = iota_values(5 * 4 * 6, 0.05f);
  mm.floats("b", {5, 4, 6}, bv);
  const std::vector<float> a = iota_values(2 * 3 * 4);
  const std::vector<float> got = run(mm.import(), {2, 1, 3, 4});
  REQUIRE(got.size() == 2 * 5 * 3 * 6);
  double worst = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 6; ++c) {
          double s = 0;
          for (int k = 0; k < 4; ++k)
            s += double(a[size_t(i * 12 + r * 4 + k)]) * double(bv[size_t(j * 24 + k * 6 + c)]);
          worst = std::max(worst, test::abs_diff(double(got[size_t(((i * 5 + j) * 3 + r) * 6 + c)]), s));
        }
  CHECK(worst < 1e-5);
  // Y = 0.5 * A^T B^T - 2 C with A [4, 3] (transA), B [5, 4] (transB), C [3, 1] broadcast.
  OneNode gemm("Gemm", {4, 3}, 13);
  const std::vector<float> b2 = iota_values(20, 0.07f), c2 = {0.5f, -1.f, 2.f};
  gemm.floats("b", {5, 4}, b2).floats("c", {3, 1}, c2);
  gemm.node().attrs = {float_attr("alpha", 0.5f), float_attr("beta", -2.f), int_attr("transA", 1),
                       int_attr("transB", 1)};
  const std::vector<float> ga = iota_values(12);
  const std::vector<float> gy = run(gemm.import(), {4, 3});
  REQUIRE(gy.size() == 15);
  worst = 0;
  for (int m = 0; m < 3; ++m)
    for (int n = 0; n < 5; ++n) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += double(ga[size_t(k * 3 + m)]) * double(b2[size_t(n * 4 + k)]);
      worst = std::max(worst, test::abs_diff(double(gy[size_t(m * 5 + n)]), 0.5 * s - 2.0 * double(c2[size_t(m)])));
    }
  CHECK(worst < 1e-5);
}

TEST_CASE("onnx import: every tensor a graph makes is bounded before it is allocated (hostile sizes)") {
  const char* limit = "over the limit on one tensor of an imported ONNX graph (KILN_ONNX_MAX_TENSOR_BYTES) of 4.0 GiB";
  // Resize to sizes 2^24 x 2^24 (each within Resize's own bound per axis): 3 * 2^48 values.
  OneNode sizes("Resize", {1, 3, 8, 8}, 13);
  sizes.node().inputs = {"x", "", ""};
  sizes.ints("sizes", {1, 3, int64_t(1) << 24, int64_t(1) << 24});
  CHECK_THROWS_KILN(sizes.import(), "node 'n' (Resize, opset 13): the resized output: shape [1, 3, 16777216, 16777216]");
  CHECK_THROWS_KILN(sizes.import(), limit);
  // Resize by scales of 1e6.
  OneNode scales("Resize", {1, 3, 8, 8}, 13);
  scales.node().inputs = {"x", ""};
  scales.floats("scales", {4}, {1, 1, 1e6f, 1e6f});
  CHECK_THROWS_KILN(scales.import(), "node 'n' (Resize, opset 13): the resized output: shape [1, 3, 8000000, 8000000]");
  // Conv with pads of 2^20 on a 4x4 input.
  OneNode conv("Conv", {1, 1, 4, 4}, 13);
  conv.floats("w", {1, 1, 1, 1}, {1});
  const int64_t p = int64_t(1) << 20;
  conv.node().attrs = {ints_attr("pads", {p, p, p, p})};
  CHECK_THROWS_KILN(conv.import(), "node 'n' (Conv, opset 13): a new tensor: shape [1, 1, 2097156, 2097156]");
  CHECK_THROWS_KILN(conv.import(), limit);
  // Pad by 2^24 on each side of both spatial dims.
  OneNode pad("Pad", {1, 1, 4, 4}, 13);
  const int64_t q = int64_t(1) << 24;
  pad.ints("pads", {0, 0, q, q, 0, 0, q, q});
  CHECK_THROWS_KILN(pad.import(), "node 'n' (Pad, opset 13): the padded output: shape [1, 1, 33554436, 33554436]");
  CHECK_THROWS_KILN(pad.import(), limit);
  // (Refused from the whole output's shape, before the first dim's pad made its partial result of
  // [1, 1, 33554436, 4]: 0.5 GiB, under the limit.)
  // A declared input of 3 * 2^40 values.
  OneNode input("Relu", {1, 3, int64_t(1) << 20, int64_t(1) << 20}, 13);
  CHECK_THROWS_KILN(input.import(), "onnx import: graph input 'x': shape [1, 3, 1048576, 1048576]");
  CHECK_THROWS_KILN(input.import(), limit);
}

TEST_CASE("onnx import: KILN_ONNX_MAX_TENSOR_BYTES sets the limit, and a bad value is an error") {
  struct Restore {
    ~Restore() { unsetenv("KILN_ONNX_MAX_TENSOR_BYTES"); }
  } restore;
  OneNode relu("Relu", {2, 1000}, 13);  // 8000 bytes
  setenv("KILN_ONNX_MAX_TENSOR_BYTES", "8000", 1);
  CHECK(onnx::max_tensor_bytes() == 8000);
  ModulePtr net = relu.import();
  CHECK(run(net, {2, 1000}).size() == 2000);
  CHECK_THROWS_KILN(run(net, {3, 1000}), "node 'n' (Relu, opset 13): a new tensor: shape [3, 1000]");
  setenv("KILN_ONNX_MAX_TENSOR_BYTES", "7999", 1);
  CHECK_THROWS_KILN(relu.import(), "graph input 'x': shape [2, 1000] of 4-byte elements needs 8000 bytes");
  for (const char* bad : {"-1", "0", "4GiB", "99999999999999999999"}) {
    setenv("KILN_ONNX_MAX_TENSOR_BYTES", bad, 1);
    CHECK_THROWS_KILN(relu.import(), "KILN_ONNX_MAX_TENSOR_BYTES: a whole number of bytes");
  }
  unsetenv("KILN_ONNX_MAX_TENSOR_BYTES");
  CHECK(onnx::max_tensor_bytes() == uint64_t(4) << 30);
}
