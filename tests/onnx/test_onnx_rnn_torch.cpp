// PyTorch's nn.LSTM, nn.GRU and nn.RNN exported by both of PyTorch 2's ONNX exporters (the
// TorchScript one and the dynamo one: tests/onnx/torch_rnn_export.py) import into kiln and give
// onnxruntime's output on the same file (and PyTorch's): stacked, bidirectional, batch_first,
// no-bias and learned-initial-state layers, h_n / c_n in the output, a Linear head, the batch dim
// fixed or free. Every file
// must: a file kiln refuses or computes differently fails, and so does one PyTorch could not
// export. The TorchScript exporter writes one LSTM / GRU / RNN node per layer, its zero initial
// state an Expand of zeros to Shape(x)'s batch (imported as no state); the dynamo one LSTM and GRU
// nodes, but nn.RNN as MatMul / Add / Tanh / Relu / Slice steps (onnxscript's torch_lib has no RNN
// node), which kiln imports as those ops.
// Needs torch, onnx, onnxruntime and onnxscript in KILN_TORCH_PYTHON (default: the test venv);
// Skipped without them, failed under CI=true.
//   ctest --test-dir build -R onnx.test_onnx_rnn_torch --output-on-failure
#include "tests/support/testing.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "io/onnx/onnx.h"
#include "tests/e2e/onnx_testing.h"

using namespace kiln;
using namespace kiln::onnx_test;

namespace {

Shape parse_dims(const std::string& s) {
  Shape d;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) d.push_back(std::stoll(part));
  return d;
}

// The files kiln refuses by design, with the refusal's words: the dynamo exporter, with the batch
// dim free, reshapes each stacked layer's output to a shape it computes from Shape(...), and kiln's
// importer has no shape arithmetic (a single layer, or a fixed batch, imports).
const std::map<std::string, std::string> kRefused = {
    {"lstm_2l_bidir_bf_free_batch dynamo", "unsupported op Shape"},
};

}  // namespace

TEST_CASE("onnx rnn: PyTorch's exports of nn.LSTM, nn.GRU and nn.RNN import into kiln and match onnxruntime") {
  const char* env = std::getenv("KILN_TORCH_PYTHON");
  const std::string py = env && *env ? env : test::python();
  const std::string probe =
      test::shell_quote(py) + " -c 'import torch, onnx, onnxruntime, onnxscript' > /dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    test::skip_missing("PyTorch", "'import torch, onnx, onnxruntime, onnxscript' fails in " + py +
                                      " (KILN_TORCH_PYTHON names a Python that has them)");
    return;
  }
  test::TempDir dir("onnx_rnn_torch");
  const std::string cmd = test::shell_quote(py) + " '" KILN_SOURCE_DIR "/tests/onnx/torch_rnn_export.py' " +
                          test::shell_quote(dir.path.string());
  int rc = 0;
  const std::string said = test::run_capture(cmd + " 2>&1", &rc);
  REQUIRE_MESSAGE(rc == 0, (cmd + "\n" + said));
  std::ifstream manifest(dir / "manifest.tsv");
  std::string line, header;
  std::getline(manifest, header);
  std::ostringstream table;
  table << header << "\nnet                      exporter  opset  result\n";
  int rows = 0, imported = 0, export_failed = 0, refused = 0;
  while (std::getline(manifest, line)) {
    ++rows;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string part;
    while (std::getline(ss, part, '\t')) f.push_back(part);
    REQUIRE(f.size() == 8);
    const std::string &net = f[0], &exporter = f[1], &status = f[3];
    char head[96];
    std::snprintf(head, sizeof head, "%-24s %-9s %5s  ", net.c_str(), exporter.c_str(), f[2].c_str());
    table << head;
    if (status != "ok") {
      ++export_failed;
      table << "PyTorch's " << status << "\n";
      continue;
    }
    CAPTURE(net);
    CAPTURE(exporter);
    const std::string base = dir / (net + "_" + exporter);
    const onnx::Model m = onnx::load(base + ".onnx");
    std::string ops;
    {
      std::map<std::string, int> count;
      for (const onnx::Node& n : m.graph.nodes) ++count[n.op_type];
      for (const auto& [op, k] : count) ops += (ops.empty() ? "" : " ") + op + "x" + std::to_string(k);
    }
    ModulePtr kiln_net;
    const auto by_design = kRefused.find(net + " " + exporter);
    try {
      kiln_net = onnx::import_model(m);
    } catch (const Error& e) {
      if (by_design != kRefused.end() && e.message().find(by_design->second) != std::string::npos) {
        ++refused;
        table << "refused by design: " << e.message().substr(0, 60) << "... [" << ops << "]\n";
        continue;
      }
      FAIL_CHECK((net + " " + exporter + ": kiln refuses PyTorch's export: " + e.message()));
      table << "REFUSED by kiln: " << e.message() << " [" << ops << "]\n";
      continue;
    }
    CHECK_MESSAGE(by_design == kRefused.end(), net, " ", exporter, " imports now: take it off kRefused (and the docs)");
    kiln_net->eval();
    const Tensor x = from_vector(read_floats(dir / (net + ".in.bin")), parse_dims(f[4]));
    const std::vector<float> got = forward(*kiln_net, x);
    const std::vector<float> ort = read_floats(base + ".ort.bin"), torch = read_floats(dir / (net + ".torch.bin"));
    REQUIRE(got.size() == ort.size());
    const double scale = std::max(1.0, max_abs(ort));
    const double d_ort = max_diff(got, ort), d_torch = max_diff(got, torch);
    CHECK_MESSAGE(d_ort <= 1e-5 * scale, net, " ", exporter, ": kiln differs from onnxruntime by ", d_ort);
    CHECK_MESSAGE(d_torch <= 1e-5 * scale, net, " ", exporter, ": kiln differs from PyTorch by ", d_torch);
    // A free batch dim: the first sequence alone gives its part of the output.
    std::string one;
    if (f[7] != "-") {
      const int64_t b = std::stoll(f[7]);
      const Tensor y1 = (*kiln_net)(x.narrow(b, 0, 1).contiguous());
      const Tensor want1 = from_vector(ort, parse_dims(f[5])).narrow(b, 0, 1);
      const double d_one = max_diff(y1.contiguous().to_vector_of<float>(), want1.contiguous().to_vector_of<float>());
      CHECK_MESSAGE(d_one <= 1e-5 * scale, net, " ", exporter, ": batch 1 differs by ", d_one);
      std::ostringstream os;
      os << ", batch 1 " << d_one;
      one = os.str();
    }
    ++imported;
    std::ostringstream r;
    r << "imported; max |kiln - onnxruntime| " << d_ort << ", max |kiln - torch| " << d_torch << one << " [" << ops
      << "]\n";
    table << r.str();
  }
  table << imported << " files imported and matched, " << refused << " refused by design, " << export_failed
        << " not exported by PyTorch\n";
  std::printf("%s", table.str().c_str());
  std::fflush(stdout);
  CHECK(rows == 24);  // torch_rnn_export.py's 12 nets by both exporters
  CHECK_MESSAGE(export_failed == 0, export_failed, " file(s) PyTorch did not export (above)");
  CHECK(refused == int(kRefused.size()));
  CHECK(imported + refused == rows);
}
