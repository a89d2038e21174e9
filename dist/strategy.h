// How the ranks of a job cooperate: one name per strategy, one configuration, one interface that
// the Trainer and `kiln bench` drive step by step (the part of Horovod's DistributedOptimizer and
// Flashlight's Reducer a training loop sees), one factory that wires the communication thread,
// DataParallel (dist/sync.h) or the parameter servers (dist/ps.h) behind it.
//
//   dist::DistConfig cfg;
//   cfg.strategy = dist::parse_strategy("sync");       // kiln::Error listing the names otherwise
//   auto s = dist::make_strategy(cfg, comm.get(), *model, optimizer_config);
//   if (s->is_server()) { s->serve(); return; }         // async, ps: the last ranks serve shards
//   for (;;) {
//     bool have = loader.next(batch);
//     if (s->begin_step(have) == 0) break;               // every worker is out of batches
//     ... forward, backward (a sync rank without a batch replays its last one, loss x 0) ...
//     s->finish_gradients();                             // sync: averaged .grad on every rank
//     s->step(opt.get(), lr);                            // opt->step(), or push to / pull from servers
//   }
//   s->finish();                                         // ps: the chief then holds the final parameters
//
// A communicator of one rank (or none) runs the local strategy whatever cfg.strategy names: the
// same loop, no communication. Not thread-safe: one thread drives a Strategy.
//   ctest --test-dir build -R dist.test_strategy     (one rank)
//   ctest --test-dir build -L mpi -R strategy        (2, 3 and 4 ranks)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/ps.h"
#include "dist/settings.h"
#include "dist/sync.h"
#include "engine/optim.h"
#include "layers/module.h"

namespace kiln::dist {

// The names `--strategy` takes. none: each process alone; sync: gradients all-reduced every step
// (Horovod, DDP); async: Downpour SGD on parameter servers (every push applied at once); ps:
// parameter servers, synchronous unless DistConfig::ps_synchronous is false.
enum class StrategyKind { none, sync, async, ps };

// "none", "sync", "async", "ps".
const char* strategy_name(StrategyKind kind);
// The inverse of strategy_name; anything else is a kiln::Error naming the valid choices.
StrategyKind parse_strategy(const std::string& name);
const std::vector<StrategyKind>& all_strategies();

// Everything a data-parallel job is configured by (`kiln train/bench` flags in brackets).
struct DistConfig {
  StrategyKind strategy = StrategyKind::none;  // [--strategy]
  SyncOptions sync;               // sync: buckets [--bucket-mb], overlap [--no-overlap], fp16 [--fp16-allreduce]
  bool sync_bn = false;           // sync: batch-norm statistics over all ranks [--sync-bn]
  bool scale_lr = false;          // lr x number of workers (Goyal et al. 2017; pair with warm-up) [--scale-lr]
  int ps_servers = 1;             // async, ps: the last K ranks serve parameter shards [--ps]
  bool ps_synchronous = true;     // ps: servers wait for every worker each step (async: never) [--ps-async]
  int staleness = -1;             // async, ps asynchronous: bound on clock differences (-1: none) [--staleness]
  // The job: the communicator's backend ("auto", "mpi", "nccl", "local") [--comm] and options
  // [--allreduce, --comm-timeout, --comm-warn, --no-comm-check], and the Chrome-trace timeline
  // written per rank ("": none) [--timeline].
  std::string comm = "auto";
  CommOptions comm_options;
  std::string timeline;
};

// kiln::Error naming the flag at the first field that is wrong: --sync-bn without sync; for the
// strategies with a communicator its timeouts; sync: the bucket size;
// async, ps: the parameter servers' options (check_ps_options). ranks: the job's size, or 0
// where it is not known yet (the check that leaves a worker is then skipped). make_strategy
// calls it with the communicator's size.
void check_dist_config(const DistConfig& c, int ranks = 0);

// The communicator backend the strategy needs: c.comm, except that "auto" means "mpi" for the
// parameter servers (point to point with any-source receives, which NCCL lacks).
std::string communicator_backend(const DistConfig& c);

// The parameter servers' options for `c` (async, ps): the servers' optimizer is `optimizer`, its
// lr set by the workers each step.
PsOptions ps_options(const DistConfig& c, const optim::OptimizerConfig& optimizer = {});

// The rows of `c` that the ranks of a job compare at start (dist::check_settings) and a run
// records: the strategy and its own settings (sync: buckets, overlap, fp16, sync batch norm;
// async, ps: the servers, synchrony, staleness).
Settings describe(const DistConfig& c);

// One worker's epoch, from which a strategy makes the job's (Strategy::job_epoch).
struct WorkerEpoch {
  double loss_sum = 0, correct = 0, samples = 0;  // this worker's sums over the epoch
  double images = 0, seconds = 0;                 // this worker's images and seconds
  int64_t batch_size = 0;                         // per step
};

// The job's epoch. With several workers in step (sync, ps), loss and top1 are the job's (every
// worker's samples weighted alike), images_per_s all images over the slowest worker's seconds and
// rank_images_per_s each worker's own; asynchronous workers do not wait for each other, so there
// images_per_s is the servers' intake over the chief's epoch and loss and top1 the chief's
// (chief_only_metrics). ps: the servers' statistics (the chief of a parameter-server job).
struct JobEpoch {
  double loss = 0, top1 = 0, images_per_s = 0, seconds = 0;
  std::vector<double> rank_images_per_s;
  std::vector<PsStats> ps;
  bool chief_only_metrics = false;
};

// What the ranks of a parameter-server job (async, ps) ask of the servers; see
// Strategy::parameter_servers().
class ParameterServers {
 public:
  virtual ~ParameterServers() = default;
  // The chief: every server's statistics so far (asked of them now); other workers: {}.
  virtual std::vector<PsStats> stats() = 0;
  // The chief: the servers' optimizer state, whole (after finish(), the final one), for a
  // checkpoint; false elsewhere (the rank's own optimizer holds it).
  virtual bool optimizer_state(PsOptimizerState* state) = 0;
  // A server before serve(): the whole job's optimizer state to start from (a resumed
  // checkpoint's); each server takes its shard's part.
  virtual void set_optimizer_state(PsOptimizerState state) = 0;
};

// What a strategy measured; for logs and `kiln bench`.
struct StrategyReport {
  StrategyKind kind = StrategyKind::none;  // what runs (none on one rank whatever was asked)
  int ranks = 1;            // of the communicator
  int workers = 1;          // ranks that train
  int worker_index = 0;     // this rank among them; -1 on a server
  bool server = false;
  double last_wait_s = 0;   // sync: what the last finish_gradients() waited for the all-reduce
                            // (the part backward did not hide); 0 for the others
  PsStats ps;               // async, ps: this worker's or server's traffic, staleness and waits
};

class Strategy {
 public:
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  StrategyKind kind() const { return report_.kind; }
  // Rank 0, or the only process: it alone logs and writes checkpoints.
  bool is_chief() const { return chief_; }
  // A parameter-server rank: call serve() and nothing else.
  bool is_server() const { return report_.server; }
  int workers() const { return report_.workers; }
  int worker_index() const { return report_.worker_index; }
  // Sync: every rank holds the same model, so evaluation and metrics are shared out and summed
  // with sum_over_ranks() (a collective every rank must call). Others: each rank on its own.
  virtual bool sums_over_ranks() const { return false; }
  virtual void sum_over_ranks(const Tensor& t, const std::string& what) {}
  // Whether every worker runs the same steps at the same time (sync; ps with synchronous servers),
  // so a collective among workers at an epoch's end is safe; asynchronous workers: false.
  virtual bool workers_in_step() const { return true; }
  // The job's figures: sums `t` (float64, on the CPU) over every worker, servers not included; a
  // collective every worker calls at the same point (epoch ends). One worker: nothing.
  virtual void sum_over_workers(const Tensor& t, const std::string& what) { sum_over_ranks(t, what); }
  // The job's figures of an epoch from this worker's: one worker, its own; workers in step, a
  // collective among them at the epoch's end (sum_over_workers); asynchronous workers: their own
  // loss and accuracy, and on the chief the servers' intake as the job's images/s.
  virtual JobEpoch job_epoch(const WorkerEpoch& mine);
  // A parameter-server job's servers (async, ps); null for the others.
  virtual ParameterServers* parameter_servers() { return nullptr; }

