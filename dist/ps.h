// Parameter servers (TensorFlow's ps tasks; Downpour SGD, Dean et al. 2012; stale-synchronous
// parallel, Ho et al. 2013): the last K ranks of the communicator hold the parameters, sharded
// whole-tensor by size, and apply the optimizer; ranks 0..W-1 are workers (worker 0 the chief)
// that push gradients and pull parameters back, with no optimizer of their own.
//
//   PsOptions o; o.servers = 1; o.synchronous = false; o.staleness = 2; o.optimizer = {"sgd", 0.1};
//   if (dist::is_server(*comm, o)) {                   // every rank builds the model alike
//     dist::ParameterServer(*comm, net->named_parameters(), o).run();   // until all workers are done
//   } else {
//     dist::PsWorker ps(*comm, net->named_parameters(), o);            // chief's values everywhere
//     for (...) { ps.set_lr(lr); loss.backward(); ps.push_pull(); }     // no optimizer step here
//     ps.finish();                                     // the chief then holds the final parameters
//   }
//
// Protocol, over an 'mpi' Communicator's send/recv (so its timeouts name a silent peer; NCCL has no
// any-source receive, so it is refused; parameters may live on a GPU all the same): a worker sends each
// server a header (float64[5]: kind, worker clock, lr, payload numel, stop request) on tag
// options.tag, the shard's gradients packed in one flat buffer on tag+1 (PUSH), then for each
// server in turn a PULL header and the reply on tag+2 (a REPLY header: server steps, numel, stop;
// then the shard's parameters, one flat buffer). All pushes go out
// before any reply is awaited, so the servers update their shards concurrently; a server never
// sends a reply that its worker is not already waiting for, so blocking sends cannot deadlock.
// Synchronous: a server answers the PULLs of round t once every worker still running has pushed
// round t (gradients averaged over those, one optimizer step). Asynchronous: every push is one
// optimizer step at once; with staleness S >= 0 a PULL from a worker at clock c waits while
// c - (slowest running worker's clock) > S. Not thread-safe: one thread per object and rank.
//   ctest --test-dir build -R mpi.test_ps   (2, 3 and 4 ranks)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "engine/optim.h"
#include "engine/tensor.h"

namespace kiln::dist {

struct PsOptions {
  int servers = 1;           // K: the last K ranks serve; 1 <= K < size
  bool synchronous = true;   // false: Downpour (every push applied at once)
  int staleness = -1;        // asynchronous only: SSP bound S >= 0, -1 unbounded
  optim::OptimizerConfig optimizer;  // the servers' optimizer; lr comes from the workers (set_lr)
  int tag = 7100;            // point-to-point tags tag, tag+1, tag+2 are the PS's own
  // Servers: polled for a stop request of the server's own process (a signal to it). Synchronous
  // servers poll when a round closes, asynchronous ones before each reply.
  std::function<bool()> stop_requested;
  // Servers: the whole job's optimizer state to start from (a resumed checkpoint's, as
  // Optimizer::state_json / state_tensors); each server takes its shard's part, whatever the
  // number of servers that wrote it, and keeps its own parameters (the checkpoint's, which every
  // rank loads) rather than the chief's broadcast. Empty: a fresh optimizer, the chief's values.
  std::string initial_state_json;
  NamedTensors initial_state_tensors;
};

// One optimizer state (Optimizer::state_json and state_tensors), as the servers hold it per shard.
struct PsOptimizerState {
  std::string json;
  NamedTensors tensors;
};
// The servers' shards' states as one state of the whole model (every parameter's counts and
// tensors; steps: the most any shard took), for Optimizer::load_state.
PsOptimizerState merge_optimizer_states(const std::vector<PsOptimizerState>& shards);

// kiln::Error naming the field unless 1 <= servers < size, staleness >= -1, and staleness is -1
// when synchronous. size <= 0: the job's size is not known yet (servers < size is not checked).
void check_ps_options(int size, const PsOptions& o);
bool is_server(const Communicator& comm, const PsOptions& o);  // checks the options
int ps_num_workers(int size, const PsOptions& o);              // size - servers
int ps_server_rank(int size, const PsOptions& o, int server);  // rank of server index 0..K-1

// Which server holds which parameter: greedy by element count, largest first onto the least
// loaded server (ties: lower parameter index, lower server), a pure function of the shapes so
// every rank computes the same map.
struct PsShardMap {
  std::vector<int> owner;                 // parameter index -> server index
  std::vector<std::vector<int>> params;   // server index -> its parameter indices, ascending
  std::vector<int64_t> numel;             // server index -> elements held
};
PsShardMap shard_parameters(const NamedTensors& params, int servers);

// What a rank moved and saw. Staleness is SSP's clock gap: at each answered pull, the pulling
// worker's clock minus the slowest running worker's (0 in synchronous mode). Update lag is
// Downpour's: optimizer steps applied to the shard between a worker's last pull and its push.
struct PsStats {
  int64_t pushes = 0, pulls = 0, steps = 0;  // steps: optimizer steps (server)
  int64_t bytes_sent = 0, bytes_received = 0;
  int64_t max_staleness = 0;
  double mean_staleness = 0;
  int64_t max_update_lag = 0;
  double mean_update_lag = 0;
  int64_t deferred_pulls = 0;   // pulls held back (sync barrier or staleness bound)
  double wait_s = 0;            // worker: time in push_pull; server: time waiting for headers
  std::string str() const;      // one line for logs
};

class ParameterServer {
 public:
  // Collective over all ranks of comm (with the PsWorkers): broadcasts every parameter from the
  // chief (rank 0), then keeps this rank's shard and an optimizer over it.
  ParameterServer(Communicator& comm, const NamedTensors& params, PsOptions o);
  ~ParameterServer();
  // Serves until every worker has sent DONE; the model's parameters on this rank then hold the
  // shard's final values (the others keep the chief's initial ones). Returns the stats.
  const PsStats& run();
  const PsStats& stats() const { return stats_; }
  int server_index() const { return index_; }
  const PsShardMap& shard_map() const { return map_; }
  // The shard's optimizer (state_json / state_tensors for a checkpoint); null for an empty shard.
  optim::Optimizer* optimizer();

