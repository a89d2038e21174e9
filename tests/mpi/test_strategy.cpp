// dist::make_strategy on 2, 3 and 4 ranks: sync averages the gradients and keeps every rank's
// parameters equal; async and ps give the last rank the server's role and the others a worker's.
//   ctest --test-dir build -R mpi.test_strategy
//   mpirun --oversubscribe -np 3 build/tests/kiln_tests_mpi --source-file=*mpi/test_strategy.cpp
#include <algorithm>
#include <cmath>
#include <vector>

#include "dist/strategy.h"
#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/optim.h"
#include "engine/random.h"
#include "layers/linear.h"
#include "tests/mpi/mpi_testing.h"
#include "tests/support/testing.h"

using namespace kiln;
using dist::StrategyKind;

namespace {

// Rank r's loss on its own batch: mean squared output.
Tensor rank_loss(Linear& net, int rank) {
  Tensor x = test::make_input({5, 4}, 300 + uint64_t(rank), DType::float32);
  Tensor y = net.forward(x);
  return ops::mean(ops::mul(y, y));
}

// Largest difference of `t` between this rank and any other (0 on every rank when all agree;
// +inf where any rank holds a NaN or infinity, which a max over ranks would otherwise drop).
double spread(dist::Communicator& comm, const Tensor& t) {
  std::vector<double> v = t.to_vector(), minus(v.size());
  double nonfinite = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    minus[i] = -v[i];
    if (!std::isfinite(v[i])) nonfinite = 1, v[i] = minus[i] = 0;
  }
  Tensor flag = from_vector(std::vector<double>{nonfinite}, {1}, DType::float64);
  comm.allreduce(flag, dist::ReduceOp::max, "spread non-finite");
  if (flag.data<double>()[0] != 0) return INFINITY;
  const int64_t n = int64_t(v.size());
  Tensor hi = from_vector(v, {n}, DType::float64), lo = from_vector(minus, {n}, DType::float64);
  comm.allreduce(hi, dist::ReduceOp::max, "spread max");
  comm.allreduce(lo, dist::ReduceOp::max, "spread min");
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, hi.data<double>()[i] + lo.data<double>()[i]);
  return worst;
}

}  // namespace

TEST_CASE("strategy: sync on every rank, gradients averaged, parameters kept equal") {
  auto comm = test::world_comm();
  const int n = comm->size(), rank = comm->rank();
  manual_seed(uint64_t(rank));  // different initial weights: the strategy broadcasts rank 0's
  Linear net(4, 3);
  dist::DistConfig c;
  c.strategy = StrategyKind::sync;
  auto s = dist::make_strategy(c, comm.get(), net);
  CHECK(s->kind() == StrategyKind::sync);
  CHECK(s->workers() == n);
  CHECK(s->worker_index() == rank);
  CHECK(s->is_chief() == (rank == 0));
  CHECK_FALSE(s->is_server());
  CHECK(s->sums_over_ranks());
  Tensor r = from_vector(std::vector<double>{double(rank)}, {1}, DType::float64);
  s->sum_over_ranks(r, "rank sum");
  CHECK(r.to_vector()[0] == double(n * (n - 1) / 2));

  auto opt = optim::make_optimizer({"sgd", 0.1, 0}, net.named_parameters());
  for (int step = 0; step < 2; ++step) {
    CHECK(s->begin_step(true) == n);
    opt->zero_grad();
    rank_loss(net, rank).backward();
    s->finish_gradients();
    s->step(opt.get(), 0.1);
  }
  for (const auto& entry : net.named_parameters()) {
    const std::string& name = entry.first;
    const Tensor& p = entry.second;
    CAPTURE(name);
    CHECK(spread(*comm, p) < 1e-6);
  }
  CHECK(s->report().last_wait_s >= 0);
}

TEST_CASE("strategy: async and ps give the last rank the server's role") {
  for (StrategyKind k : {StrategyKind::async, StrategyKind::ps}) {
    CAPTURE(dist::strategy_name(k));
    auto comm = test::world_comm();
    const int n = comm->size(), rank = comm->rank();
    Linear net(4, 3);
    dist::DistConfig c;
    c.strategy = k;
    c.ps_servers = 1;
    auto s = dist::make_strategy(c, comm.get(), net, {"sgd", 0.1, 0});
    CHECK(s->kind() == k);
    CHECK(s->workers() == n - 1);
    CHECK(s->is_chief() == (rank == 0));
    CHECK_FALSE(s->sums_over_ranks());
    if (rank == n - 1) {
      CHECK(s->is_server());
      CHECK(s->worker_index() == -1);
      s->serve();
      CHECK(s->report().ps.pushes == 2 * (n - 1));
      continue;
    }
    CHECK_FALSE(s->is_server());
    CHECK(s->worker_index() == rank);
    for (int step = 0; step < 2; ++step) {
      CHECK(s->begin_step(true) == 1);
      net.zero_grad();
      rank_loss(net, rank).backward();
      s->finish_gradients();
      s->step(nullptr, 0.1);  // push, pull: the servers' optimizer updates
    }
    s->finish();
    CHECK(s->report().ps.pushes == 2);
    CHECK(s->report().server == false);
  }
}
