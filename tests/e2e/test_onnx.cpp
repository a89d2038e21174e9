// ONNX export and import end to end: zoo nets (with non-trivial batch-norm statistics) exported by
// kiln, checked by onnx.checker and run by onnxruntime (the venv's, tests/e2e/onnx_run.py) on the
// same input as kiln's eval-mode forward; the same files imported back into kiln; a CNN exported by
// PyTorch (Debian's python3-torch, when present) imported and compared with PyTorch's output; the
// protobuf wire format and the importer's errors. The Python parts skip with a message when the
// packages are missing (tools/install-deps.sh --test installs onnx and onnxruntime).
//   ctest --test-dir build -R e2e.test_onnx
//   KILN_ONNX_NETS=alexnet,vgg11 build/tests/kiln_tests_e2e -tc='*onnxruntime*'   (other nets, default inputs)
#include "tests/support/testing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "engine/ops/elementwise.h"
#include "io/onnx.h"
#include "io/protobuf.h"
#include "nets/zoo.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

void write_floats(const Tensor& t, const std::string& path) {
  std::vector<float> v = t.contiguous().to_vector_of<float>();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(b.size() / sizeof(float));
  std::copy(b.begin(), b.begin() + std::ptrdiff_t(v.size() * sizeof(float)), reinterpret_cast<char*>(v.data()));
  return v;
}

bool have(const std::string& python, const std::string& modules) {
  return std::system(("'" + python + "' -c 'import " + modules + "' >/dev/null 2>&1").c_str()) == 0;
}

// Deterministic values, so batch norm's scale, shift, mean and variance all differ from their
// defaults (0 / 1 would hide a mix-up of the BatchNormalization inputs).
void perturb_batch_norm(Module& net) {
  int k = 0;
  for (auto& [name, t] : net.state_dict()) {
    if (t.dim() != 1 || !is_floating(t.dtype())) continue;
    const bool var = name.find("running_var") != std::string::npos;
    const bool bn = var || name.find("running_mean") != std::string::npos ||
                    (name.find("bn") != std::string::npos);
    if (!bn) continue;
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i, ++k)
      p[i] = var ? float(0.5 + 0.4 * std::cos(0.37 * k))
                 : float(0.2 * std::sin(0.71 * k)) + (name.find("weight") != std::string::npos ? 1.f : 0.f);
  }
}

