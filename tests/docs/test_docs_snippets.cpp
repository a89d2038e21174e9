// The code snippets of docs/cpp-api.md, kept compiling and checked for values: tensors and
// autograd, a Module with an optimizer and a schedule, a strict backend preference, a checkpoint
// round trip, synchronous data parallelism on a one-rank (local) communicator, a custom Module
// and the Trainer on synthetic data.
//   ctest --test-dir build -R docs.test_docs_snippets
#include "tests/support/testing.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "dist/comm.h"
#include "dist/comm_thread.h"
#include "dist/sync.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/optim.h"
#include "engine/function.h"
#include "engine/gradcheck.h"
#include "engine/ops/index.h"
#include "engine/ops/pool.h"
#include "engine/print.h"
#include "io/formats/safetensors.h"
#include "io/onnx/onnx.h"
#include "engine/threads.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "engine/schedule.h"
#include "io/data/datasets.h"
#include "io/formats/checkpoint.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "nets/zoo.h"
#include "train/trainer.h"

using namespace kiln;

TEST_CASE("docs: tensors and autograd") {
  manual_seed(1);
  Tensor x = randn({8, 16}).requires_grad_();
  Tensor loss = ops::sum(ops::relu(x) * 2.0);
  loss.backward();  // x.grad() = 2 where x > 0, else 0
  std::vector<double> xv = x.to_vector(), gv = x.grad().to_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(gv[i] == (xv[i] > 0 ? 2.0 : 0.0));

  Tensor nhwc = randn({2, 3, 4, 5}).contiguous(MemoryFormat::channels_last);
  CHECK(nhwc.sizes() == Shape{2, 3, 4, 5});  // sizes stay N, C, H, W
  CHECK(nhwc.is_contiguous(MemoryFormat::channels_last));
  CHECK(nhwc.stride(1) == 1);                // channels innermost in memory
}

TEST_CASE("docs: integer and boolean tensors, printing, threads") {
  manual_seed(2);
  Tensor logits = randn({32, 10});
  Tensor target = from_vector(std::vector<double>(32, 3), {32}, DType::int64);
  Tensor hits = ops::argmax(logits, 1) == target;    // boolean [32]
  int64_t correct = int64_t(ops::sum(hits).item());  // sum of booleans: int64
  Tensor scaled = target * 2 + 1;                    // int64; target * 0.5 would be float32
  CHECK(hits.dtype() == DType::boolean);
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

  CHECK(to_string(arange(20)) ==
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n        18, 19])");
  const int threads = get_num_threads();
  set_num_threads(1);
  CHECK(get_num_threads() == 1);
  set_num_threads(threads);
  CHECK_THROWS_KILN(set_num_threads(0), "set_num_threads: the number of threads must be in [1, 4096], got 0");
}

namespace {
struct Cube : autograd::Function<Cube> {
  static const char* name() { return "Cube"; }
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    const Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * x * x * 3.0};
  }
};
}  // namespace

