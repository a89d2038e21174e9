// `kiln bench --model file.onnx`: a zoo net exported to ONNX, imported and timed by the harness
// (forward and forward+backward, 1-2 iterations), the imported net giving the zoo net's output;
// unknown files and unsupported ops fail up front with the file and op named.
//   ctest --test-dir build -R bench.test_onnx_bench
#include "tests/support/testing.h"

#include <fstream>

#include "bench/harness/convnet.h"
#include "io/onnx/onnx.h"
#include "nets/zoo.h"

using namespace kiln;

TEST_CASE("bench times an exported zoo net through the .onnx path, and the import matches the zoo net") {
  test::TempDir dir("onnx_bench");
  const std::string path = (dir.path / "resnet56.onnx").string();
  ModulePtr net = nets::build("resnet56");
  onnx::save(onnx::export_module(*net, {2, 3, 32, 32}), path);
  CHECK(bench::is_onnx_model(path));
  CHECK_FALSE(bench::is_onnx_model("resnet56"));

  for (bool train : {false, true}) {
    bench::RunSpec s;
    s.model = path;
    s.batch = 3;  // the graph's batch dim is symbolic: any batch runs
    s.train = train;
    s.iters = 2;
    s.warmup = 0;
    bench::RunResult r = bench::run(s);
    CHECK(r.ms.size() == 2);
    CHECK(r.ms_median > 0);
    CHECK(r.images_per_s > 0);
    CHECK(r.parameters >= net->num_parameters());  // batch-norm statistics are parameters of the import
  }

  // Same weights, same output: the imported graph against the zoo net it came from.
  ModulePtr back = onnx::import_model(onnx::load(path));
  net->eval();
  back->eval();
  Tensor x = from_vector(std::vector<float>(3 * 3 * 32 * 32, 0.25f), {3, 3, 32, 32});
  NoGradGuard g;
  CHECK_CLOSE((*back)(x), (*net)(x), 1e-5, 1e-5);
}

TEST_CASE("bench refuses a missing .onnx file and an unsupported op by name") {
  test::TempDir dir("onnx_bench_err");
  bench::RunSpec s;
  s.model = (dir.path / "missing.onnx").string();
  s.iters = 1;
  s.warmup = 0;
  CHECK_THROWS_KILN(bench::run(s), "missing.onnx");

  onnx::Model m;
  onnx::Node n;
  n.name = "einsum_1";
  n.op_type = "Einsum";
  n.inputs = {"input"};
  n.outputs = {"output"};
  m.graph.nodes.push_back(n);
  m.graph.inputs.push_back(onnx::ValueInfo{"input", onnx::kFloat, {-1, 3, 8, 8}, {"N", "", "", ""}});
  m.graph.outputs.push_back(onnx::ValueInfo{"output", onnx::kFloat, {-1, 3, 8, 8}, {"N", "", "", ""}});
  s.model = (dir.path / "einsum.onnx").string();
  onnx::save(m, s.model);
  CHECK_THROWS_KILN(bench::run(s), "unsupported op Einsum node 'einsum_1'");
}
