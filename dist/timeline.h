// Timeline: a Chrome-trace JSON file per rank of what each thread did and when (forward,
// backward, each bucket's copy, wait and allreduce, optimizer step), opened in Perfetto
// (ui.perfetto.dev) or chrome://tracing, like HOROVOD_TIMELINE.
//
//   dist::timeline::start("trace.json", rank);     // writes trace.rank<r>.json at stop()
//   { dist::timeline::Span s("compute", "forward"); ... }
//   dist::timeline::stop();
//
// Spans are recorded as complete events ("ph":"X") with microsecond timestamps from one
// steady clock, so the ranks' files line up when opened together. Recording is a no-op (one
// relaxed atomic load) while no timeline runs. The file is written to a temporary name and renamed.
//   ctest --test-dir build -R timeline
#pragma once

#include <string>

namespace kiln::dist::timeline {

// Starts recording (the calling thread is "main"); `path` gets ".rank<r>" inserted before its extension when size > 1
// (`trace.json` -> `trace.rank1.json`). Any previous recording is written first.
void start(const std::string& path, int rank = 0, int size = 1);
// Writes the file and stops recording; returns its path ("" if none was running).
std::string stop();
bool enabled();
// The file a rank writes for `path`.
std::string rank_path(const std::string& path, int rank, int size);

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
void record(const char* category, const std::string& name, double begin_us, double end_us);

}  // namespace kiln::dist::timeline
