// Parameter servers (dist/ps.h) on 2, 3 and 4 ranks: synchronous PS equals serial SGD on the
// averaged gradients; asynchronous applies every push exactly once; the SSP staleness bound holds;
// sharding is deterministic and balanced; bad configurations are errors naming the field.
//   ctest --test-dir build -R mpi.test_ps
//   mpirun --oversubscribe -np 3 build/tests/kiln_tests_mpi --source-file=*mpi/test_ps.cpp
#include <algorithm>
#include <chrono>
#include <thread>

#include "dist/ps.h"
#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/optim.h"
#include "layers/linear.h"
#include "tests/mpi/mpi_testing.h"
#include "tests/support/testing.h"

using namespace kiln;
using kiln::dist::PsOptions;

namespace {

// Two stacked Linear layers (4 parameters of 24, 6, 18, 3 elements): bilinear in the
// parameters, so the trajectory depends on every step's values, not only on gradient sums.
struct TinyNet {
  std::shared_ptr<Linear> l1 = std::make_shared<Linear>(4, 6), l2 = std::make_shared<Linear>(6, 3);
  NamedTensors params() const {
    NamedTensors p;
    for (auto& [n, t] : l1->named_parameters()) p.emplace_back("l1." + n, t);
    for (auto& [n, t] : l2->named_parameters()) p.emplace_back("l2." + n, t);
    return p;
  }
  // Worker w's deterministic batch; loss = mean squared error.
  Tensor loss(int w) {
    Tensor x = test::make_input({5, 4}, 100 + uint64_t(w), DType::float32);
    Tensor y = test::make_input({5, 3}, 200 + uint64_t(w), DType::float32);
    Tensor d = ops::sub(l2->forward(l1->forward(x)), y);
    return ops::mean(ops::mul(d, d));
  }
};

void zero_grads(const NamedTensors& ps) {
  for (auto [n, p] : ps) p.set_grad(Tensor());  // Tensor is a handle: the copy shares the leaf
}

double lr_at(int step) { return 0.2 / (1 + step); }  // a schedule, so lr travels with each push

// Serial reference: from `init`, `steps[w]` steps per worker; each step averages the gradients
// of the workers still running and takes one plain SGD step.
NamedTensors serial_reference(const std::vector<Tensor>& init, const std::vector<int>& steps) {
  TinyNet net;
  NamedTensors ps = net.params();
  {
    NoGradGuard ng;
    for (size_t i = 0; i < ps.size(); ++i) ps[i].second.detach().copy_(init[i]);
  }
  auto opt = optim::sgd(ps, {lr_at(0), 0, 0, 0, false});
  int most = *std::max_element(steps.begin(), steps.end());
  for (int t = 0; t < most; ++t) {
    std::vector<Tensor> sum(ps.size());
    int n = 0;
    for (int w = 0; w < int(steps.size()); ++w) {
      if (t >= steps[size_t(w)]) continue;
      zero_grads(ps);
      net.loss(w).backward();
      for (size_t i = 0; i < ps.size(); ++i)
        sum[i] = sum[i].defined() ? ops::add(sum[i], ps[i].second.grad()) : ps[i].second.grad().clone();
      ++n;
    }
    for (size_t i = 0; i < ps.size(); ++i) ps[i].second.set_grad(ops::mul(sum[i], 1.0 / n).detach());
    opt->set_lr(lr_at(t));
    opt->step();
  }
  return ps;
}

std::vector<Tensor> snapshot(const NamedTensors& ps) {
  std::vector<Tensor> v;
  for (auto& [n, p] : ps) v.push_back(p.detach().clone());
  return v;
}

// Synchronous PS training of TinyNet, worker w doing steps[w] steps; every worker (the chief after
// finish) compares with the serial reference.
void run_sync(dist::Communicator& comm, int servers, const std::vector<int>& steps) {
  PsOptions o;
  o.servers = servers;
  o.synchronous = true;
  o.optimizer = {"sgd", 0.1, /*momentum=*/0};
  manual_seed(1000 + uint64_t(comm.rank()));  // different draws per rank: the broadcast must fix them
  TinyNet net;
  NamedTensors ps = net.params();
  if (dist::is_server(comm, o)) {
    dist::ParameterServer server(comm, ps, o);
    const dist::PsStats& st = server.run();
    int64_t expect_pushes = 0;
    for (int s : steps) expect_pushes += s;
    if (server.shard_map().numel[size_t(server.server_index())] > 0) {
      CHECK(st.pushes == expect_pushes);
      CHECK(st.steps == *std::max_element(steps.begin(), steps.end()));
      CHECK(st.max_staleness == 0);
    }
    return;
  }
  dist::PsWorker worker(comm, ps, o);
  std::vector<Tensor> init = snapshot(ps);
  const int w = comm.rank();
  for (int t = 0; t < steps[size_t(w)]; ++t) {
    zero_grads(ps);
    net.loss(w).backward();
    worker.set_lr(lr_at(t));
    worker.push_pull();
  }
  std::vector<int> done_at_mine = steps;  // what the servers had applied when my last pull came back
  for (int& s : done_at_mine) s = std::min(s, steps[size_t(w)]);
  NamedTensors ref = serial_reference(init, done_at_mine);
  for (size_t i = 0; i < ps.size(); ++i) {
    INFO("worker ", w, " ", ps[i].first, " after ", steps[size_t(w)], " steps, ", servers, " server(s)");
    CHECK_CLOSE(ps[i].second, ref[i].second, 1e-5, 1e-6);
  }
  worker.finish();
  if (worker.is_chief()) {
    NamedTensors fin = serial_reference(init, steps);
    for (size_t i = 0; i < ps.size(); ++i) {
      INFO("chief's final ", ps[i].first);
      CHECK_CLOSE(ps[i].second, fin[i].second, 1e-5, 1e-6);
    }
  }
  CHECK(worker.stats().pushes == int64_t(steps[size_t(w)]) * servers);  // every shard is non-empty
}

std::vector<int> equal_steps(int workers, int k) { return std::vector<int>(size_t(workers), k); }

// Parameters with exactly representable values and gradients: sums in any order are exact.
NamedTensors exact_params() {
  auto make = [](const Shape& s, double v) {
    Tensor t = full(s, v);
    t.requires_grad_();
    return t;
  };
  return {{"a", make({7}, 3.0)}, {"b", make({3, 2}, -2.0)}, {"c", make({5}, 1.0)}};
}

// Asynchronous run with constant gradients (w + 1) * 0.25 * (i + 1) on parameter i; worker w
// pushes 3 + w times; worker `slow` sleeps before each push. Returns the largest staleness any
// server saw (all ranks agree).
int64_t run_async(dist::Communicator& comm, int servers, int staleness, int slow = -1, int sleep_ms = 0,
                  int steps_base = 3) {
  PsOptions o;
  o.servers = servers;
  o.synchronous = false;
  o.staleness = staleness;
  o.optimizer = {"sgd", 0.5, /*momentum=*/0};
  NamedTensors ps = exact_params();
  const int W = dist::ps_num_workers(comm.size(), o);
  int64_t seen = 0;
  if (dist::is_server(comm, o)) {
    dist::ParameterServer server(comm, ps, o);
    const dist::PsStats& st = server.run();
    seen = st.max_staleness;
    if (staleness >= 0) CHECK(st.max_staleness <= staleness);
  } else {
    dist::PsWorker worker(comm, ps, o);
    const int w = comm.rank();
    for (int t = 0; t < steps_base + w; ++t) {
      for (size_t i = 0; i < ps.size(); ++i)
        ps[i].second.set_grad(full(ps[i].second.sizes(), (w + 1) * 0.25 * double(i + 1)));
      if (w == slow) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      worker.set_lr(0.5);
      worker.push_pull();
    }
    worker.finish();
    if (worker.is_chief()) {
      const double init[] = {3.0, -2.0, 1.0};
      for (size_t i = 0; i < ps.size(); ++i) {
        double total = 0;  // sum over all pushes of the gradient value
        for (int v = 0; v < W; ++v) total += (steps_base + v) * (v + 1) * 0.25 * double(i + 1);
        INFO("chief's final ", ps[i].first, ", ", servers, " server(s), staleness ", staleness);
        CHECK_CLOSE(ps[i].second, full(ps[i].second.sizes(), init[i] - 0.5 * total), 0, 0);
      }
    }
  }
  Tensor m = scalar_tensor(double(seen), TensorOptions(DType::float64));
  comm.allreduce(m, dist::ReduceOp::max, "ps test staleness");
  return int64_t(m.item());
}

}  // namespace

