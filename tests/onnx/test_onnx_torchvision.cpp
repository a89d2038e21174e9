// The torchvision nets of kiln's zoo (alexnet, vgg11/16/19, resnet18/50/101, inception_v3)
// exported by PyTorch 2's two ONNX exporters (the TorchScript one and the dynamo one:
// tests/onnx/torchvision_export.py, batch dim free) import into kiln and give onnxruntime's output
// on the same file (and PyTorch's), at the exported batch and at batch 1. Every file must: a file
// kiln refuses or computes differently fails, and so does one PyTorch could not export (the docs
// claim all 16; such a failure is reported with PyTorch's message, for whoever updates the venv).
// Needs torch and torchvision beside onnx and onnxruntime in KILN_TORCH_PYTHON (default: the test
// venv). tools/install-deps.sh --test installs them (the PyPI wheels bring their CUDA libraries: a
// ~6 GB venv), so a missing torch fails under CI=true like the other venv packages.
//   ctest --test-dir build -R onnx.test_onnx_torchvision --output-on-failure
//   KILN_ONNX_NETS=resnet18,alexnet ...   (those nets only)
#include "tests/support/testing.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

}  // namespace

TEST_CASE("onnx: torchvision nets exported by PyTorch's exporters import into kiln and match onnxruntime") {
  const char* env = std::getenv("KILN_TORCH_PYTHON");
  const std::string py = env && *env ? env : test::python();
  const std::string probe =
      test::shell_quote(py) + " -c 'import torch, torchvision, onnx, onnxruntime, onnxscript' > /dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    const std::string why = "'import torch, torchvision, onnx, onnxruntime, onnxscript' fails in " + py +
                            " (KILN_TORCH_PYTHON names a Python that has them)";
    test::skip_missing("PyTorch", why);
    return;
  }
  test::TempDir dir("onnx_torchvision");
  std::string cmd = test::shell_quote(py) + " '" KILN_SOURCE_DIR "/tests/onnx/torchvision_export.py' " +
                    test::shell_quote(dir.path.string());
  if (const char* nets = std::getenv("KILN_ONNX_NETS")) {
    std::string rest = nets;
    for (char& ch : rest)
      if (ch == ',') ch = ' ';
    cmd += " " + rest;
  }
  int requested = 8;  // torchvision_export.py's nets: alexnet vgg11 vgg16 vgg19 resnet18 resnet50 resnet101 inception_v3
  if (const char* nets = std::getenv("KILN_ONNX_NETS")) requested = 1 + int(std::count(nets, nets + std::strlen(nets), ','));
  int rc = 0;
  const std::string said = test::run_capture(cmd + " 2>&1", &rc);
  REQUIRE_MESSAGE(rc == 0, (cmd + "\n" + said));
  std::ifstream manifest(dir / "manifest.tsv");
  std::string line, header;
  std::getline(manifest, header);
  std::ostringstream table;
  table << header << "\nnet         exporter  opset  result\n";
  int imported = 0, export_failed = 0, rows = 0;
  while (std::getline(manifest, line)) {
    ++rows;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string part;
    while (std::getline(ss, part, '\t')) f.push_back(part);
    REQUIRE(f.size() == 7);
    const std::string &net = f[0], &exporter = f[1], &status = f[3];
    char head[64];
    std::snprintf(head, sizeof head, "%-11s %-9s %5s  ", net.c_str(), exporter.c_str(), f[2].c_str());
    table << head;
    if (status != "ok") {
      ++export_failed;
      table << "PyTorch's " << status << "\n";
      continue;
    }
    CAPTURE(net);
    CAPTURE(exporter);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string base = dir / (net + "_" + exporter);
    const onnx::Model m = onnx::load(base + ".onnx");
    std::string ops;
    {
      std::map<std::string, int> count;
      for (const onnx::Node& n : m.graph.nodes) ++count[n.op_type];
      for (const auto& [op, k] : count) ops += (ops.empty() ? "" : " ") + op + "x" + std::to_string(k);
    }
    ModulePtr kiln_net;
    try {
      kiln_net = onnx::import_model(m);
    } catch (const Error& e) {
      FAIL_CHECK((net + " " + exporter + ": kiln refuses PyTorch's export: " + e.message()));
      table << "REFUSED by kiln: " << e.message() << "\n";
      continue;
    }
    kiln_net->eval();
    const Tensor x = from_vector(read_floats(dir / (net + ".in.bin")), parse_dims(f[4]));
    const std::vector<float> got = forward(*kiln_net, x);
    const std::vector<float> ort = read_floats(base + ".ort.bin"), torch = read_floats(dir / (net + ".torch.bin"));
    REQUIRE(got.size() == ort.size());
    const double scale = std::max(1.0, max_abs(ort));
    const double d_ort = max_diff(got, ort), d_torch = max_diff(got, torch);
    CHECK_MESSAGE(d_ort <= 1e-4 * scale, net, " ", exporter, ": kiln differs from onnxruntime by ", d_ort,
                  " (output scale ", scale, ")");
    CHECK_MESSAGE(d_torch <= 1e-4 * scale, net, " ", exporter, ": kiln differs from PyTorch by ", d_torch);
    // The batch dim is free: the first sample alone gives the first row.
    double d_one = 0;
    if (x.size(0) > 1) {
      const std::vector<float> one = forward(*kiln_net, x.narrow(0, 0, 1).contiguous());
      d_one = max_diff(one, std::vector<float>(ort.begin(), ort.begin() + std::ptrdiff_t(one.size())));
      CHECK_MESSAGE(d_one <= 1e-4 * scale, net, " ", exporter, ": batch 1 differs by ", d_one);
    }
    ++imported;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ostringstream r;
    r << "imported; max |kiln - onnxruntime| " << d_ort << ", max |kiln - torch| " << d_torch << " (scale " << scale
      << "), batch 1 " << d_one << ", export " << f[6] << " s, kiln " << s << " s [" << ops << "]\n";
    table << r.str();
  }
  table << imported << " files imported and matched, " << export_failed << " not exported by PyTorch\n";
  std::printf("%s", table.str().c_str());
  std::fflush(stdout);
  CHECK(rows == 2 * requested);  // each net by both exporters
  CHECK_MESSAGE(export_failed == 0, export_failed, " file(s) PyTorch did not export (above)");
  CHECK(imported == rows);
}
