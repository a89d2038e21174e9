// Data-parallel flags and the job session (MPI, communicator, timeline) of `kiln train/bench`.
//   ctest --test-dir build -L mpi
#include "tools/kiln/dist_flags.h"

#include <cstdio>
#include <chrono>
#include <exception>
#include <thread>

#include "dist/timeline.h"
#include "engine/error.h"

namespace kiln::cli {

void add_dist_flags(CLI::App* sub, DistFlags* f, bool training) {
  sub->add_option("--strategy", f->strategy,
                  "under mpirun/srun: sync (all-reduce, the default there), async (Downpour parameter servers) "
                  "or ps (parameter servers, synchronous unless --ps-async)");
  sub->add_option("--bucket-mb", f->bucket_mb, "sync: gradient fusion bucket size in MB")->capture_default_str();
  sub->add_flag("--no-overlap", f->no_overlap, "sync: all-reduce after backward instead of during it");
  sub->add_flag("--fp16-allreduce", f->fp16_allreduce, "sync: gradients cross the wire as float16");
  sub->add_option("--ps", f->ps, "async, ps: number of parameter-server ranks (the last ones)")->capture_default_str();
  sub->add_option("--staleness", f->staleness, "async, ps --ps-async: stale-synchronous bound (-1: none)")
      ->capture_default_str();
  sub->add_flag("--ps-async", f->ps_async, "ps: servers apply each worker's gradients as they come");
  sub->add_option("--comm", f->comm, "communicator: auto, mpi, nccl")->capture_default_str();
  sub->add_option("--allreduce", f->allreduce, "library (MPI/NCCL's own) or ring (kiln's)")->capture_default_str();
  sub->add_option("--comm-timeout", f->comm_timeout, "seconds before a rank that waits on a silent peer gives up "
                                                     "and ends the job")->capture_default_str();
  sub->add_option("--comm-warn", f->comm_warn, "seconds of waiting before a rank says whom it waits for")
      ->capture_default_str();
  sub->add_flag("--no-comm-check", f->no_check, "skip matching each collective's signature across ranks");
  sub->add_option("--timeline", f->timeline, "Chrome-trace JSON per rank (FILE.rank<r>.json), for Perfetto");
  if (training) {
    sub->add_flag("--sync-bn", f->sync_bn, "sync: batch-norm statistics over all ranks");
    sub->add_flag("--scale-lr", f->scale_lr, "multiply the learning rate by the number of workers (with --warmup)");
  }
}

DistSession::DistSession(const DistFlags& flags, Device device) : flags_(flags) {
  const bool launched = dist::launched_distributed();
  if (!launched && flags.strategy.empty()) {
    if (!flags.timeline.empty()) dist::timeline::start(flags.timeline);
    return;
  }
  strategy_ = flags.strategy.empty() ? "sync" : flags.strategy;
  KILN_CHECK(strategy_ == "sync" || strategy_ == "async" || strategy_ == "ps",
             "--strategy: 'sync', 'async' or 'ps', not '", strategy_, "'");
  dist::init();
  dist::CommOptions co;
  co.timeout_s = flags.comm_timeout;
  co.warn_after_s = flags.comm_warn;
  co.check = !flags.no_check;
  co.algorithm = flags.allreduce;
  KILN_CHECK(co.timeout_s > 0 && co.warn_after_s > 0, "--comm-timeout and --comm-warn must be positive");
  KILN_CHECK(co.algorithm == "library" || co.algorithm == "ring", "--allreduce: 'library' or 'ring', not '",
             co.algorithm, "'");
  // Parameter servers talk point to point with any-source receives: MPI, whatever the device.
  const std::string backend = strategy_ == "sync" ? flags.comm : (flags.comm == "auto" ? "mpi" : flags.comm);
  comm_ = dist::make_communicator(backend, co, device);
  if (!flags.timeline.empty()) dist::timeline::start(flags.timeline, comm_->rank(), comm_->size());
  if (comm_->rank() == 0)
    std::fprintf(stderr, "kiln: %d ranks (%s, %s communicator), strategy %s\n", comm_->size(),
                 dist::world_from_env().launcher.c_str(), comm_->backend().c_str(), strategy_.c_str());
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

train::DistConfig DistSession::config() const {
  train::DistConfig c;
  c.strategy = strategy_;  // "none" without a session; the Trainer treats one rank as none
  c.sync.bucket_mb = flags_.bucket_mb;
  c.sync.overlap = !flags_.no_overlap;
  c.sync.fp16_compression = flags_.fp16_allreduce;
  c.sync_bn = flags_.sync_bn;
  c.scale_lr = flags_.scale_lr;
  c.ps_servers = flags_.ps;
  c.ps_synchronous = !flags_.ps_async;
  c.staleness = flags_.staleness;
  return c;
}

}  // namespace kiln::cli
