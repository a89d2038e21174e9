// SIGTERM and SIGUSR1 as requests to stop training (what SLURM sends before a job's time limit):
// a handler sets a flag that the training loop reads between steps (train/trainer.h,
// install_stop_signal_handlers).
//   ctest --test-dir build -R e2e.test_train
#pragma once

#include <csignal>

namespace kiln::train {

// Installs the handlers for its lifetime and restores the old ones; nothing where they are
// installed for the whole process (install_stop_signal_handlers: then a signal from before fit()
// counts).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The signal that asked for a checkpoint-and-exit, 0 for none.
  static int pending();

 private:
  bool own_;
  struct sigaction old_term_ = {}, old_usr1_ = {};
};

}  // namespace kiln::train
