// The stop-signal handlers of the training loop (train/stop_signals.h).
#include "train/stop_signals.h"

#include "train/trainer.h"

namespace kiln::train {
namespace {

// The signal that asked for a checkpoint-and-exit (0: none). Set by the handler, read between steps.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }
bool g_process_wide = false;  // install_stop_signal_handlers() was called

void set_stop_handlers(struct sigaction* old_term, struct sigaction* old_usr1) {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, old_term);
  sigaction(SIGUSR1, &sa, old_usr1);
}

}  // namespace

StopSignals::StopSignals() : own_(!g_process_wide) {
  if (!own_) return;
  g_stop_signal = 0;
  set_stop_handlers(&old_term_, &old_usr1_);
}

StopSignals::~StopSignals() {
  if (!own_) return;
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

int StopSignals::pending() { return g_stop_signal; }

void install_stop_signal_handlers() {
  if (g_process_wide) return;
  set_stop_handlers(nullptr, nullptr);
  g_process_wide = true;
}

}  // namespace kiln::train
