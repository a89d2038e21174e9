// `kiln bench --vs-pytorch`'s onnxruntime column on a tiny net: mnist-cnn exported by kiln at the
// timed batch, timed by bench/baselines/onnxruntime_bench.py in the venv's onnxruntime, its JSON
// read back; train and bfloat16 rows have no onnxruntime row. Skipped without the venv's
// onnxruntime (tools/install-deps.sh --test or --baseline), failed under CI=true. No timing is
// asserted.
//   ctest --test-dir build -R bench.test_onnxruntime_peer
#include "tests/support/testing.h"

#include "bench/harness/baseline.h"

using namespace kiln;
using namespace kiln::bench;

TEST_CASE("onnxruntime times kiln's own export of the forward float32 rows") {
  if (!test::need_python("onnxruntime, numpy")) return;
  const std::string script = std::string(KILN_SOURCE_DIR) + "/bench/baselines/onnxruntime_bench.py";
  Peer peer{PeerKind::onnxruntime, "onnxruntime", test::python(), python_module_version(test::python(), "onnxruntime")};
  CHECK(!peer.version.empty());

  std::vector<RunSpec> specs;
  for (bool train : {false, true}) {
    RunSpec s;
    s.model = "mnist-cnn";
    s.batch = 2;
    s.train = train;
    s.iters = 2;
    s.warmup = 0;
    specs.push_back(s);
  }
  RunSpec half = specs.front();
  half.batch = 3;
  half.dtype = "bfloat16";
  specs.push_back(half);
  CHECK(onnxruntime_runs(specs[0]));
  CHECK_FALSE(onnxruntime_runs(specs[1]));
  CHECK_FALSE(onnxruntime_runs(specs[2]));

  std::vector<std::string> notes;
  const Results res = run_onnxruntime_peer(peer, script, specs, 1, &notes);
  CHECK(notes.empty());
  REQUIRE(res.runs.size() == 1);
  const RunResult& r = res.runs[0];
  CHECK(r.spec.model == "mnist-cnn");
  CHECK(r.spec.batch == 2);
  CHECK_FALSE(r.spec.train);
  CHECK(r.spec.backend == "onnxruntime");
  CHECK(r.ms.size() == 2);
  CHECK(r.images_per_s > 0);
  CHECK(res.machine.framework == "onnxruntime");

  // Nothing to run: no process, no rows.
  CHECK(run_onnxruntime_peer(peer, script, {specs[1]}, 1, &notes).runs.empty());
}
