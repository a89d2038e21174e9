// Which backends an op call may use, in what order: the process-wide preference (KILN_BACKEND,
// set_backend_preference, `--backend`) and a per-thread override for a scope (BackendGuard: a
// layer's own setting, a test pinning one implementation). Kept apart from engine/dispatch.h so
// that autograd, which records the override in force with each node, includes no templates.
//
// A preference is a comma-separated list of backend names tried in order ("onednn,native").
// Ops that none of the listed backends implement fall back to the others in `auto` order unless
// the preference is strict (tests use strict lists to pin one implementation). "auto" or ""
// means `auto` order: every candidate on the device by its priority (engine/dispatch.h).
// KILN_BACKEND sets the initial process-wide list; KILN_BACKEND_STRICT=1 makes it strict.
//
// Thread-safety: preferences are immutable and interned (one object per distinct list, alive for
// the process), so reading the effective one takes no lock: an atomic pointer for the
// process-wide one, a thread-local for the override. Test: ctest --test-dir build -R dispatch
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct BackendPreference {
  std::vector<std::string> backends;  // empty: auto
  std::vector<int> ids;               // backend_id() of each name, same order (made on first mention)
  bool strict = false;
  uint32_t id = 0;  // the same for equal preferences: part of the dispatch cache key
};

// The interned preference for a comma-separated list ("auto" or "": auto).
std::shared_ptr<const BackendPreference> make_backend_preference(const std::string& csv, bool strict = false);

void set_backend_preference(const std::string& csv, bool strict = false);
std::string backend_preference();  // the effective list, comma-separated ("auto" if none)

// Overrides the preference on this thread for its scope (empty csv / null: no override).
// Autograd nodes keep the override in force when they were recorded and reinstate it for their
// backward, so a layer's backend setting covers its backward pass too.
class BackendGuard {
 public:
  explicit BackendGuard(const std::string& csv, bool strict = false);
  explicit BackendGuard(std::shared_ptr<const BackendPreference> pref);
  ~BackendGuard();
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;

 private:
  bool active_;
  std::shared_ptr<const BackendPreference> prev_;
};

// Throws kiln::Error "<what>: unknown backend 'x' (known: auto, native, ref, ...)" unless every
// name of the comma-separated list is "auto" or a backend some op is registered for. `what` names
// where the list came from (KILN_BACKEND, --backend). KILN_BACKEND is checked on first use this
// way, and KILN_BACKEND_STRICT must be 0 or 1.
void check_backend_list(const std::string& csv, const std::string& what);

// Backend names as small integers, so dispatch compares ints: the id of `name`, made on first
// use (registration or a preference naming it), stable for the process.
int backend_id(const std::string& name);
const std::string& backend_name(int id);

namespace detail {
const BackendPreference& effective_preference();
// This thread's BackendGuard override (null when none is open).
const std::shared_ptr<const BackendPreference>& current_override();
std::vector<std::string> split_csv(const std::string& csv);
}  // namespace detail

}  // namespace kiln