TEST_CASE("docs: indexing, a custom Function, ModuleHolder, init") {
  manual_seed(4);
  Tensor x = randn({4, 5}).requires_grad_();
  ops::ValuesIndices top = ops::topk(x, 2, /*dim=*/1);                     // values [4, 2], indices int64
  Tensor picked = ops::gather(x, 1, top.indices);                     // == top.values
  Tensor masked = ops::masked_fill(x, x < 0, 0.0);                    // x < 0: a boolean tensor
  (ops::sum(picked) + ops::sum(masked)).backward();
  Tensor counts = zeros({5}, DType::int64);
  ops::index_put_(counts, {top.indices.flatten()}, ones({8}, DType::int64), /*accumulate=*/true);
  CHECK(picked.to_vector() == top.values.to_vector());
  CHECK(ops::sum(counts).item() == 8);
  const std::vector<double> xv = x.to_vector(), gv = x.grad().to_vector(), iv = top.indices.to_vector();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 5; ++c) {
      const bool top2 = iv[size_t(r * 2)] == double(c) || iv[size_t(r * 2 + 1)] == double(c);
      CHECK(gv[size_t(r * 5 + c)] == (top2 ? 1.0 : 0.0) + (xv[size_t(r * 5 + c)] < 0 ? 0.0 : 1.0));
    }

  Tensor xc = randn({3}, DType::float64).requires_grad_();
  std::string err = autograd::gradcheck([](const std::vector<Tensor>& in) { return Cube::apply(in[0]); }, {xc});
  CHECK(err == "");

  ModuleHolder<Conv2d> conv(3, 16, 3);          // Conv2d(3, 16, kernel_size=3)
  ModuleHolder<Linear> fc(16, 10);
  Tensor y = fc(ops::adaptive_avg_pool2d(conv(randn({2, 3, 8, 8})), {1, 1}).flatten(1));
  Tensor w = conv->weight();
  CHECK(y.sizes() == Shape{2, 10});
  CHECK(w.sizes() == Shape{16, 3, 3, 3});

  auto net = nets::build("resnet18");
  net->apply([](Module& m) {
    if (auto* c = dynamic_cast<Conv2d*>(&m)) init::kaiming_normal_(c->weight(), 0, init::FanMode::fan_out,
                                                                   init::Nonlinearity::relu);
  });
  auto* stem = dynamic_cast<Conv2d*>(net->named_modules()[1].second.get());
  REQUIRE(stem);
  double sq = 0;
  for (double v : stem->weight().to_vector()) sq += v * v;
  CHECK(std::sqrt(sq / double(stem->weight().numel())) == doctest::Approx(std::sqrt(2.0 / (64 * 49))).epsilon(0.05));
}

TEST_CASE("docs: safetensors and ONNX round trip") {
  test::TempDir dir("docs_onnx");
  auto net = nets::build("mnist-cnn");
  save_module(*net, dir / "mnist.safetensors");
  onnx::Model m = onnx::export_module(*net, {1, 1, 28, 28});
  onnx::save(m, dir / "mnist.onnx");
  ModulePtr back = onnx::import_model(onnx::load(dir / "mnist.onnx"));
  net->eval();
  back->eval();
  Tensor x = randn({2, 1, 28, 28});
  CHECK_CLOSE((*back)(x), (*net)(x), 1e-5, 1e-5);
  auto again = nets::build("mnist-cnn");
  load_module(*again, dir / "mnist.safetensors");
  again->eval();
  CHECK_CLOSE((*again)(x), (*net)(x), 0, 0);
}

