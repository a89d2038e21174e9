// The code snippets of docs/cpp-api.md, kept compiling and checked for values: tensors and
// autograd, a Module with an optimizer and a schedule, a strict backend preference, a checkpoint
// round trip, synchronous data parallelism on a one-rank (local) communicator, a custom Module
// and the Trainer on synthetic data.
//   ctest --test-dir build -R docs.test_docs_snippets
#include "tests/support/testing.h"

#include "dist/comm.h"
#include "dist/comm_thread.h"
#include "dist/sync.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/optim.h"
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
