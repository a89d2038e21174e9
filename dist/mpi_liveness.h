// Which ranks of an MPI communicator are alive, for the error of a wait that timed out or lost a
// rank (dist/mpi_comm.cpp). Every rank's pid, process start time and host are exchanged when the
// communicator is made, so a rank on the same host can be looked up in /proc (stopped, or dead),
// which no MPI call says. Every waiting rank answers pings on the communicator's probe duplicate
// with whom it waits for and how long it lately did not run, so a timed-out rank follows the
// chain of waits to the rank that stalled. Internal to dist/: it includes mpi.h.
//   ctest --test-dir build -L mpi -R fault
#pragma once

#if defined(KILN_HAVE_MPI)

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dist/mpi_detail.h"

namespace kiln::dist {

class MpiLiveness {
 public:
  using Clock = mpi_detail::Clock;

  // Who a rank is: so that a rank that stops answering can be looked up in /proc.
  struct Identity {
    int64_t pid = 0;
    int64_t start_ticks = 0;  // /proc/<pid>/stat field 22: a reused pid has another
    char host[64] = {};
  };

  // Collective over `probe` (an allgather of every rank's Identity); call it with the MPI lock
  // held. Starts, once per process, the thread that notices when the process did not run.
  MpiLiveness(MPI_Comm probe, int rank, int size);

  // What this rank's answer to a ping says about its current wait: the peer it needs (-1: a
  // collective, or nobody in particular) and how long this process did not run during it.
  void set_wait(int32_t peer, double suspended_s);
  // Answers the liveness pings other ranks sent (called while this rank waits).
  void answer_pings(double timeout_s);
  // "rank 1 (pid 4711 on node3: its process is gone ...) has died" for the candidates (every
  // other rank when empty) this host can see are dead; "" when none is.
  std::string dead_peers(std::vector<int> candidates) const;
  // Whom to blame for a timed-out wait on `candidates` (every other rank when empty): the ranks
  // that do not answer a ping, found by following the chain of waits from the ranks this one
  // waits for ("rank 2, which waits for rank 1 (no answer to a ping in 0.8 s: pid 4711 on node3:
  // stopped ...)"). A rank that answers but reports that it lately did not run for seconds (stopped,
  // then continued by the launcher as the job ends) is named the same way. "" when everyone answers
  // and nobody's wait leads to a silent or stopped rank.
  std::string blame(std::vector<int> candidates, double timeout_s);
  // What a rank that was itself stopped during a wait (begun at `start`, `suspended_s` of it not
  // run) adds to its error, so that, woken while the job ends, it does not blame the ranks that
  // gave up on it; "" when it ran.
  std::string self_suspended(Clock::time_point start, double suspended_s, double timeout_s) const;
  // "rank 3" or "ranks 0, 1".
  static std::string ranks_text(const std::vector<int>& ranks);

 private:
  std::string local_state(int r, bool* dead = nullptr) const;
  int32_t stopped_lately_ms(double timeout_s) const;
  std::vector<int> ping(std::vector<int> candidates, double window, double timeout_s, std::map<int, int>* waits,
                        std::map<int, int>* stopped_ms);

  MPI_Comm probe_;
  int rank_, size_;
  std::vector<Identity> ids_;                 // every rank's pid and host
  std::atomic<int32_t> waiting_on_{-1};       // the peer the current wait needs (answer to pings)
  std::atomic<int32_t> wait_stopped_ms_{0};   // how long this process did not run during the current wait
};

}  // namespace kiln::dist

#endif