TEST_CASE("ps: synchronous servers give serial SGD on the averaged gradients, every worker") {
  auto comm = test::world_comm();  // a fresh communicator per case: no message outlives its case
  const int size = comm->size();
  for (int k = 1; k <= 2 && k < size; ++k) {
    CAPTURE(k);
    run_sync(*comm, k, equal_steps(size - k, 4));
  }
}

TEST_CASE("ps: synchronous servers stop waiting for a worker that is done (uneven work)") {
  auto comm = test::world_comm();  // a fresh communicator per case: no message outlives its case
  const int size = comm->size();
  for (int k = 1; k <= 2 && k < size; ++k) {
    std::vector<int> steps;
    for (int w = 0; w < size - k; ++w) steps.push_back(5 - 2 * w);  // 5, 3, 1: the chief does most
    run_sync(*comm, k, steps);
  }
}

TEST_CASE("ps: asynchronous servers apply every push exactly once") {
  auto comm = test::world_comm();  // a fresh communicator per case: no message outlives its case
  const int size = comm->size();
  std::vector<int> ks = {1};
  if (size > 2) ks.push_back(2);
  if (size - 1 > 2) ks.push_back(size - 1);  // 3 servers for 3 parameters... and beyond: empty shards
  for (int k : ks) {
    run_async(*comm, k, -1);
    run_async(*comm, k, 0);
    run_async(*comm, k, 2);
  }
}

