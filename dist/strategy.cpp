// The strategies behind one interface: local, sync (communication thread + DataParallel, sync
// batch norm) and the parameter servers (PsWorker / ParameterServer), and their configuration.
//   ctest --test-dir build -R dist.test_strategy
#include "dist/strategy.h"

#include <algorithm>

#include "dist/comm_thread.h"
#include "dist/sync_bn.h"
#include "dist/timeline.h"
#include "engine/error.h"

namespace kiln::dist {

const char* strategy_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::none: return "none";
    case StrategyKind::sync: return "sync";
    case StrategyKind::async: return "async";
    case StrategyKind::ps: return "ps";
  }
  return "?";
}

const std::vector<StrategyKind>& all_strategies() {
  static const std::vector<StrategyKind> kinds = {StrategyKind::none, StrategyKind::sync, StrategyKind::async,
                                                  StrategyKind::ps};
  return kinds;
}

StrategyKind parse_strategy(const std::string& name) {
  for (StrategyKind k : all_strategies())
    if (name == strategy_name(k)) return k;
  KILN_THROW("--strategy: 'sync', 'async' or 'ps', not '", name, "' ('none': every process alone)");
}

void check_dist_config(const DistConfig& c, int ranks) {
  if (c.strategy != StrategyKind::none) {  // none uses no communicator
    const CommOptions& co = c.comm_options;
    KILN_CHECK(co.timeout_s > 0 && co.warn_after_s > 0, "--comm-timeout and --comm-warn must be positive");
  }
  switch (c.strategy) {
    case StrategyKind::none:
      KILN_CHECK(!c.sync_bn, "--sync-bn needs --strategy sync");
      break;
    case StrategyKind::sync:
      KILN_CHECK(c.sync.bucket_mb > 0, "--bucket-mb must be positive, got ", c.sync.bucket_mb);
      break;
    case StrategyKind::async:
    case StrategyKind::ps:
      KILN_CHECK(!c.sync_bn, "--sync-bn needs --strategy sync (parameter servers hold no batch statistics)");
      check_ps_options(ranks, ps_options(c));
      break;
  }
}

std::string communicator_backend(const DistConfig& c) {
  const bool servers = c.strategy == StrategyKind::async || c.strategy == StrategyKind::ps;
  return servers && c.comm == "auto" ? "mpi" : c.comm;
}

PsOptions ps_options(const DistConfig& c, const optim::OptimizerConfig& optimizer) {
  PsOptions po;
  po.servers = c.ps_servers;
  po.synchronous = c.strategy == StrategyKind::ps && c.ps_synchronous;
  po.staleness = c.staleness;
  po.optimizer = optimizer;  // the servers' lr comes from the workers' schedule each step
  return po;
}

Settings describe(const DistConfig& d) {
  const auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
  Settings s = {
      {"strategy", strategy_name(d.strategy)},
      {"scale lr by workers", yes(d.scale_lr)},
      {"allreduce algorithm", allreduce_name(d.comm_options.algorithm)},
      {"collective checks", yes(d.comm_options.check)},
  };
  if (d.strategy == StrategyKind::sync)
    s.insert(s.end(), {{"bucket MB", setting_number(d.sync.bucket_mb)},
                       {"overlap", yes(d.sync.overlap)},
                       {"fp16 allreduce", yes(d.sync.fp16_compression)},
                       {"sync batch norm", yes(d.sync_bn)}});
  if (d.strategy == StrategyKind::ps || d.strategy == StrategyKind::async)
    s.insert(s.end(), {{"parameter servers", std::to_string(d.ps_servers)},
                       {"ps synchronous", yes(d.ps_synchronous)},
                       {"staleness bound", std::to_string(d.staleness)}});
  return s;
}

// --- Strategy: the local behaviour, which the others refine

Strategy::~Strategy() = default;

void Strategy::serve(const std::function<bool()>&) {
  KILN_THROW("Strategy::serve: this rank is a worker (", strategy_name(kind()), "), not a parameter server");
}

int Strategy::begin_step(bool have_batch, bool stop_requested, bool* stop_any) {
  if (stop_any) *stop_any = stop_requested;
  return have_batch ? 1 : 0;
}