  // A server: serves its shard until every worker has called finish(). A worker: kiln::Error.
  // `stop_requested` is polled for a stop request of this process (a signal to a server), which
  // the servers pass on to every worker.
  virtual void serve(const std::function<bool()>& stop_requested = {});
  // Before each step's forward: how many workers have a batch (0: all are done). A sync rank
  // with `have_batch` false while others go on must still run the step with zero gradients.
  // Stops: `stop_requested` says this rank was asked to stop (a signal); *stop_any says the job
  // stops here, before this step, on every rank at once. sync: the same allreduce carries the
  // requests, so all stop at the step after the request. ps: the request rides on this rank's
  // next push and the servers' replies carry the decision, so with synchronous servers every
  // worker stops at the same step, one step later; asynchronous workers stop each at its next step.
  virtual int begin_step(bool have_batch, bool stop_requested = false, bool* stop_any = nullptr);
  // After backward: sync waits for the buckets and writes the averaged gradients into .grad.
  virtual void finish_gradients() {}
  // The step's update: optimizer->step() on this rank (none, sync; nullptr: no update, as
  // `kiln bench` times), or the gradients pushed to the servers and their parameters pulled back
  // with `lr` (async, ps; the optimizer is not used).
  virtual void step(optim::Optimizer* optimizer, double lr);
  // After the last step: a parameter-server worker tells the servers it is done (the chief then
  // receives the final parameters). Others: nothing.
  virtual void finish() {}
  virtual StrategyReport report() const { return report_; }

 protected:
  Strategy() = default;
  StrategyReport report_;
  bool chief_ = true;
};

// The strategy cfg.strategy names over `comm`, after check_dist_config(cfg, comm size): none, no
// communicator or one rank: local; sync: a communication thread, sync batch norm when
// cfg.sync_bn, and DataParallel (collective: checks the structure, broadcasts rank 0's state);
// async, ps: a PsWorker on the workers (collective with the servers' serve(): the chief's
// parameters everywhere), the role only on servers. comm and model must outlive the strategy;
// server_optimizer is the servers' optimizer (its lr comes from the workers).
std::unique_ptr<Strategy> make_strategy(const DistConfig& cfg, Communicator* comm, Module& model,
                                        const optim::OptimizerConfig& server_optimizer = {});

}  // namespace kiln::dist
