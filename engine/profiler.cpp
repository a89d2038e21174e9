#include "engine/profiler.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>

namespace kiln::profiler {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::vector<Row> g_rows(1);  // row 0: outside any scope
std::unordered_map<std::string, uint32_t> g_ids;

thread_local uint32_t t_scope = 0;
// Nanoseconds spent in child scopes of the scope now open (for exclusive time).
thread_local int64_t t_child_ns = 0;

uint32_t intern(const std::string& name, const std::string& kind) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_ids.find(name);
  if (it != g_ids.end()) return it->second;
  uint32_t id = uint32_t(g_rows.size());
  Row r;
  r.name = name;
  r.kind = kind;
  g_rows.push_back(r);
  g_ids.emplace(name, id);
  return id;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void enable(bool on) { g_on.store(on, std::memory_order_relaxed); }
bool enabled() { return g_on.load(std::memory_order_relaxed); }

void reset() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_rows.assign(1, Row{});
  g_ids.clear();
}

std::vector<Row> rows() {
  std::lock_guard<std::mutex> lock(g_mu);
  return std::vector<Row>(g_rows.begin() + 1, g_rows.end());
}

uint32_t current_scope() { return t_scope; }

ProfileScope::ProfileScope(const std::string& name, const std::string& kind) {
  if (!enabled()) return;
  active_ = true;
  id_ = intern(name, kind);
  parent_ = t_scope;
  t_scope = id_;
  child_ns_at_start_ = t_child_ns;
  t_child_ns = 0;
  start_ns_ = now_ns();
}

ProfileScope::~ProfileScope() {
  if (!active_) return;
  int64_t total = now_ns() - start_ns_;
  int64_t exclusive = total - t_child_ns;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_rows[id_].forward_ms += double(exclusive) * 1e-6;
    g_rows[id_].forward_calls += 1;
  }
  t_scope = parent_;
  t_child_ns = child_ns_at_start_ + total;
}

void add_backward(uint32_t id, int64_t ns) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (id >= g_rows.size()) return;
  g_rows[id].backward_ms += double(ns) * 1e-6;
  g_rows[id].backward_calls += 1;
}

}  // namespace kiln::profiler
