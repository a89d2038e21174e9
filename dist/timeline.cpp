// Chrome-trace timeline: events kept in memory under a mutex, written once at stop().
//   ctest --test-dir build -R timeline
#include "dist/timeline.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "io/formats/digest.h"

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
    events.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"ts", e.ts}, {"dur", e.dur},
                      {"pid", r.rank}, {"tid", e.tid}});
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  io::write_file_atomic(r.path, doc.dump());
  r.events.clear();
  return r.path;
}

}  // namespace kiln::dist::timeline
