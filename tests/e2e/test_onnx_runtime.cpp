// kiln's ONNX export checked by the reference implementations in the test venv (KILN_TEST_PYTHON:
// onnx and onnxruntime, tools/install-deps.sh --test): zoo nets (with non-trivial batch-norm
// statistics) exported by kiln pass onnx.checker's full check and give, in onnxruntime, kiln's
// eval-mode output on the same input (tests/e2e/onnx_run.py), as does kiln's own import of the
// file. Skipped without the venv's onnx and onnxruntime; fails without them under CI=true.
//   ctest --test-dir build -R e2e.test_onnx_runtime
//   KILN_ONNX_NETS=alexnet,vgg11 build/tests/kiln_tests_e2e -sf='*onnx_runtime*'   (other nets, default inputs)
#include "tests/support/testing.h"

#include <chrono>
#include <cstdlib>

#include "io/onnx/onnx.h"
#include "nets/zoo.h"
#include "tests/e2e/onnx_testing.h"

using namespace kiln;
using namespace kiln::onnx_test;

TEST_CASE("onnx: zoo nets exported by kiln pass onnx.checker and match onnxruntime") {
  if (!test::need_python("onnx, onnxruntime, numpy")) return;
  std::vector<Case> cases = zoo_cases();
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
  test::TempDir dir("onnx_ort");
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const auto t0 = std::chrono::steady_clock::now();
    ModulePtr net = eval_net(c);
    const Tensor x = input_for(c.input);
    const std::vector<float> want = forward(*net, x);
    const double scale = std::max(1.0, max_abs(want));
    const std::string path = dir / (c.name + ".onnx"), in = dir / "in.bin", out = dir / "out.bin";
    Shape traced = c.input;  // traced at batch 1, run at the case's batch: the batch dim stays free
    traced[0] = 1;
    onnx::save(onnx::export_module(*net, traced), path);
    write_floats(x, in);
    std::string cmd = test::shell_quote(test::python()) + " '" KILN_SOURCE_DIR "/tests/e2e/onnx_run.py' check " +
                      test::shell_quote(path) + " " + test::shell_quote(in) + " " + test::shell_quote(out);
    for (int64_t s : c.input) cmd += " " + std::to_string(s);
    int rc = 0;
    const std::string said = test::run_capture(cmd + " 2>&1", &rc);
    REQUIRE_MESSAGE(rc == 0, c.name, ": ", cmd, "\n", said);
    const std::vector<float> got = read_floats(out);
    REQUIRE(got.size() == want.size());
    const double d = max_diff(got, want);
    CHECK_MESSAGE(d <= 1e-4 * scale, c.name, ": onnxruntime differs by ", d, " (output scale ", scale, ")");
    // And kiln's own importer on the same file (test_onnx.cpp does the smaller nets without the venv).
    ModulePtr back = onnx::import_model(onnx::load(path));
    back->eval();
    const double d_kiln = max_diff(forward(*back, x), want);
    CHECK_MESSAGE(d_kiln <= 1e-5 * scale, c.name, ": kiln import differs by ", d_kiln);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(c.name << " " << shape_str(c.input) << ": max |onnxruntime - kiln| " << d << ", max |import - kiln| "
                   << d_kiln << ", output scale " << scale << ", " << s << " s");
  }
}
