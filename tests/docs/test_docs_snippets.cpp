// The code snippets of docs/cpp-api.md, compiled as the docs print them and checked for values.
// At build time tests/docs/extract_snippets.py copies each block marked <!-- snippet: NAME --> into
// docs_snippets/NAME.inc (their #include lines into docs_snippets/includes.h); each TEST_CASE below
// sets up what its snippet takes as given, includes the snippet, then checks what it computed by
// the snippet's own variable names. A snippet that no longer compiles fails the build (the error
// names NAME.inc and the docs' line); one that computes something else fails here. The snippets
// whose inputs a test cannot supply (a data set path, a second rank, kernel arguments) are only
// compiled, inside functions nothing calls.
//   ctest --test-dir build -R docs.test_docs_snippets
#include "tests/support/testing.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "docs_snippets/includes.h"
// What the snippets use without an #include of their own (the docs name those headers in the
// text around them), and what the checks use.
#include "dist/ps.h"
#include "engine/ops/pool.h"
#include "engine/threads.h"
#include "io/data/synthetic.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/loss.h"
#include "layers/pool.h"
#include "layers/rnn.h"

using namespace kiln;

namespace {

// Runs a snippet that writes relative paths ("runs/docs", "mnist.onnx") in a temporary directory,
// restoring the working directory after (tests run one at a time, on one thread).
struct InDir {
  std::filesystem::path old = std::filesystem::current_path();
  explicit InDir(const std::filesystem::path& dir) { std::filesystem::current_path(dir); }
  ~InDir() { std::filesystem::current_path(old); }
};

}  // namespace

TEST_CASE("docs: tensors and autograd") {
#include "docs_snippets/tensors_autograd.inc"
  std::vector<double> xv = x.to_vector(), gv = x.grad().to_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(gv[i] == (xv[i] > 0 ? 2.0 : 0.0));
  CHECK(loss.item() == doctest::Approx(2 * ops::sum(ops::relu(x)).item()));
  CHECK(nhwc.sizes() == Shape{2, 3, 4, 5});  // sizes stay N, C, H, W
  CHECK(nhwc.is_contiguous(MemoryFormat::channels_last));
  CHECK(nhwc.stride(1) == 1);                // channels innermost in memory
}

TEST_CASE("docs: integer and boolean tensors, printing, threads") {
  manual_seed(2);
#include "docs_snippets/integer_tensors.inc"
  CHECK(hits.dtype() == DType::boolean);
  CHECK(hits.sizes() == Shape{32});
  CHECK(ops::sum(hits).dtype() == DType::int64);
  int64_t want = 0;
  const std::vector<double> lv = logits.to_vector();
  for (int64_t r = 0; r < 32; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < 10; ++c)
      if (lv[size_t(r * 10 + c)] > lv[size_t(r * 10 + best)]) best = c;
    want += best == 3;
  }
  CHECK(correct == want);
  CHECK(scaled.dtype() == DType::int64);
  CHECK(scaled.to_vector() == std::vector<double>(32, 7));
  CHECK((target * 0.5).dtype() == DType::float32);

  const std::string printed =
#include "docs_snippets/print_arange.inc"
      ;
  CHECK(to_string(arange(20)) == printed);
  const int threads = get_num_threads();
  set_num_threads(1);
  CHECK(get_num_threads() == 1);
  set_num_threads(threads);
  CHECK_THROWS_KILN(set_num_threads(0), "set_num_threads: the number of threads must be in [1, 4096], got 0");
}

TEST_CASE("docs: indexing") {
  manual_seed(4);
#include "docs_snippets/indexing.inc"
  CHECK(top.values.sizes() == Shape{4, 2});
  CHECK(top.indices.dtype() == DType::int64);
  CHECK(picked.to_vector() == top.values.to_vector());
  CHECK(ops::sum(counts).item() == 8);
  const std::vector<double> xv = x.to_vector(), gv = x.grad().to_vector(), iv = top.indices.to_vector();
  const std::vector<double> cv = counts.to_vector(), mv = masked.to_vector();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 5; ++c) {
      const bool top2 = iv[size_t(r * 2)] == double(c) || iv[size_t(r * 2 + 1)] == double(c);
      CHECK(gv[size_t(r * 5 + c)] == (top2 ? 1.0 : 0.0) + (xv[size_t(r * 5 + c)] < 0 ? 0.0 : 1.0));
      CHECK(mv[size_t(r * 5 + c)] == (xv[size_t(r * 5 + c)] < 0 ? 0.0 : xv[size_t(r * 5 + c)]));
    }
  for (int64_t c = 0; c < 5; ++c) CHECK(cv[size_t(c)] == double(std::count(iv.begin(), iv.end(), double(c))));
}

TEST_CASE("docs: a custom autograd Function and gradcheck") {
  manual_seed(4);
#include "docs_snippets/custom_function.inc"
  CHECK(err == "");
  Tensor y = Cube::apply(x);
  CHECK_CLOSE(y, x * x * x, 0, 0);
}

