// MpiLiveness (dist/mpi_liveness.h): identities, /proc lookups, pings and the chain of waits.
//   ctest --test-dir build -L mpi -R fault
#include "dist/mpi_liveness.h"

#if defined(KILN_HAVE_MPI)

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace kiln::dist {
namespace {

using mpi_detail::Clock;
using mpi_detail::kPingTag;
using mpi_detail::kPongTag;
using mpi_detail::MpiLock;

// The state letter and start time of /proc/<pid>/stat ('?' when there is no such process).
std::pair<char, int64_t> proc_state(int64_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!f || !std::getline(f, text)) return {'?', 0};
  const size_t close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return {'?', 0};
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  char state = '?';
  int64_t start = 0;
  for (int i = 3; rest >> field; ++i) {  // field 3 is the state, 22 the start time
    if (i == 3) state = field.empty() ? '?' : field[0];
    if (i == 22) {
      start = std::atoll(field.c_str());
      break;
    }
  }
  return {state, start};
}

// When this process last ran again after not running for over 2 s (SIGSTOP then SIGCONT, a
// frozen host), and for how long (steady-clock ns; 0: never): a rank stopped while the others gave
// up on it must not blame them for its own stop. A thread ticks every 100 ms and a gap between two
// ticks is time the whole process did not run. SIGCONT itself says nothing: Open MPI sends it to
// every rank when it ends a job.
std::atomic<int64_t> g_resumed_ns{0}, g_stopped_for_ns{0};
void watch_stops() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::thread([] {
      Clock::time_point last = Clock::now();
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const Clock::time_point now = Clock::now();
        if (now - last > std::chrono::seconds(2)) {
          g_stopped_for_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count());
          g_resumed_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
        }
        last = now;
      }
    }).detach();
  });
}

MpiLiveness::Identity my_identity() {
  MpiLiveness::Identity id;
  id.pid = int64_t(::getpid());
  id.start_ticks = proc_state(id.pid).second;
  ::gethostname(id.host, sizeof(id.host) - 1);
  return id;
}

}  // namespace

MpiLiveness::MpiLiveness(MPI_Comm probe, int rank, int size) : probe_(probe), rank_(rank), size_(size) {
  ids_.resize(size_t(size_));
  watch_stops();
  Identity me = my_identity();
  MPI_Allgather(&me, sizeof(Identity), MPI_BYTE, ids_.data(), sizeof(Identity), MPI_BYTE, probe_);
}

void MpiLiveness::set_wait(int32_t peer, double suspended_s) {
  waiting_on_ = peer;
  wait_stopped_ms_ = int32_t(std::min(suspended_s * 1e3, 2e9));
}

std::string MpiLiveness::self_suspended(Clock::time_point wait_start, double suspended_s, double timeout_s) const {
  const int64_t resumed = g_resumed_ns.load();
  const int64_t start = std::chrono::duration_cast<std::chrono::nanoseconds>(wait_start.time_since_epoch()).count();
  const bool resumed_lately = resumed > 0 && double(start - resumed) < timeout_s * 1e9;
  if (suspended_s <= 0 && !resumed_lately) return "";
  char b[200];
  if (resumed_lately)
    std::snprintf(b, sizeof b, " (this rank itself did not run for %.1f s, until %.1f s ago: stopped or frozen; the "
                  "others may have ended the job because of it)",
                  double(g_stopped_for_ns.load()) * 1e-9,
                  double(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count() -
                         resumed) * 1e-9);
  else
    std::snprintf(b, sizeof b, " (this rank itself did not run for %.1f s of the wait: stopped or frozen; the others "
                  "may have ended the job because of it)", suspended_s);
  return b;
}

