// kiln's exports of recurrent nets run in onnxruntime: every net of tests/onnx/rnn_nets.h (LSTM,
// GRU, RNN tanh and relu; stacked, bidirectional, batch_first, reverse, no bias, lengths, learned
// initial states, unbatched, h_n / c_n in the output) is exported, passes onnx.checker's full
// check and gives kiln's output in onnxruntime (tests/onnx/ort_run.py, one Python start for all);
// files whose dim 0 stayed free run at a second size of it too; and the zoo's lstm-forecast and
// gru-forecast, traced at batch 1, run at batch 2.
// Skipped without the venv's onnx, onnxruntime and numpy; fails without them under CI=true.
//   ctest --test-dir build -R onnx.test_onnx_rnn_runtime --output-on-failure
#include "tests/support/testing.h"

#include <fstream>

#include "engine/autograd.h"
#include "io/onnx/onnx.h"
#include "nets/zoo.h"
#include "tests/e2e/onnx_testing.h"
#include "tests/onnx/rnn_nets.h"

using namespace kiln;
using namespace kiln::rnn_test;

TEST_CASE("onnx rnn: kiln's exports of LSTM, GRU and RNN nets run in onnxruntime with kiln's outputs") {
  if (!test::need_python("onnx, onnxruntime, numpy")) return;
  test::TempDir dir("onnx_rnn_ort");
  struct Run {
    std::string what, out;
    std::vector<float> want;
  };
  std::vector<Run> runs;
  std::ofstream manifest(dir / "manifest.tsv");
  auto shape_csv = [](const Shape& s) {
    std::string v;
    for (int64_t d : s) v += (v.empty() ? "" : ",") + std::to_string(d);
    return v;
  };
  for (const Spec& s : specs()) {
    RecNet net(s);
    net.eval();
    onnx::ExportOptions opt;
    opt.dynamic_batch = !s.states;
    const std::string model = dir / (s.slug() + ".onnx");
    onnx::save(onnx::export_module(net, s.input(), opt), model);
    const bool free_dim = !(s.lengths || s.h0 || s.states);
    std::vector<Shape> shapes = {s.input()};
    if (free_dim) {
      Shape other = s.input();
      other[0] += 2;
      shapes.push_back(other);
    }
    for (size_t k = 0; k < shapes.size(); ++k) {
      const Tensor x = wave(shapes[k], 0.29 + 0.1 * double(k));
      NoGradGuard g;
      const std::string in = dir / (s.slug() + "." + std::to_string(k) + ".in.bin");
      const std::string out = dir / (s.slug() + "." + std::to_string(k) + ".out.bin");
      onnx_test::write_floats(x, in);
      manifest << model << "\t" << in << "\t" << out << "\t" << shape_csv(shapes[k]) << "\n";
      runs.push_back({s.str() + " at " + shape_str(shapes[k]), out, net(x).contiguous().to_vector_of<float>()});
    }
  }
  // The zoo's recurrent nets (kiln export --onnx --model lstm-forecast), traced at batch 1 and run
  // at batch 2: the batch dim stays free.
  for (const char* name : {"lstm-forecast", "gru-forecast"}) {
    ModulePtr net = nets::build(name);
    net->eval();
    Shape traced = nets::find(name).input;
    traced.insert(traced.begin(), 1);
    const std::string model = dir / (std::string(name) + ".onnx");
    onnx::save(onnx::export_module(*net, traced), model);
    Shape run = traced;
    run[0] = 2;
    const Tensor x = wave(run, 0.31);
    NoGradGuard g;
    const std::string in = dir / (std::string(name) + ".in.bin"), out = dir / (std::string(name) + ".out.bin");
    onnx_test::write_floats(x, in);
    manifest << model << "\t" << in << "\t" << out << "\t" << shape_csv(run) << "\n";
    runs.push_back({std::string(name) + " at " + shape_str(run), out, (*net)(x).contiguous().to_vector_of<float>()});
  }
  manifest.close();
  int rc = 0;
  const std::string cmd = test::shell_quote(test::python()) + " '" KILN_SOURCE_DIR "/tests/onnx/ort_run.py' " +
                          test::shell_quote(dir / "manifest.tsv") + " 2>&1";
  const std::string said = test::run_capture(cmd, &rc);
  REQUIRE_MESSAGE(rc == 0, cmd << "\n" << said);
  REQUIRE(runs.size() >= specs().size() + 2);
  double worst = 0;
  for (const Run& r : runs) {
    CAPTURE(r.what);
    const std::vector<float> got = onnx_test::read_floats(r.out);
    REQUIRE(got.size() == r.want.size());
    const double scale = std::max(1.0, onnx_test::max_abs(r.want));
    const double d = onnx_test::max_diff(got, r.want);
    worst = std::max(worst, d / scale);
    CHECK_MESSAGE(d <= 1e-5 * scale, r.what, ": onnxruntime differs from kiln by ", d, " (output scale ", scale, ")");
  }
  MESSAGE(runs.size() << " runs of " << specs().size() + 2 << " exported nets in onnxruntime; largest difference "
                      << worst << " of the output scale");
}