Tensor input_for(const Shape& shape) {
  const int64_t n = shape_numel(shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(std::sin(0.013 * double(i) + 0.5) * 1.5);
  return from_vector(v, shape);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

struct Case {
  std::string name;
  nets::NetOptions options;
  Shape input;
};

}  // namespace

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

TEST_CASE("onnx: zoo nets exported by kiln match onnxruntime and kiln's own import") {
  const std::string py = KILN_TEST_PYTHON;
  const bool ort = have(py, "onnx, onnxruntime, numpy");
  if (!ort) MESSAGE("onnxruntime part skipped: no onnx/onnxruntime in " << py << " (tools/install-deps.sh --test)");
  nets::NetOptions unet;
  unet.width = 8;
  unet.depth = 3;
  nets::NetOptions small;
  small.image_size = 64;
  nets::NetOptions incep;
  incep.image_size = 75;
  std::vector<Case> cases = {
      {"mnist-cnn", {}, {2, 1, 28, 28}},        {"cifar10-cnn", {}, {2, 3, 32, 32}},
      {"resnet56", {}, {2, 3, 32, 32}},         {"resnet18", small, {2, 3, 64, 64}},
      {"googlenet", small, {1, 3, 64, 64}},     {"inception3", incep, {1, 3, 75, 75}},
      {"unet", unet, {2, 1, 32, 32}},
  };
  // KILN_ONNX_NETS=alexnet,vgg11,...: those zoo nets at their default input (batch 1) instead.
  if (const char* list = std::getenv("KILN_ONNX_NETS")) {
    cases.clear();
    std::string rest = list;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string name = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      if (name.empty()) continue;
      Shape in = nets::find(name).input;
      in.insert(in.begin(), 1);
      cases.push_back({name, {}, in});
    }
  }
  test::TempDir dir("onnx");
  for (const Case& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    ModulePtr net = nets::build(c.name, c.options);
    perturb_batch_norm(*net);
    net->eval();
    const Tensor x = input_for(c.input);
    Tensor y;
    {
      NoGradGuard g;
      y = (*net)(x);
    }
    const std::vector<float> want = y.contiguous().to_vector_of<float>();
    const double scale = std::max(1.0, max_abs(want));
    const std::string path = (dir.path / (c.name + ".onnx")).string();
    Shape traced = c.input;  // traced at batch 1, run at the case's batch: the batch dim stays free
    traced[0] = 1;
    onnx::save(onnx::export_module(*net, traced), path);
    CHECK(net->is_training() == false);

    // kiln's importer on the same file.
    ModulePtr back = onnx::import_model(onnx::load(path));
    back->eval();
    Tensor yb;
    {
      NoGradGuard g;
      yb = (*back)(x);
    }
    REQUIRE(yb.sizes() == y.sizes());
    const double d_kiln = max_diff(yb.contiguous().to_vector_of<float>(), want);
    CHECK_MESSAGE(d_kiln <= 1e-5 * scale, c.name, ": kiln import differs by ", d_kiln);

    double d_ort = -1;
    if (ort) {
      const std::string in = (dir.path / "in.bin").string(), out = (dir.path / "out.bin").string();
      write_floats(x, in);
      std::string cmd = "'" + py + "' '" KILN_SOURCE_DIR "/tests/e2e/onnx_run.py' check '" + path + "' '" + in + "' '" +
                        out + "'";
      for (int64_t s : c.input) cmd += " " + std::to_string(s);
      REQUIRE_MESSAGE(std::system((cmd + " >/dev/null").c_str()) == 0, c.name, ": ", cmd);
      d_ort = max_diff(read_floats(out), want);
      CHECK_MESSAGE(d_ort <= 1e-4 * scale, c.name, ": onnxruntime differs by ", d_ort, " (output scale ", scale, ")");
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(c.name << " " << shape_str(c.input) << ": max |onnxruntime - kiln| " << d_ort << ", max |import - kiln| "
                   << d_kiln << ", output scale " << scale << ", " << s << " s");
  }
}

TEST_CASE("onnx: a CNN exported by PyTorch's torch.onnx.export runs in kiln with PyTorch's outputs") {
  const std::string py = "/usr/bin/python3";
  if (!have(py, "torch")) {
    MESSAGE("skipped: no torch in " << py << " (Debian's python3-torch)");
    return;
  }
  test::TempDir dir("onnx_torch");
  const std::string model = (dir.path / "torch.onnx").string(), in = (dir.path / "in.bin").string(),
                    out = (dir.path / "out.bin").string();
  const std::string cmd = "'" + py + "' '" KILN_SOURCE_DIR "/tests/e2e/onnx_run.py' torch '" + model + "' '" + in +
                          "' '" + out + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    MESSAGE("skipped: torch.onnx.export failed here (" << cmd << ")");
    return;
  }
  const onnx::Model m = onnx::load(model);
  ModulePtr net = onnx::import_model(m);
  net->eval();
  const std::vector<float> xv = read_floats(in);
  const Tensor x = from_vector(xv, onnx::input_shape(m, 2));
  Tensor y;
  {
    NoGradGuard g;
    y = (*net)(x);
  }
  const std::vector<float> want = read_floats(out);
  const double d = max_diff(y.contiguous().to_vector_of<float>(), want);
  std::string ops;
  for (const onnx::Node& n : m.graph.nodes) ops += n.op_type + " ";
  MESSAGE("PyTorch-exported CNN (" << ops << "): max |kiln - torch| " << d);
  CHECK(d <= 1e-5);
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
