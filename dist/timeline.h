// Timeline: a Chrome-trace JSON file per rank of what each thread did and when (forward,
// backward, each bucket's copy, wait and allreduce, optimizer step), opened in Perfetto
// (ui.perfetto.dev) or chrome://tracing, like HOROVOD_TIMELINE.
//
//   dist::timeline::start("trace.json", rank);     // writes trace.rank<r>.json at stop()
//   { dist::timeline::Span s("compute", "forward"); ... }
//   dist::timeline::stop();
//
// Spans are recorded as complete events ("ph":"X") with microsecond timestamps from the process's
// steady clock. Each rank starts at its own time and a node's clock is not another's, so a job's
// ranks call align_clocks() once: a few ping-pongs with rank 0 estimate how far each rank's clock
// is from rank 0's (Cristian's method, the round trip of least delay), and every file is written on
// rank 0's clock; merge() then puts the ranks' files into one trace with a process row per rank.
// Recording is a no-op (one relaxed atomic load) while no timeline runs. Files are written to a
// temporary name and renamed.
//   ctest --test-dir build -R timeline
#pragma once

#include <string>
#include <vector>

#include "dist/comm.h"

namespace kiln::dist::timeline {

// Starts recording (the calling thread is "main"); `path` gets ".rank<r>" inserted before its extension when size > 1
// (`trace.json` -> `trace.rank1.json`). Any previous recording is written first.
void start(const std::string& path, int rank = 0, int size = 1);
// Writes the file and stops recording; returns its path ("" if none was running).
std::string stop();
bool enabled();
// The file a rank writes for `path`.
std::string rank_path(const std::string& path, int rank, int size);

// Collective over `comm` (call it once every rank's timeline has started, before other traffic):
// estimates this rank's clock against rank 0's from `rounds` ping-pongs and writes the file on
// rank 0's clock. Returns {shift_us, round_trip_us}: what is added to this rank's times (0 on rank
// 0), and the round trip of the ping-pong it came from (the estimate is within half of it).
std::pair<double, double> align_clocks(Communicator& comm, int rounds = 16);

// Merges per-rank Chrome traces (as written above: a process row per rank) into one file `out`,
// each rank's events on its own row; returns the number of events. A file that is not such a
// trace, or two files of one rank, is a kiln::Error naming it.
int64_t merge(const std::vector<std::string>& inputs, const std::string& out);

// Names the calling thread's row ("main", "communication").
void set_thread_name(const std::string& name);

// A span on the calling thread from construction to destruction. The name is copied only while a
// timeline records, so hot paths pass names they keep (no allocation when off).
class Span {
 public:
  Span(const char* category, const std::string& name);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  const char* category_;
  std::string name_;
  double begin_us_ = -1;  // < 0: not recording
};

// A span with explicit times (microseconds on the timeline clock), e.g. a bucket's wait
// measured after the fact.
double now_us();
// This process's origin of now_us() on the host's monotonic clock (steady_clock's epoch), in
// microseconds: what two processes of one host can compare exactly.
double origin_us();
void record(const char* category, const std::string& name, double begin_us, double end_us);

}  // namespace kiln::dist::timeline