TEST_CASE("ps: the staleness bound holds with a slow worker; without one the fast run ahead") {
  auto comm = test::world_comm();  // a fresh communicator per case: no message outlives its case
  const int size = comm->size();
  const int W = size - 1;
  const int slow = W - 1;
  CHECK(run_async(*comm, 1, 0, slow, 20, 6) <= 0);
  CHECK(run_async(*comm, 1, 1, slow, 20, 6) <= 1);
  int64_t unbounded = run_async(*comm, 1, -1, slow, 20, 6);
  if (W >= 2) CHECK(unbounded >= 2);  // worker 0 does its 6 pushes while the slow one sleeps
  else CHECK(unbounded == 0);
}

TEST_CASE("ps: sharding is deterministic, balanced and covers every parameter once") {
  auto t = [](int64_t n) { return zeros({n}); };
  NamedTensors ps = {{"p0", t(10)}, {"p1", t(1000)}, {"p2", t(500)}, {"p3", t(3)},
                     {"p4", t(500)}, {"p5", t(200)}, {"p6", t(7)}};
  dist::PsShardMap m = dist::shard_parameters(ps, 3);
  // 1000 -> s0; 500 -> s1; 500 -> s2; 200 -> s1 (first least loaded); 10, 7, 3 -> s2.
  CHECK(m.owner == std::vector<int>{2, 0, 1, 2, 2, 1, 2});
  CHECK(m.numel == std::vector<int64_t>{1000, 700, 520});
  CHECK(m.params[2] == std::vector<int>{0, 3, 4, 6});
  for (int k = 1; k <= 5; ++k) {
    dist::PsShardMap a = dist::shard_parameters(ps, k), b = dist::shard_parameters(ps, k);
    CHECK(a.owner == b.owner);
    int64_t total = 0, lo = a.numel[0], hi = a.numel[0];
    std::vector<int> seen(ps.size(), 0);
    for (int s = 0; s < k; ++s) {
      total += a.numel[size_t(s)];
      lo = std::min(lo, a.numel[size_t(s)]);
      hi = std::max(hi, a.numel[size_t(s)]);
      for (int i : a.params[size_t(s)]) {
        seen[size_t(i)]++;
        CHECK(a.owner[size_t(i)] == s);
      }
    }
    CHECK(total == 2220);
    CHECK(hi - lo <= 1000);  // greedy largest-first: the spread is at most the largest tensor
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
  CHECK_THROWS_KILN(dist::shard_parameters(ps, 0), "0 servers");
}

TEST_CASE("ps: bad configurations are errors naming the option") {
  auto owned = test::world_comm();
  dist::Communicator& comm = *owned;
  const int size = comm.size();
  PsOptions o;
  o.servers = 0;
  CHECK_THROWS_KILN(dist::check_ps_options(size, o), "PsOptions::servers (--ps) is 0");
  CHECK_THROWS_KILN(dist::is_server(comm, o), "at least 1 server rank");
  o.servers = size;
  CHECK_THROWS_KILN(dist::is_server(comm, o), "leaves no worker");
  o.servers = 1;
  o.staleness = 2;
  CHECK_THROWS_KILN(dist::check_ps_options(size, o), "applies to asynchronous servers only");
  o.synchronous = false;
  o.staleness = -3;
  CHECK_THROWS_KILN(dist::check_ps_options(size, o), "--staleness");
  o.staleness = 0;
  NamedTensors ps = exact_params();
  // The wrong role for this rank: refused before any message moves.
  if (dist::is_server(comm, o)) CHECK_THROWS_KILN(dist::PsWorker(comm, ps, o), "this rank is a server");
  else CHECK_THROWS_KILN(dist::ParameterServer(comm, ps, o), "servers are ranks");
}

TEST_CASE("ps: a server whose worker falls silent ends with an error naming it, after the timeout") {
  dist::CommOptions quick = test::mpi_test_options();
  quick.timeout_s = 1;
  auto owned = dist::make_communicator("mpi", quick);
  dist::Communicator& comm = *owned;
  PsOptions o;
  o.synchronous = false;
  NamedTensors ps = exact_params();
  if (dist::is_server(comm, o)) {
    dist::ParameterServer server(comm, ps, o);
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_KILN(server.run(), "serving workers still running [0]");
    // Not before the timeout (1 s); a server that waited for ever would meet CTest's timeout.
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= 1);
  } else {
    dist::PsWorker worker(comm, ps, o);
    if (!worker.is_chief()) worker.finish();  // the chief falls silent: no push, no DONE
  }
}

TEST_CASE("ps: ranks that build different models get an error naming the parameter, not a hang") {
  auto comm = test::world_comm();
  PsOptions o;
  NamedTensors ps = exact_params();
  if (comm->rank() == 1) ps[1].second = full({3, 3}, 0.0);  // "b" is [3, 2] everywhere else
  auto start = [&] {
    if (dist::is_server(*comm, o)) dist::ParameterServer(*comm, ps, o);
    else dist::PsWorker(*comm, ps, o);
  };
  CHECK_THROWS_KILN(start(), "ps init b");
}