namespace {

// A worker's own figures.
JobEpoch own_epoch(const WorkerEpoch& w) {
  JobEpoch j;
  j.loss = w.samples > 0 ? w.loss_sum / w.samples : 0;
  j.top1 = w.samples > 0 ? w.correct / w.samples : 0;
  j.images_per_s = w.seconds > 0 ? w.images / w.seconds : 0;
  j.seconds = w.seconds;
  j.rank_images_per_s = {j.images_per_s};
  return j;
}

}  // namespace

JobEpoch Strategy::job_epoch(const WorkerEpoch& w) {
  JobEpoch j = own_epoch(w);
  const int n = workers();
  if (n <= 1) return j;
  // Every worker's sums and its own images and seconds (a slot each), summed over the workers:
  // loss and accuracy weighted by samples, images/s all images over the slowest worker's time.
  const int me = std::max(0, worker_index());
  std::vector<double> v(size_t(3 + 2 * n), 0.0);
  v[0] = w.loss_sum, v[1] = w.correct, v[2] = w.samples;
  v[size_t(3 + me)] = w.images;
  v[size_t(3 + n + me)] = w.seconds;
  Tensor t = from_vector(v, {int64_t(v.size())}, DType::float64);
  sum_over_workers(t, "epoch figures");
  const double* a = t.data<double>();
  double all_images = 0, slowest = 0;
  j.rank_images_per_s.clear();
  for (int k = 0; k < n; ++k) {
    const double im = a[3 + k], sec = a[3 + n + k];
    all_images += im;
    slowest = std::max(slowest, sec);
    j.rank_images_per_s.push_back(sec > 0 ? im / sec : 0);
  }
  j.loss = a[2] > 0 ? a[0] / a[2] : 0;
  j.top1 = a[2] > 0 ? a[1] / a[2] : 0;
  j.images_per_s = slowest > 0 ? all_images / slowest : 0;
  j.seconds = slowest;
  return j;
}

void Strategy::step(optim::Optimizer* optimizer, double) {
  if (!optimizer) return;
  timeline::Span span("compute", "optimizer step");
  optimizer->step();
}

namespace {

class LocalStrategy final : public Strategy {};

class SyncStrategy final : public Strategy {
 public:
  SyncStrategy(const DistConfig& c, Communicator& comm, Module& model) : comm_(comm), model_(model) {
    report_.kind = StrategyKind::sync;
    report_.ranks = report_.workers = comm.size();
    report_.worker_index = comm.rank();
    chief_ = comm.rank() == 0;
    if (c.sync_bn) sync_bn_ = enable_sync_batch_norm(model, comm, thread_) > 0;
    dp_ = std::make_unique<DataParallel>(model, comm, thread_, c.sync);
  }
  ~SyncStrategy() override {
    dp_.reset();
    // The batch norms' cross-rank sum refers to this strategy's thread.
    if (sync_bn_) disable_sync_batch_norm(model_);
  }

  bool sums_over_ranks() const override { return true; }
  void sum_over_ranks(const Tensor& t, const std::string& what) override {
    thread_.run(what, [&] { comm_.allreduce(t, ReduceOp::sum, what); });
  }
  int begin_step(bool have_batch, bool stop_requested, bool* stop_any) override {
    return dp_->begin_step(have_batch, stop_requested, stop_any);
  }
  void finish_gradients() override { dp_->finish_gradients(); }
  StrategyReport report() const override {
    StrategyReport r = report_;
    r.last_wait_s = dp_->last_wait_seconds();
    return r;
  }

