// Chrome-trace timeline: events kept in memory under a mutex, written once at stop().
//   ctest --test-dir build -R timeline
#include "dist/timeline.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/error.h"
#include "io/formats/digest.h"
#include "io/formats/json_limits.h"

namespace kiln::dist::timeline {
namespace {

struct Event {
  const char* category;
  std::string name;
  double ts, dur;
  int tid;
};

struct Recorder {
  std::mutex mu;
  std::string path;
  int rank = 0;
  std::vector<Event> events;
  std::vector<std::pair<int, std::string>> thread_names;
  double shift_us = 0, rtt_us = 0;  // align_clocks
  bool aligned = false;
};

std::atomic<bool> g_on{false};
Recorder& recorder() {
  static Recorder r;
  return r;
}

const auto kEpoch = std::chrono::steady_clock::now();

int thread_row() {
  static std::atomic<int> next{0};
  thread_local int row = next++;
  return row;
}

}  // namespace

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - kEpoch).count();
}

double origin_us() { return std::chrono::duration<double, std::micro>(kEpoch.time_since_epoch()).count(); }

std::string rank_path(const std::string& path, int rank, int size) {
  if (size <= 1) return path;
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  const std::string tag = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + tag;
  return path.substr(0, dot) + tag + path.substr(dot);
}

void start(const std::string& path, int rank, int size) {
  stop();
  {
    Recorder& r = recorder();
    std::lock_guard<std::mutex> lock(r.mu);
    r.path = rank_path(path, rank, size);
    r.rank = rank;
    r.events.clear();
  }
  set_thread_name("main");  // the thread that starts the timeline
  g_on.store(true, std::memory_order_release);
}

bool enabled() { return g_on.load(std::memory_order_relaxed); }

void set_thread_name(const std::string& name) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  const int row = thread_row();
  for (auto& [tid, n] : r.thread_names)
    if (tid == row) {
      n = name;
      return;
    }
  r.thread_names.emplace_back(row, name);
}

void record(const char* category, const std::string& name, double begin_us, double end_us) {
  if (!enabled()) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.events.push_back({category, name, begin_us, end_us - begin_us, thread_row()});
}

Span::Span(const char* category, const std::string& name) : category_(category) {
  if (!enabled()) return;
  name_ = name;
  begin_us_ = now_us();
}

Span::~Span() {
  if (begin_us_ >= 0) record(category_, name_, begin_us_, now_us());
}

std::string stop() {
  if (!g_on.exchange(false)) return "";
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r.rank},
                    {"args", {{"name", "rank " + std::to_string(r.rank)}}}});
  for (const auto& [tid, name] : r.thread_names)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r.rank}, {"tid", tid}, {"args", {{"name", name}}}});
  for (const Event& e : r.events)
    events.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"ts", e.ts + r.shift_us}, {"dur", e.dur},
                      {"pid", r.rank}, {"tid", e.tid}});
  nlohmann::json doc = {{"traceEvents", std::move(events)},
                        {"displayTimeUnit", "ms"},
                        {"otherData",
                         {{"rank", r.rank},
                          {"clock", r.aligned ? "rank 0's" : "this process's"},
                          {"clock_shift_us", r.shift_us},
                          {"clock_sync_round_trip_us", r.rtt_us}}}};
  io::write_file_atomic(r.path, doc.dump());
  r.events.clear();
  return r.path;
}

std::pair<double, double> align_clocks(Communicator& comm, int rounds) {
  KILN_CHECK(rounds >= 1, "timeline::align_clocks: rounds must be at least 1, got ", rounds);
  constexpr int kTag = 7400;
  const int n = comm.size(), me = comm.rank();
  double shift = 0, best_rtt = 0;
  Tensor t = zeros({1}, DType::float64);
  if (me == 0) {
    // Each rank in turn, so no reply waits behind another rank's probe.
    for (int r = 1; r < n; ++r)
      for (int k = 0; k < rounds; ++k) {
        comm.recv(t, r, kTag);
        t.data<double>()[0] = now_us();
        comm.send(t, r, kTag);
      }
  } else {
    best_rtt = -1;
    for (int k = 0; k < rounds; ++k) {
      const double t1 = now_us();
      comm.send(t, 0, kTag);
      comm.recv(t, 0, kTag);
      const double t2 = now_us(), t0 = t.data<double>()[0];
      if (best_rtt < 0 || t2 - t1 < best_rtt) {
        best_rtt = t2 - t1;
        shift = t0 - (t1 + t2) / 2;  // rank 0's time at the midpoint of the round trip
      }
    }
  }
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.shift_us = shift;
  r.rtt_us = best_rtt;
  r.aligned = true;
  return {shift, best_rtt};
}

int64_t merge(const std::vector<std::string>& inputs, const std::string& out) {
  KILN_CHECK(!inputs.empty(), "timeline merge: no input files");
  nlohmann::json events = nlohmann::json::array();
  std::vector<std::pair<int64_t, std::string>> ranks;  // pid -> file, to refuse two files of one rank
  int64_t count = 0;
  for (const std::string& path : inputs) {
    const std::string text = io::read_text_file(path, "timeline", uint64_t(1) << 30);
    io::check_json_depth(text, "timeline '" + path + "'");
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    KILN_CHECK(!doc.is_discarded() && doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array(),
               "timeline merge: '", path, "' is not a Chrome trace (a JSON object with a \"traceEvents\" array)");
    int64_t pid = -1;
    for (const auto& e : doc["traceEvents"]) {
      KILN_CHECK(e.is_object() && e.contains("pid") && e["pid"].is_number_integer(), "timeline merge: '", path,
                 "': an event without an integer \"pid\": ", io::clip_json(e));
      KILN_CHECK(e["pid"].is_number_unsigned() && e["pid"].get<uint64_t>() <= uint64_t(INT32_MAX), "timeline merge: '",
                 path, "': \"pid\" is ", io::clip_json(e["pid"]), ", not a rank (0 to 2^31 - 1)");
      const int64_t p = e["pid"].get<int64_t>();
      KILN_CHECK(pid < 0 || p == pid, "timeline merge: '", path, "' holds events of ranks ", pid, " and ", p,
                 " (merge the per-rank files kiln writes)");
      pid = p;
    }
    for (const auto& [p, other] : ranks)
      KILN_CHECK(p != pid, "timeline merge: '", path, "' and '", other, "' are both rank ", pid);
    if (pid >= 0) ranks.push_back({pid, path});
    const bool aligned = doc.contains("otherData") && doc["otherData"].is_object() &&
                         doc["otherData"].contains("clock") && doc["otherData"]["clock"] == "rank 0's";
    KILN_CHECK(aligned || inputs.size() == 1, "timeline merge: '", path, "' is not on rank 0's clock (written by a ",
               "run whose ranks did not align their clocks); its times would not line up with the others'");
    for (auto& e : doc["traceEvents"]) {
      events.push_back(std::move(e));
      ++count;
    }
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"},
                        {"otherData", {{"ranks", ranks.size()}, {"clock", "rank 0's"}}}};
  io::write_file_atomic(out, doc.dump());
  return count;
}

}  // namespace kiln::dist::timeline