 private:
  struct Impl;
  Communicator& comm_;
  PsOptions o_;
  PsShardMap map_;
  int index_ = 0;
  PsStats stats_;
  std::unique_ptr<Impl> impl_;  // last: it refers to the members above
};

class PsWorker {
 public:
  // Collective (see ParameterServer): afterwards params hold the chief's values.
  PsWorker(Communicator& comm, const NamedTensors& params, PsOptions o);
  ~PsWorker();
  void set_lr(double lr) { lr_ = lr; }  // sent with each push; the servers' optimizer uses it
  // After backward: pushes each shard's gradients (an undefined gradient counts as zeros) to its
  // server, then writes the servers' parameters into params in place. Gradients are left as
  // they are (zero them before the next backward as usual).
  void push_pull();
  // Tells every server this worker is done. The chief (rank 0) then waits until every worker is
  // done and receives the final parameters (that wait is under the communicator's timeout too).
  // Call once; push_pull is refused afterwards.
  void finish();
  bool is_chief() const { return comm_.rank() == 0; }
  int64_t clock() const { return clock_; }  // push_pull calls so far
  // Stops agreed through the servers: request_stop() marks this worker's next pushes; a server
  // that has seen such a push (or was signalled itself) says so in every reply from the end of
  // that round on (synchronous: all workers learn it at the same step), and stop_agreed() turns
  // true after the push_pull that received it.
  void request_stop() { stop_requested_ = true; }
  // Each server's statistics so far (a STATS request answered at once, between rounds), in
  // server order. Not counted in the stats themselves.
  std::vector<PsStats> server_stats();
  // The chief: every server's optimizer state now (a STATE request, answered at once), merged;
  // after finish(), the servers' final state (sent with the final parameters).
  PsOptimizerState server_state();
  bool stop_agreed() const { return stop_agreed_; }
  const PsStats& stats() const { return stats_; }
  const PsShardMap& shard_map() const { return map_; }

 private:
  void pull_from(int server);
  Communicator& comm_;
  PsOptions o_;
  NamedTensors params_;
  PsShardMap map_;
  std::vector<Tensor> buf_;  // per server: the flat send / receive buffer
  double lr_ = 0;
  int64_t clock_ = 0;
  bool finished_ = false;
  bool stop_requested_ = false, stop_agreed_ = false;
  std::vector<PsOptimizerState> final_state_;  // the chief, after finish()
  PsOptimizerState receive_state(int server);
  // A server's REPLY header (kind, its steps, lr, payload numel, stop), checked to be one.
  std::vector<double> receive_reply(int server);
  PsStats stats_;
};

}  // namespace kiln::dist