 private:
  Communicator& comm_;
  Module& model_;
  CommThread thread_;  // before dp_, which submits to it
  std::unique_ptr<DataParallel> dp_;
  bool sync_bn_ = false;
};

class PsStrategy final : public Strategy, public ParameterServers {
 public:
  PsStrategy(const DistConfig& c, Communicator& comm, Module& model, const optim::OptimizerConfig& server_optimizer)
      : comm_(comm), model_(model), options_(ps_options(c, server_optimizer)) {
    report_.kind = c.strategy;
    report_.ranks = comm.size();
    report_.server = dist::is_server(comm, options_);
    report_.workers = ps_num_workers(comm.size(), options_);
    report_.worker_index = report_.server ? -1 : comm.rank();
    chief_ = comm.rank() == 0;
    // The workers' own communicator, for the job's figures: collective over every rank, so before
    // the workers' PsWorker (servers make their ParameterServer only in serve()).
    workers_comm_ = comm.split(report_.server ? 1 : 0, comm.rank());
    if (!report_.server) worker_ = std::make_unique<PsWorker>(comm, model.named_parameters(), options_);
  }
  bool workers_in_step() const override { return options_.synchronous; }
  void sum_over_workers(const Tensor& t, const std::string& what) override {
    if (worker_ && workers_comm_->size() > 1) workers_comm_->allreduce(t, ReduceOp::sum, what);
  }
  ParameterServers* parameter_servers() override { return this; }
  bool optimizer_state(PsOptimizerState* state) override {
    if (!worker_ || !worker_->is_chief()) return false;
    *state = worker_->server_state();
    return !state->json.empty();
  }
  void set_optimizer_state(PsOptimizerState state) override { initial_ = std::move(state); }
  std::vector<PsStats> stats() override {
    return worker_ && worker_->is_chief() ? worker_->server_stats() : std::vector<PsStats>{};
  }
  JobEpoch job_epoch(const WorkerEpoch& w) override {
    if (workers() <= 1) return own_epoch(w);
    if (options_.synchronous) {  // every worker ends the epoch at the same round: summed as sync
      JobEpoch j = Strategy::job_epoch(w);
      j.ps = stats();
      return j;
    }
    // Asynchronous workers reach their epoch ends at different times (and a stop may come to each
    // at a different step), so no collective here: the job's images/s is what the servers took
    // since the chief's last epoch end (pushes to server 0 x batch) over the chief's epoch time;
    // loss and accuracy stay the chief's.
    JobEpoch j = own_epoch(w);
    j.ps = stats();
    if (!j.ps.empty()) {
      const int64_t pushes = j.ps.front().pushes - pushes_at_epoch_start_;
      pushes_at_epoch_start_ = j.ps.front().pushes;
      j.images_per_s = w.seconds > 0 ? double(pushes) * double(w.batch_size) / w.seconds : 0;
      j.chief_only_metrics = true;
    }
    return j;
  }

  void serve(const std::function<bool()>& stop_requested) override {
    if (!report_.server) Strategy::serve();
    PsOptions o = options_;
    o.stop_requested = stop_requested;
    o.initial_state_json = initial_.json;
    o.initial_state_tensors = initial_.tensors;
    ParameterServer server(comm_, model_.named_parameters(), o);
    served_ = server.run();
  }
  int begin_step(bool have_batch, bool stop_requested, bool* stop_any) override {
    if (worker_ && stop_requested) worker_->request_stop();
    if (stop_any) *stop_any = worker_ && worker_->stop_agreed();
    return have_batch ? 1 : 0;
  }
  void step(optim::Optimizer*, double lr) override {
    KILN_CHECK(worker_ != nullptr, "Strategy::step: rank ", comm_.rank(), " is a parameter server; call serve()");
    timeline::Span span("communication", "push gradients, pull parameters");
    worker_->set_lr(lr);
    worker_->push_pull();
  }
  void finish() override {
    if (worker_) worker_->finish();
  }
  StrategyReport report() const override {
    StrategyReport r = report_;
    r.ps = worker_ ? worker_->stats() : served_;
    return r;
  }

 private:
  Communicator& comm_;
  Module& model_;
  PsOptions options_;
  std::unique_ptr<PsWorker> worker_;  // workers only
  std::unique_ptr<Communicator> workers_comm_;  // the workers (servers: the servers)
  PsOptimizerState initial_;                    // servers: set_server_optimizer_state
  PsStats served_;                    // servers, after serve()
  int64_t pushes_at_epoch_start_ = 0;  // async, the chief: server 0's pushes at its last epoch end
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const DistConfig& cfg, Communicator* comm, Module& model,
                                        const optim::OptimizerConfig& server_optimizer) {
  const int ranks = comm ? comm->size() : 1;
  check_dist_config(cfg, ranks > 1 ? ranks : 0);
  if (cfg.strategy == StrategyKind::none || ranks == 1) return std::make_unique<LocalStrategy>();
  if (cfg.strategy == StrategyKind::sync) return std::make_unique<SyncStrategy>(cfg, *comm, model);
  return std::make_unique<PsStrategy>(cfg, *comm, model, server_optimizer);
}

}  // namespace kiln::dist
