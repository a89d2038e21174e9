// Synchronous data parallelism on 2, 3 and 4 ranks: N ranks of batch b train exactly like one
// process of batch N·b (buckets, overlap on and off, fp16 compression, synchronised batch norm,
// the Trainer's sharded loader); ranks out of batches join; unused parameters; a model that
// differs across ranks is an error on every rank.
//   ctest --test-dir build -L mpi -R sync
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "dist/comm.h"
#include "dist/comm_thread.h"
#include "dist/sync.h"
#include "dist/sync_bn.h"
#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "engine/ops/reduce.h"
#include "engine/optim.h"
#include "engine/random.h"
#include "io/data/datasets.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "train/trainer.h"
#include "tests/mpi/mpi_testing.h"
#include "tests/mpi/trainer_testing.h"

using namespace kiln;

namespace {

std::unique_ptr<dist::Communicator> world() {
  dist::CommOptions o;
  o.timeout_s = 60;
  return dist::make_communicator("mpi", o);
}

ModulePtr mlp() {
  manual_seed(11);
  auto s = std::make_shared<Sequential>();
  s->add(std::make_shared<Linear>(6, 16));
  s->add(std::make_shared<ReLU>());
  s->add(std::make_shared<Linear>(16, 5));
  return s;
}

ModulePtr conv_bn() {
  manual_seed(12);
  auto s = std::make_shared<Sequential>();
  s->add(std::make_shared<Conv2d>(3, 4, 3, 1, 1));
  s->add(std::make_shared<BatchNorm2d>(4));
  s->add(std::make_shared<ReLU>());
  s->add(std::make_shared<Flatten>());
  s->add(std::make_shared<Linear>(4 * 5 * 5, 3));
  return s;
}

// Rows [begin, end) of x.
Tensor rows(const Tensor& x, int64_t begin, int64_t end) { return x.narrow(0, begin, end - begin).contiguous(); }


// k steps of SGD with momentum: `dp` on this rank's share of each global batch, and a reference
// on the whole batch in this process; returns the largest relative difference of the states.
double train_both(ModulePtr (*make)(), const Shape& sample, int64_t classes, dist::SyncOptions so, bool sync_bn,
                  dist::Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  const int64_t b = 3, steps = 4;
  ModulePtr net = make(), ref = make();
  dist::CommThread thread;
  if (sync_bn) dist::enable_sync_batch_norm(*net, comm, thread);
  dist::DataParallel dp(*net, comm, thread, so);
  auto opt = optim::make_optimizer({"sgd", 0.05, 0.9}, net->named_parameters());
  auto ref_opt = optim::make_optimizer({"sgd", 0.05, 0.9}, ref->named_parameters());
  Generator gen(99);
  for (int64_t t = 0; t < steps; ++t) {
    Shape shape = sample;
    shape.insert(shape.begin(), b * n);
    Tensor x = randn(shape, {}, &gen);
    std::vector<double> labels;
    for (int64_t i = 0; i < b * n; ++i) labels.push_back(double((i * 7 + t) % classes));
    Tensor y = from_vector(labels, {b * n}, DType::int64);

    CHECK(dp.begin_step(true) == n);
    opt->zero_grad();
    ops::cross_entropy((*net)(rows(x, r * b, (r + 1) * b)), rows(y, r * b, (r + 1) * b)).backward();
    dp.finish_gradients();
    opt->step();

    ref_opt->zero_grad();
    ops::cross_entropy((*ref)(x), y).backward();
    ref_opt->step();
  }
  return test::max_state_diff(*net, *ref);
}

}  // namespace

TEST_CASE("sync: N ranks of batch b train like one process of batch N*b") {
  auto comm = world();
  dist::SyncOptions so;
  SUBCASE("one bucket, overlap") { CHECK(train_both(mlp, {6}, 5, so, false, *comm) < 1e-5); }
  SUBCASE("a bucket per tensor, overlap") {
    so.bucket_mb = 1e-6;
    CHECK(train_both(mlp, {6}, 5, so, false, *comm) < 1e-5);
  }
  SUBCASE("no overlap") {
    so.overlap = false;
    so.bucket_mb = 1e-3;
    CHECK(train_both(mlp, {6}, 5, so, false, *comm) < 1e-5);
  }
  SUBCASE("fp16 compression: float16 rounding only") {
    so.fp16_compression = true;
    const double d = train_both(mlp, {6}, 5, so, false, *comm);
    CHECK(d < 5e-3);
  }
  SUBCASE("synchronised batch norm matches the large batch") {
    CHECK(train_both(conv_bn, {3, 5, 5}, 3, so, true, *comm) < 1e-4);
  }
}

TEST_CASE("sync: without sync-bn each rank normalises its own batch, so it differs from the large batch") {
  auto comm = world();
  CHECK(train_both(conv_bn, {3, 5, 5}, 3, {}, false, *comm) > 1e-4);
}

TEST_CASE("sync: buckets in reverse registration order, bounded by size") {
  auto comm = world();
  ModulePtr net = mlp();  // 0.weight [16,6], 0.bias, 2.weight [5,16], 2.bias
  dist::CommThread thread;
  dist::SyncOptions so;
  so.bucket_mb = 100.0 * 4 / (1024 * 1024);  // 100 floats
  dist::DataParallel dp(*net, *comm, thread, so);
  auto names = dp.bucket_names();
  // A bucket closes once it holds at least the cap: 5 + 80 + 16 floats, then the last tensor.
  REQUIRE(names.size() == 2);
  CHECK(names[0] == std::vector<std::string>{"2.bias", "2.weight", "0.bias"});
  CHECK(names[1] == std::vector<std::string>{"0.weight"});
}