TEST_CASE("docs: recurrent layers") {
  manual_seed(6);
#include "docs_snippets/rnn_layers.inc"
  CHECK(r.output.sizes() == Shape{4, 6, 64});
  CHECK(r.h_n.sizes() == Shape{4, 4, 32});
  CHECK(r.c_n.sizes() == Shape{4, 4, 32});
  // The sequence of length 1: zeros after its first step, in both directions' halves.
  CHECK(ops::amax(ops::abs(r.output.select(0, 3).narrow(0, 1, 5))).item() == 0.0);
  CHECK(h1.sizes() == Shape{4, 32});
  CHECK(c1.sizes() == Shape{4, 32});
}

TEST_CASE("docs: ModuleHolder and init") {
  manual_seed(4);
  {
#include "docs_snippets/module_holder.inc"
    CHECK(y.sizes() == Shape{2, 10});
    CHECK(w.sizes() == Shape{16, 3, 3, 3});
  }
#include "docs_snippets/init_apply.inc"
  // The stem convolution (64 x 3 x 7 x 7) drawn from kaiming_normal_(fan_out): std sqrt(2 / (64 * 49)).
  auto* stem = dynamic_cast<Conv2d*>(net->named_modules()[1].second.get());
  REQUIRE(stem);
  double sq = 0;
  for (double v : stem->weight().to_vector()) sq += v * v;
  CHECK(std::sqrt(sq / double(stem->weight().numel())) == doctest::Approx(std::sqrt(2.0 / (64 * 49))).epsilon(0.05));
}

TEST_CASE("docs: safetensors and ONNX round trip") {
  test::TempDir dir("docs_onnx");
  InDir in(dir.path);
#include "docs_snippets/save_export.inc"
  net->eval();
  back->eval();
  Tensor x = randn({2, 1, 28, 28});
  CHECK_CLOSE((*back)(x), (*net)(x), 1e-5, 1e-5);
  auto again = nets::build("mnist-cnn");
  load_module(*again, "mnist.safetensors");
  again->eval();
  CHECK_CLOSE((*again)(x), (*net)(x), 0, 0);
}

// Reads a data set from a path this machine need not have: compiled only.
[[maybe_unused]] static void docs_dataloader_compiles() {
#include "docs_snippets/dataloader.inc"
}

TEST_CASE("docs: a seeded split and a range-for over the loader") {
  Splits data = open_dataset_dir("synthetic:1x4x4:3:50");
  DataLoaderOptions opts;
  opts.batch_size = 8;
  opts.seed = 1;
#include "docs_snippets/random_split.inc"
  CHECK(train_loader.epoch() == 1);  // the snippet ran epochs 0 and 1
  CHECK(parts[0]->size() + parts[1]->size() == data.train->size());
  int64_t seen = 0;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (Batch& batch : train_loader) seen += batch.size;  // epochs 2 and 3
  CHECK(seen == 2 * parts[0]->size());
  CHECK(train_loader.epoch() == 3);
}

// docs/cpp-api.md names every header kiln/kiln.h includes (its header reference).
TEST_CASE("docs: cpp-api.md covers every header of kiln.h") {
  const std::string root = KILN_SOURCE_DIR;
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in.good());
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
  };
  const std::string api = read(root + "/include/kiln/kiln.h"), doc = read(root + "/docs/cpp-api.md");
  std::istringstream lines(api);
  std::string line;
  int headers = 0;
  while (std::getline(lines, line)) {
    const size_t a = line.find("#include \""), b = line.rfind('"');
    if (a != 0 || b <= 10) continue;
    const std::string h = line.substr(10, b - 10);
    ++headers;
    CHECK_MESSAGE(doc.find("`" + h + "`") != std::string::npos, h, " is in kiln.h but not in docs/cpp-api.md");
  }
  CHECK(headers > 40);
}

TEST_CASE("docs: a Sequential with a loss") {
  manual_seed(3);
  Tensor images = randn({2, 1, 28, 28});
  Tensor labels = from_vector(std::vector<double>{7, 2}, {2}, DType::int64);
#include "docs_snippets/sequential_loss.inc"
  // Freshly initialised, the ten logits are nearly equal: the loss is near log(10).
  CHECK(loss.item() == doctest::Approx(std::log(10.0)).epsilon(0.3));
  for (auto& np : net->named_parameters()) {
    CAPTURE(np.first);
    REQUIRE(np.second.grad().defined());
    CHECK(np.second.grad().sizes() == np.second.sizes());
  }
}