void MpiLiveness::answer_pings(double timeout_s) {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    {
      MpiLock lock;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, probe_, &flag, &st) != MPI_SUCCESS || !flag) return;
      int32_t token = 0;
      MPI_Recv(&token, 1, MPI_INT32_T, st.MPI_SOURCE, kPingTag, probe_, MPI_STATUS_IGNORE);
      // The answer is whom this rank waits for (-1: a collective, or nobody in particular), so a
      // pinger can follow the chain of waits to the rank that stalled, and for how many ms this
      // rank itself lately did not run: a stopped rank that the launcher continues as it ends
      // the job answers, and must still be the one named. Static: the buffer must outlive the
      // freed request.
      static thread_local int32_t answer[64][2];
      static thread_local unsigned next = 0;
      int32_t* a = answer[next++ % 64];
      a[0] = waiting_on_.load();
      a[1] = stopped_lately_ms(timeout_s);
      MPI_Request req;  // tiny: eager, completes without the pinger's help
      MPI_Isend(a, 2, MPI_INT32_T, st.MPI_SOURCE, kPongTag, probe_, &req);
      MPI_Request_free(&req);
    }
  }
}

// How long this rank did not run (ms, 0: it ran), if that ended within the last --comm-timeout
// or during the current wait: what a ping's answer reports.
int32_t MpiLiveness::stopped_lately_ms(double timeout_s) const {
  const int64_t resumed = g_resumed_ns.load();
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  int32_t ms = wait_stopped_ms_.load();
  if (resumed > 0 && double(now - resumed) < timeout_s * 1e9)
    ms = std::max(ms, int32_t(std::min(double(g_stopped_for_ns.load()) * 1e-6, 2e9)));
  return ms;
}

// "pid 4711 on node3: stopped (state T)", "pid 4711 on node3: gone", or "" when the rank runs
// on another host (nothing to look at) or is running.
std::string MpiLiveness::local_state(int r, bool* dead) const {
  const Identity& id = ids_[size_t(r)];
  if (std::strncmp(id.host, ids_[size_t(rank_)].host, sizeof(id.host)) != 0 || id.pid <= 0) return "";
  const auto [state, start] = proc_state(id.pid);
  const std::string who = "pid " + std::to_string(id.pid) + " on " + id.host;
  const bool gone = state == '?' || state == 'Z' || state == 'X' || (id.start_ticks && start != id.start_ticks);
  if (dead) *dead = gone;
  if (gone) return who + ": its process is gone (" + (state == 'Z' ? "a zombie" : "exited or killed") + ")";
  if (state == 'T' || state == 't') return who + ": stopped (state " + std::string(1, state) + ", SIGSTOP or a debugger)";
  return "";
}

std::string MpiLiveness::dead_peers(std::vector<int> candidates) const {
  if (candidates.empty())
    for (int p = 0; p < size_; ++p)
      if (p != rank_) candidates.push_back(p);
  std::string out;
  for (int p : candidates) {
    bool dead = false;
    const std::string st = local_state(p, &dead);
    if (dead) out += std::string(out.empty() ? "" : "; ") + "rank " + std::to_string(p) + " (" + st + ") has died";
  }
  return out;
}

// Pings `candidates` (every other rank when empty) for up to `window` seconds. Returns those
// that stay silent; the others' answers (whom each waits for, and how long each lately did not
// run) go to *waits and *stopped_ms.
std::vector<int> MpiLiveness::ping(std::vector<int> candidates, double window, double timeout_s,
                                 std::map<int, int>* waits, std::map<int, int>* stopped_ms) {
  if (candidates.empty())
    for (int p = 0; p < size_; ++p)
      if (p != rank_) candidates.push_back(p);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<int32_t> out(candidates.size(), rank_), in(2 * candidates.size(), -1);
  std::vector<MPI_Request> sends(candidates.size()), recvs(candidates.size());
  {
    MpiLock lock;
    for (size_t i = 0; i < candidates.size(); ++i) {
      MPI_Irecv(&in[2 * i], 2, MPI_INT32_T, candidates[i], kPongTag, probe_, &recvs[i]);
      MPI_Isend(&out[i], 1, MPI_INT32_T, candidates[i], kPingTag, probe_, &sends[i]);
    }
  }
  const auto t0 = Clock::now();
  std::vector<char> answered(candidates.size(), 0);
  size_t left = candidates.size();
  while (left > 0 && std::chrono::duration<double>(Clock::now() - t0).count() < window) {
    answer_pings(timeout_s);  // the others probe too
    {
      MpiLock lock;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (answered[i]) continue;
        int done = 0;
        MPI_Test(&recvs[i], &done, MPI_STATUS_IGNORE);
        if (done) answered[i] = 1, --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<int> silent;
  {
    MpiLock lock;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!answered[i]) {
        silent.push_back(candidates[i]);
        MPI_Cancel(&recvs[i]);
        MPI_Request_free(&recvs[i]);
      } else {
        if (waits) (*waits)[candidates[i]] = in[2 * i];
        if (stopped_ms && in[2 * i + 1] > 0) (*stopped_ms)[candidates[i]] = in[2 * i + 1];
      }
      MPI_Request_free(&sends[i]);  // a ping to a dead rank may never complete
    }
  }
  return silent;
}