TEST_CASE("sync: parameters start as rank 0's") {
  auto comm = world();
  manual_seed(100 + uint64_t(comm->rank()));  // different on every rank
  auto net = std::make_shared<Linear>(4, 3);
  dist::CommThread thread;
  dist::DataParallel dp(*net, *comm, thread);
  Tensor w = net->named_parameters()[0].second;
  Tensor all = zeros({w.numel() * comm->size()});
  comm->allgather(w.contiguous(), all, "weights");
  auto v = all.to_vector_of<float>();
  for (int r = 1; r < comm->size(); ++r)
    for (int64_t i = 0; i < w.numel(); ++i) CHECK(v[size_t(r * w.numel() + i)] == v[size_t(i)]);
}

TEST_CASE("sync: a rank out of batches joins with zero gradients until all are done") {
  auto comm = world();
  const int n = comm->size(), r = comm->rank();
  ModulePtr net = mlp(), ref = mlp();
  dist::CommThread thread;
  dist::DataParallel dp(*net, *comm, thread);
  auto opt = optim::make_optimizer({"sgd", 0.1, 0.0}, net->named_parameters());
  auto ref_opt = optim::make_optimizer({"sgd", 0.1, 0.0}, ref->named_parameters());
  // Rank k has k + 1 batches; the reference applies, at step t, the mean gradient of the ranks
  // that still have one.
  auto batch = [](int rank, int t) {
    Generator g(uint64_t(1000 + rank * 10 + t));
    return std::make_pair(randn({2, 6}, {}, &g), from_vector(std::vector<double>{double(rank % 5), double(t % 5)}, {2}, DType::int64));
  };
  int steps = 0;
  for (int t = 0;; ++t) {
    const bool have = t < r + 1;
    const int active = dp.begin_step(have);
    if (active == 0) break;
    CHECK(active == n - t);
    ++steps;
    opt->zero_grad();
    auto [x, y] = batch(have ? r : 0, have ? t : 0);
    Tensor loss = ops::cross_entropy((*net)(x), y);
    if (!have) loss = ops::mul(loss, 0.0);
    loss.backward();
    dp.finish_gradients();
    opt->step();

    ref_opt->zero_grad();
    Tensor total;
    for (int k = t; k < n; ++k) {  // ranks k >= t still had a batch at step t
      auto [xk, yk] = batch(k, t);
      Tensor l = ops::cross_entropy((*ref)(xk), yk);
      total = total.defined() ? ops::add(total, l) : l;
    }
    ops::mul(total, 1.0 / double(n - t)).backward();
    ref_opt->step();
  }
  CHECK(steps == n);
  CHECK(test::max_state_diff(*net, *ref) < 1e-5);
}

namespace {
// Two branches; a rank may skip the second (a parameter without a gradient there).
class Branchy : public Module {
 public:
  explicit Branchy(bool use_b) : use_b_(use_b) {
    a_ = register_module("a", std::make_shared<Linear>(4, 2));
    b_ = register_module("b", std::make_shared<Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override { return use_b_ ? ops::add((*a_)(x), (*b_)(x)) : (*a_)(x); }
  std::string repr() const override { return "Branchy"; }

 private:
  bool use_b_;
  std::shared_ptr<Linear> a_, b_;
};
}  // namespace

TEST_CASE("sync: a parameter unused on some ranks gets their zeros, no hang") {
  auto comm = world();
  manual_seed(5);
  auto net = std::make_shared<Branchy>(comm->rank() == 0);
  dist::CommThread thread;
  dist::DataParallel dp(*net, *comm, thread);
  dp.begin_step(true);
  Tensor x = full({3, 4}, 1.0);
  ops::sum((*net)(x)).backward();  // d/dW of sum(W x) over a batch of 3 ones: 3 everywhere
  dp.finish_gradients();
  for (const auto& [name, p] : net->named_parameters()) {
    REQUIRE(p.grad().defined());
    const double expect = (name[0] == 'a' ? 1.0 : 1.0 / comm->size()) * (name.find("weight") != std::string::npos ? 3 : 3);
    for (double v : p.grad().to_vector_of<double>()) CHECK(v == doctest::Approx(expect));
  }
}

TEST_CASE("sync: a model that differs across ranks is an error on every rank, naming it") {
  auto comm = world();
  if (comm->size() < 2) return;
  manual_seed(1);
  auto net = std::make_shared<Linear>(4, comm->rank() == 1 ? 7 : 3);
  dist::CommThread thread;
  std::string msg;
  try {
    dist::DataParallel dp(*net, *comm, thread);
  } catch (const Error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.find("differs across ranks") != std::string::npos);
  CHECK(msg.find("rank 1 has parameter 'weight' float32[7, 4] where rank 0 has parameter 'weight' float32[3, 4]") !=
        std::string::npos);
}


TEST_CASE("sync: the Trainer on N ranks (sharded loader, sync-bn) equals one Trainer of batch N*b") {
  std::shared_ptr<dist::Communicator> comm(world());
  test::SyncPair p = test::fit_sync_pair(comm, 4);
  CHECK(p.dp->step() == p.one->step());
  CHECK(test::max_state_diff(*p.net, *p.ref) < 1e-4);
  // Evaluation is sharded and summed: every rank reports the whole test split.
  auto r = p.dp->evaluate(*p.data.test);
  auto r1 = p.one->evaluate(*p.data.test);
  CHECK(r.samples == r1.samples);
  CHECK(r.top1 == doctest::Approx(r1.top1));
}
