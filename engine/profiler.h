// Per-layer timing, as `caffe time` and convnet-benchmarks printed it. While enabled, each
// ProfileScope (Module::operator() opens one named by the module's path) times the forward work
// inside it, and every autograd node records the innermost scope open when it was created, so the
// engine charges its backward time to the same layer. Nested scopes: time is charged to the
// innermost one only (exclusive time), so rows add up to the total. Off by default; when off a
// scope costs one relaxed atomic load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::profiler {

void enable(bool on = true);
bool enabled();
void reset();

struct Row {
  std::string name;  // scope (layer path such as "features.3")
  std::string kind;  // module repr ("Conv2d(64, 192, kernel=5, ...)")
  double forward_ms = 0;
  double backward_ms = 0;
  int64_t forward_calls = 0;
  int64_t backward_calls = 0;
};
// Rows in order of first appearance (forward order).
std::vector<Row> rows();

// Scope ids index the rows; 0 means "no scope".
uint32_t current_scope();

// RAII: opens a named scope on this thread.
class ProfileScope {
 public:
  ProfileScope(const std::string& name, const std::string& kind);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  bool active_ = false;
  uint32_t id_ = 0;
  uint32_t parent_ = 0;
  int64_t start_ns_ = 0;
  int64_t child_ns_at_start_ = 0;
};

// Used by the autograd engine: adds backward time to scope `id`.
void add_backward(uint32_t id, int64_t ns);
int64_t now_ns();

}  // namespace kiln::profiler