std::string MpiLiveness::blame(std::vector<int> candidates, double timeout_s) {
  const double window = std::min(3.0, std::max(0.5, timeout_s / 10));
  std::vector<char> seen(size_t(size_), 0);
  seen[size_t(rank_)] = 1;
  std::string chain;
  for (int hop = 0; hop < size_; ++hop) {
    for (int p : candidates) seen[size_t(p)] = 1;
    // This host's view of each candidate as the pings go out: one stopped then and continued
    // during the window (a launcher's SIGCONT as it ends the job, an operator's) is still the one
    // that did not answer; it gets one more, longer window (up to a quarter of the timeout) to
    // answer for itself: a process just continued on a loaded machine may take more than a
    // window to be scheduled and reach its answer.
    std::map<int, std::string> at_ping;
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && (candidates.empty() || std::count(candidates.begin(), candidates.end(), p)))
        at_ping[p] = local_state(p);
    const auto stopped_state = [](const std::string& st) { return st.find(": stopped (state") != std::string::npos; };
    std::map<int, int> waits, stopped_ms;
    std::vector<int> silent = ping(candidates, window, timeout_s, &waits, &stopped_ms);
    std::vector<int> continued;
    for (int p : silent)
      if (stopped_state(at_ping[p]) && local_state(p).empty()) continued.push_back(p);
    if (!continued.empty()) {
      std::map<int, int> waits2, stopped_ms2;
      const double again = std::max(window, std::min(4 * window, timeout_s / 4));
      const std::vector<int> still = ping(continued, again, timeout_s, &waits2, &stopped_ms2);
      for (int p : continued) {
        if (std::count(still.begin(), still.end(), p)) continue;
        silent.erase(std::remove(silent.begin(), silent.end(), p), silent.end());
        if (waits2.count(p)) waits[p] = waits2[p];
        if (stopped_ms2.count(p)) stopped_ms[p] = stopped_ms2[p];
      }
    }
    if (!silent.empty()) {
      std::string why;
      for (int p : silent) {
        std::string st = local_state(p);
        if (st.empty() && stopped_state(at_ping[p])) st = at_ping[p];  // continued since, and still silent
        if (!st.empty()) why += "; rank " + std::to_string(p) + ", " + st;
      }
      char w[32];
      std::snprintf(w, sizeof w, "%.1f", window);
      return chain + ranks_text(silent) + " (no answer to a ping in " + w + " s" +
             (why.empty() ? std::string(": stopped, dead, or blocked outside kiln's communication") : why) + ")";
    }
    if (!stopped_ms.empty()) {
      std::vector<int> stopped;
      std::string why;
      for (const auto& [p, ms] : stopped_ms) {
        stopped.push_back(p);
        char w[160];
        std::snprintf(w, sizeof w, "%srank %d did not run for %.1f s before it answered a ping: stopped or frozen",
                      why.empty() ? "" : "; ", p, ms * 1e-3);
        why += w;
      }
      return chain + ranks_text(stopped) + " (" + why + ")";
    }
    // Everyone answered and ran: the stall is further down the chain of waits, if anywhere.
    std::vector<int> next;
    std::string via;
    for (const auto& [p, target] : waits) {
      if (target < 0 || target >= size_ || seen[size_t(target)]) continue;
      next.push_back(target);
      via += (via.empty() ? "" : " and ") + ("rank " + std::to_string(p) + ", which waits for ");
    }
    if (next.empty()) return "";
    chain += via;
    candidates = next;
  }
  return "";
}

std::string MpiLiveness::ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace kiln::dist

#endif
