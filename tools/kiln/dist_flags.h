// The data-parallel flags `kiln train` and `kiln bench` share, and the job session they start:
// MPI (when launched by mpirun or srun, or when a strategy is asked for), the communicator, the
// timeline. tf_cnn_benchmarks' --variable_update is --strategy here. The flags fill a
// dist::DistConfig; dist/strategy.h parses the strategy and checks the configuration.
//   mpirun -np 4 kiln train --model resnet18 --data cifar10 --strategy sync --bucket-mb 25
//   mpirun -np 5 kiln train --model mnist-cnn --data fashion-mnist --strategy ps --ps 1
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "dist/comm.h"
#include "dist/strategy.h"
#include "engine/device.h"

namespace kiln::cli {

struct DistFlags {
  std::string strategy;     // "": sync under a launcher, none otherwise
  std::string allreduce = "library";  // a name of dist::all_allreduce_algorithms()
  dist::DistConfig config;  // the flags that set a field as they are (--bucket-mb, --ps, --comm, ...)
  bool no_overlap = false, ps_async = false, no_check = false;  // the ones that clear a field
};

void add_dist_flags(CLI::App* sub, DistFlags* flags, bool training);
// The configuration the flags ask for, checked (dist::check_dist_config); `launched`: under
// mpirun or srun, where no --strategy means sync.
dist::DistConfig dist_config(const DistFlags& flags, bool launched);

// Lives for the whole command. Without a launcher and without --strategy it does nothing.
class DistSession {
 public:
  DistSession(const DistFlags& flags, Device device);
  ~DistSession();  // writes the timeline; ends MPI unless an exception is unwinding (then main aborts)
  DistSession(const DistSession&) = delete;
  DistSession& operator=(const DistSession&) = delete;

  bool active() const { return comm_ != nullptr && comm_->size() > 1; }
  const std::shared_ptr<dist::Communicator>& comm() const { return comm_; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int size() const { return comm_ ? comm_->size() : 1; }
  dist::StrategyKind strategy() const { return config_.strategy; }
  // The configuration of this job (strategy none without a session).
  const dist::DistConfig& config() const { return config_; }
  // Runs f; in a job of several ranks an exception from it is reported and ends the whole job at
  // once (MPI_Abort) instead of unwinding through objects whose destructors would wait for peers.
  template <class F>
  auto guard(F&& f) -> decltype(f()) {
    if (!active()) return f();
    try {
      return f();
    } catch (const std::exception& e) {
      abort_job(e);
    }
  }
  [[noreturn]] void abort_job(const std::exception& e) const;

 private:
  dist::DistConfig config_;
  std::shared_ptr<dist::Communicator> comm_;
};

}  // namespace kiln::cli