TEST_CASE("docs: a Module, an optimizer and a schedule") {
  manual_seed(2);
  auto net = make<Sequential>();
  net->add(make<Linear>(4, 8)).add(make<ReLU>()).add(make<Linear>(8, 3));
  CrossEntropyLoss criterion;
  Tensor x = randn({16, 4});
  Tensor y = from_vector(std::vector<double>(16, 1.0), {16}, DType::int64);
  net->train();
  const double first = criterion((*net)(x), y).item();
#include "docs_snippets/optim_schedule.inc"
  const double last = criterion((*net)(x), y).item();
  CHECK(last < first);
  CHECK(opt->steps() == 10);
  CHECK(opt->lr() == doctest::Approx(0.05));  // halved after the first epoch of 5 steps

  // state_dict round trip into a fresh net with the same structure.
  auto copy = make<Sequential>();
  copy->add(make<Linear>(4, 8)).add(make<ReLU>()).add(make<Linear>(8, 3));
  copy->load_state_dict(net->state_dict());
  net->eval();
  copy->eval();
  CHECK_CLOSE((*copy)(x), (*net)(x), 0, 0);
}

TEST_CASE("docs: a strict backend preference") {
  manual_seed(3);
  Tensor a = randn({32, 32});
#include "docs_snippets/backend_guard.inc"
  CHECK_CLOSE(on_native, on_ref, 0, 0);
  CHECK_CLOSE(on_ref, ops::clamp_min(a, 0.0), 0, 0);
}

// Dispatcher calls with the kernels' own arguments: compiled only (the signatures the docs show).
[[maybe_unused]] static void docs_dispatch_calls_compile(DeviceType dev, const ConvDesc& desc,
                                                         KernelPayload& payload, const float* src,
                                                         const float* wei, const float* bias, float* dst,
                                                         const GemmDesc& gemm_desc) {
#include "docs_snippets/dispatch_calls.inc"
  (void)c;
  (void)table;
}

TEST_CASE("docs: a checkpoint") {
  test::TempDir tmp("docs");
  const std::string dir = tmp.path.string();
  auto net = make<Linear>(3, 2);
  auto other = make<Linear>(3, 2);
#include "docs_snippets/checkpoint.inc"
  CHECK(newest == tmp / "ckpt-00000007.json");
  CHECK_CLOSE(other->weight(), net->weight(), 0, 0);
  CHECK_CLOSE(other->bias(), net->bias(), 0, 0);
}

TEST_CASE("docs: DataParallel on a one-rank communicator") {
  manual_seed(4);
  auto net = make<Linear>(4, 2);
  CrossEntropyLoss criterion;
  auto data = std::make_shared<TensorDataset>(randn({16, 4}),
                                              from_vector(std::vector<double>(16, 1), {16}, DType::int64));
  DataLoaderOptions lo;
  lo.batch_size = 8;
  lo.workers = 0;
  DataLoader loader(data, lo);
  loader.start_epoch(0);
  Batch batch;
  optim::OptimizerConfig oc;
  oc.name = "sgd";
  oc.lr = 0.1;
  auto opt = optim::make_optimizer(oc, net->named_parameters());
  const Tensor w0 = net->weight().clone();
#include "docs_snippets/data_parallel.inc"
  CHECK(opt->steps() == 2);  // one per batch, then every rank was out of batches
  CHECK(ops::amax(ops::abs(net->weight() - w0)).item() > 0);

  Tensor x = randn({8, 4});
  REQUIRE(dp.begin_step(/*have_batch=*/true) == 1);
  Tensor loss = ops::sum((*net)(x));
  loss.backward();
  Tensor before = net->weight().grad().clone();
  dp.finish_gradients();  // average over 1 rank: unchanged
  CHECK_CLOSE(net->weight().grad(), before, 1e-6, 1e-6);
  CHECK(dp.begin_step(/*have_batch=*/false) == 0);  // every rank is out of batches
}

// A parameter server needs a second rank: compiled only.
[[maybe_unused]] static void docs_parameter_server_compiles(dist::Communicator* comm, Module* net) {
#include "docs_snippets/parameter_server.inc"
}

// A user's own layer: parameters registered by name, forward, repr.
#include "docs_snippets/custom_module.inc"

TEST_CASE("docs: a custom Module") {
  manual_seed(5);
  auto net = make<TwoLayer>(4, 8, 3);
  net->assign_paths();
  std::vector<std::string> names;
  for (auto& [name, p] : net->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  CHECK(net->num_parameters() == 3 + 4 * 8 + 8 + 8 * 3 + 3);
  Tensor y = (*net)(randn({2, 4}));
  CHECK(y.sizes() == Shape{2, 3});
  CHECK(net->repr() == "TwoLayer");
}

TEST_CASE("docs: the Trainer on synthetic data") {
  test::TempDir dir("docs_train");
  InDir in(dir.path);  // the snippet's logdir is "runs/docs"
#include "docs_snippets/trainer.inc"
  CHECK(test.samples > 0);
  CHECK(trainer.step() == 2);
  CHECK(trainer.history().size() == 1);
  CHECK(!latest_checkpoint(cfg.logdir).empty());
}
