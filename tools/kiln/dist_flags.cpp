// Data-parallel flags and the job session (MPI, communicator, timeline) of `kiln train/bench`.
//   ctest --test-dir build -L mpi
#include "tools/kiln/dist_flags.h"

#include <cstdio>
#include <chrono>
#include <exception>
#include <thread>

#include "dist/timeline.h"
#include "engine/error.h"
#include "tools/kiln/flag_checks.h"

namespace kiln::cli {

void add_dist_flags(CLI::App* sub, DistFlags* f, bool training) {
  sub->add_option("--strategy", f->strategy,
                  "under mpirun/srun: sync (all-reduce, the default there), async (Downpour parameter servers) "
                  "or ps (parameter servers, synchronous unless --ps-async)");
  dist::DistConfig& c = f->config;
  sub->add_option("--bucket-mb", c.sync.bucket_mb, "sync: gradient fusion bucket size in MB")
      ->capture_default_str()
      ->check(real(0, 1 << 16, true, false));
  sub->add_flag("--no-overlap", f->no_overlap, "sync: all-reduce after backward instead of during it");
  sub->add_flag("--fp16-allreduce", c.sync.fp16_compression, "sync: gradients cross the wire as float16");
  sub->add_option("--ps", c.ps_servers, "async, ps: number of parameter-server ranks (the last ones)")
      ->capture_default_str()
      ->check(whole(0, 1 << 20));
  sub->add_option("--staleness", c.staleness, "async, ps --ps-async: stale-synchronous bound (-1: none)")
      ->capture_default_str()
      ->check(whole(-1, 1 << 20));
  sub->add_flag("--ps-async", f->ps_async, "ps: servers apply each worker's gradients as they come");
  sub->add_option("--comm", c.comm, "communicator: auto, mpi, nccl")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}));
  std::vector<std::string> algorithms;
  std::string help;
  for (const dist::AllreduceAlgorithmInfo& a : dist::all_allreduce_algorithms()) {
    algorithms.push_back(a.name);
    help += (help.empty() ? "" : ", ") + std::string(a.name) + " (" + a.what + ")";
  }
  sub->add_option("--allreduce", f->allreduce, help)->capture_default_str()->check(CLI::IsMember(algorithms));
  sub->add_option("--comm-timeout", c.comm_options.timeout_s,
                  "seconds before a rank that waits on a silent peer gives up and ends the job")
      ->capture_default_str()
      ->check(real(0, 1e7, true, false));
  sub->add_option("--comm-warn", c.comm_options.warn_after_s, "seconds of waiting before a rank says whom it waits for")
      ->capture_default_str()
      ->check(real(0, 1e7, true, false));
  sub->add_flag("--no-comm-check", f->no_check, "skip matching each collective's signature across ranks");
  sub->add_option("--timeline", c.timeline, "Chrome-trace JSON per rank (FILE.rank<r>.json), for Perfetto");
  if (training) {
    sub->add_flag("--sync-bn", c.sync_bn, "sync: batch-norm statistics over all ranks");
    sub->add_flag("--scale-lr", c.scale_lr, "multiply the learning rate by the number of workers (with --warmup)");
  }
}

dist::DistConfig dist_config(const DistFlags& flags, bool launched) {
  dist::DistConfig c = flags.config;
  if (!flags.strategy.empty()) c.strategy = dist::parse_strategy(flags.strategy);
  else c.strategy = launched ? dist::StrategyKind::sync : dist::StrategyKind::none;
  c.sync.overlap = !flags.no_overlap;
  c.ps_synchronous = !flags.ps_async;
  c.comm_options.check = !flags.no_check;
  c.comm_options.algorithm = dist::parse_allreduce(flags.allreduce);
  dist::check_dist_config(c);
  return c;
}

DistSession::DistSession(const DistFlags& flags, Device device)
    : config_(dist_config(flags, dist::launched_distributed())) {
  if (config_.strategy == dist::StrategyKind::none) {  // this process alone
    if (!config_.timeline.empty()) dist::timeline::start(config_.timeline);
    return;
  }
  dist::init();
  comm_ = dist::make_communicator(dist::communicator_backend(config_), config_.comm_options, device);
  // Every rank, timeline or not (--timeline may be given to some ranks only): each rank's trace is
  // then written on rank 0's clock.
  if (comm_->size() > 1) dist::timeline::align_clocks(*comm_);
  if (!config_.timeline.empty()) dist::timeline::start(config_.timeline, comm_->rank(), comm_->size());
  if (comm_->rank() == 0)
    std::fprintf(stderr, "kiln: %d ranks (%s, %s communicator%s), strategy %s\n", comm_->size(),
                 dist::world_from_env().launcher.c_str(), comm_->backend().c_str(),
                 config_.comm_options.algorithm == dist::AllreduceAlgorithm::library
                     ? ""
                     : (std::string(", ") + dist::allreduce_name(config_.comm_options.algorithm) + " all-reduce").c_str(),
                 dist::strategy_name(config_.strategy));
}

DistSession::~DistSession() {
  if (std::uncaught_exceptions() > 0) return;  // main reports the error and aborts the job
  const std::string path = dist::timeline::stop();
  if (!path.empty()) std::fprintf(stderr, "kiln: timeline %s\n", path.c_str());
  comm_.reset();
  if (dist::mpi_initialized()) dist::finalize();
}

void DistSession::abort_job(const std::exception& e) const {
  const auto* ke = dynamic_cast<const Error*>(&e);
  const std::string msg = ke && !ke->message().empty() ? ke->message() : e.what();
  if (msg.rfind("rank ", 0) == 0)  // the communicator's errors name the rank already
    std::fprintf(stderr, "kiln: error: %s\n", msg.c_str());
  else
    std::fprintf(stderr, "kiln: rank %d: error: %s\n", rank(), msg.c_str());
  std::fflush(stderr);
  dist::timeline::stop();
  // Give the launcher's output forwarding a moment: MPI_Abort kills this process at once.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  dist::abort(1);
}

}  // namespace kiln::cli