TEST_CASE("docs: a seeded split and a range-for over the loader") {
  Splits data = open_dataset_dir("synthetic:1x4x4:3:50");
  DataLoaderOptions opts;
  opts.batch_size = 8;
  opts.seed = 1;
  auto parts = random_split(data.train, {0.9, 0.1}, /*seed=*/42);   // train and validation
  DataLoader train_loader(parts[0], opts, data.default_transform(true));
  int64_t seen = 0;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (Batch& batch : train_loader) seen += batch.size;  // epoch 0, then epoch 1
  CHECK(seen == 2 * parts[0]->size());
  CHECK(parts[0]->size() + parts[1]->size() == data.train->size());
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

TEST_CASE("docs: a Module, an optimizer and a schedule") {
  manual_seed(2);
  auto net = make<Sequential>();
  net->add(make<Linear>(4, 8)).add(make<ReLU>()).add(make<Linear>(8, 3));
  CrossEntropyLoss criterion;
  Tensor x = randn({16, 4});
  Tensor y = from_vector(std::vector<double>(16, 1.0), {16}, DType::int64);

  optim::OptimizerConfig oc;
  oc.name = "sgd";
  oc.lr = 0.1;
  auto opt = optim::make_optimizer(oc, net->named_parameters());
  auto sched = optim::make_schedule("step:1:0.5", /*steps_per_epoch=*/5, /*total_steps=*/10);
  double first = 0, last = 0;
  net->train();
  for (int step = 0; step < 10; ++step) {
    opt->set_lr(oc.lr * sched->factor(opt->steps()));
    Tensor loss = criterion((*net)(x), y);
    loss.backward();
    opt->step();
    opt->zero_grad();
    (step == 0 ? first : last) = loss.item();
  }
  CHECK(last < first);
  CHECK(opt->lr() == doctest::Approx(0.05));  // halved after the first epoch of 5 steps

  // state_dict round trip into a fresh net with the same structure.
  auto copy = make<Sequential>();
  copy->add(make<Linear>(4, 8)).add(make<ReLU>()).add(make<Linear>(8, 3));
  copy->load_state_dict(net->state_dict());
  net->eval();
  copy->eval();
  CHECK_CLOSE((*copy)(x), (*net)(x), 0, 0);
}

TEST_CASE("docs: backend preference and a checkpoint") {
  manual_seed(3);
  Tensor a = randn({32, 32});
  Tensor on_ref, on_native;
  {
    BackendGuard guard("ref", /*strict=*/true);  // this thread, this scope: ref kernels only
    on_ref = ops::relu(a);
  }
  {
    BackendGuard guard("native", /*strict=*/true);
    on_native = ops::relu(a);
  }
  CHECK_CLOSE(on_native, on_ref, 0, 0);

  test::TempDir dir("docs");
  auto net = make<Linear>(3, 2);
  Checkpoint ck;
  ck.weights = net->state_dict();
  ck.state_json = R"({"step": 7})";
  save_checkpoint(dir / "ckpt-00000007", ck);
  CHECK(latest_checkpoint(dir.path.string()) == dir / "ckpt-00000007.json");
  Checkpoint back = load_checkpoint(dir / "ckpt-00000007");
  auto other = make<Linear>(3, 2);
  other->load_state_dict(back.weights);
  CHECK_CLOSE(other->weight(), net->weight(), 0, 0);
}

TEST_CASE("docs: DataParallel on a one-rank communicator") {
  manual_seed(4);
  auto comm = dist::make_communicator("local");
  dist::CommThread thread;
  auto net = make<Linear>(4, 2);
  dist::DataParallel dp(*net, *comm, thread, {});
  Tensor x = randn({8, 4});
  REQUIRE(dp.begin_step(/*have_batch=*/true) == 1);
  Tensor loss = ops::sum((*net)(x));
  loss.backward();
  Tensor before = net->weight().grad().clone();
  dp.finish_gradients();  // average over 1 rank: unchanged
  CHECK_CLOSE(net->weight().grad(), before, 1e-6, 1e-6);
  CHECK(dp.begin_step(/*have_batch=*/false) == 0);  // every rank is out of batches
}

// A user's own layer: parameters registered by name, forward, repr.
class TwoLayer : public Module {
 public:
  TwoLayer(int64_t in, int64_t hidden, int64_t out) {
    fc1_ = register_module("fc1", make<Linear>(in, hidden));
    fc2_ = register_module("fc2", make<Linear>(hidden, out));
    register_parameter("scale", ones({out}).requires_grad_());
  }
  Tensor forward(const Tensor& x) override { return (*fc2_)(ops::relu((*fc1_)(x))) * param("scale"); }
  std::string repr() const override { return "TwoLayer"; }

 private:
  std::shared_ptr<Linear> fc1_, fc2_;
};

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
}

TEST_CASE("docs: the Trainer on synthetic data") {
  test::TempDir dir("docs_train");
  Splits data = open_dataset_dir("synthetic:1x28x28:10:64");
  train::TrainConfig cfg;
  cfg.model_name = "mnist-cnn";
  cfg.epochs = 1;
  cfg.batch_size = 32;
  cfg.optimizer.name = "adam";
  cfg.optimizer.lr = 1e-3;
  cfg.workers = 0;
  cfg.progress = false;
  cfg.epoch_lines = false;
  cfg.logdir = dir.path.string();
  train::Trainer trainer(nets::build("mnist-cnn"), data, cfg);
  trainer.fit();
  train::EvalResult test = trainer.evaluate(*data.test);
  CHECK(test.samples > 0);
  CHECK(trainer.step() == 2);
  CHECK(!latest_checkpoint(dir.path.string()).empty());
}
