// Interned backend preferences and the lock-free read of the effective one. See the header.
#include "engine/backend_preference.h"

#include <atomic>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "engine/dispatch.h"
#include "engine/error.h"

namespace kiln {

namespace {

std::shared_ptr<const BackendPreference> intern_preference(const std::string& csv, bool strict);  // below

// Interning: one immutable object per (list, strict), kept for the process (a handful exist).
std::mutex g_intern_mu;
std::map<std::pair<std::string, bool>, std::shared_ptr<const BackendPreference>>& interned() {
  static auto* m = new std::map<std::pair<std::string, bool>, std::shared_ptr<const BackendPreference>>();
  return *m;
}

std::mutex g_names_mu;
std::deque<std::string>& names() {  // deque: references stay valid as names are added
  static auto* n = new std::deque<std::string>();
  return *n;
}

std::atomic<const BackendPreference*> g_pref{nullptr};  // process-wide; interned, never freed
thread_local std::shared_ptr<const BackendPreference> t_override;  // BackendGuard

const BackendPreference* process_preference() {
  const BackendPreference* p = g_pref.load(std::memory_order_acquire);
  if (p) return p;
  const char* list = std::getenv("KILN_BACKEND");
  const char* strict = std::getenv("KILN_BACKEND_STRICT");
  // A misspelt name would otherwise fall back to auto order without a word.
  if (list) check_backend_list(list, "KILN_BACKEND");
  KILN_CHECK(!strict || std::string(strict).empty() || std::string(strict) == "0" || std::string(strict) == "1",
             "KILN_BACKEND_STRICT: '", strict, "' is not 0 or 1");
  const BackendPreference* fresh =
      make_backend_preference(list ? list : "", strict && std::string(strict) == "1").get();
  const BackendPreference* expected = nullptr;
  // A concurrent set_backend_preference wins over the environment.
  g_pref.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel);
  return g_pref.load(std::memory_order_acquire);
}

}  // namespace

namespace detail {

std::vector<std::string> split_csv(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    if (a == std::string::npos) continue;
    item = item.substr(a, b - a + 1);
    if (item == "auto") return {};
    out.push_back(item);
  }
  return out;
}

const std::shared_ptr<const BackendPreference>& current_override() { return t_override; }

const BackendPreference& effective_preference() {
  if (t_override) return *t_override;
  return *process_preference();
}

}  // namespace detail

void check_backend_list(const std::string& csv, const std::string& what) {
  const std::vector<std::string> names = detail::split_csv(csv);
  if (names.empty()) return;  // "", "auto"
  std::set<std::string> known;
  for (const OpTableBase* op : registry().ops())
    for (const std::string& c : op->candidates()) known.insert(c.substr(0, c.find('/')));
  for (const std::string& n : names) {
    if (known.count(n)) continue;
    std::string list = "auto";
    for (const std::string& k : known) list += ", " + k;
    KILN_THROW(what, ": unknown backend '", n, "' (known: ", list, ")");
  }
}

int backend_id(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_names_mu);
  auto& n = names();
  for (size_t i = 0; i < n.size(); ++i)
    if (n[i] == name) return int(i);
  n.push_back(name);
  return int(n.size() - 1);
}

const std::string& backend_name(int id) {
  std::lock_guard<std::mutex> lock(g_names_mu);
  return names().at(size_t(id));
}

std::shared_ptr<const BackendPreference> make_backend_preference(const std::string& csv, bool strict) {
  // A layer with its own backend opens a guard per call with the same list: the last few lists
  // this thread asked for are answered without parsing or the interning lock.
  struct Recent {
    std::string csv;
    bool strict;
    std::shared_ptr<const BackendPreference> pref;
  };
  thread_local Recent recent[4];
  thread_local unsigned next = 0;
  for (const Recent& r : recent)
    if (r.pref && r.strict == strict && r.csv == csv) return r.pref;
  Recent& slot = recent[next++ % 4];
  slot.csv = csv;
  slot.strict = strict;
  slot.pref = intern_preference(csv, strict);
  return slot.pref;
}

namespace {

std::shared_ptr<const BackendPreference> intern_preference(const std::string& csv, bool strict) {
  std::vector<std::string> list = detail::split_csv(csv);
  std::string key;
  for (const auto& b : list) key += b + ",";
  if (list.empty()) strict = false;  // strict auto is auto
  std::lock_guard<std::mutex> lock(g_intern_mu);
  auto& m = interned();
  auto it = m.find({key, strict});
  if (it != m.end()) return it->second;
  auto p = std::make_shared<BackendPreference>();
  p->backends = std::move(list);
  for (const auto& b : p->backends) p->ids.push_back(backend_id(b));
  p->strict = strict;
  p->id = uint32_t(m.size() + 1);
  return m.emplace(std::make_pair(key, strict), std::move(p)).first->second;
}

}  // namespace

void set_backend_preference(const std::string& csv, bool strict) {
  g_pref.store(make_backend_preference(csv, strict).get(), std::memory_order_release);
}

std::string backend_preference() {
  const auto& p = detail::effective_preference();
  if (p.backends.empty()) return "auto";
  std::string s;
  for (const auto& b : p.backends) s += (s.empty() ? "" : ",") + b;
  return s + (p.strict ? " (strict)" : "");
}

BackendGuard::BackendGuard(const std::string& csv, bool strict) : active_(!csv.empty()) {
  if (!active_) return;
  prev_ = std::move(t_override);
  t_override = make_backend_preference(csv, strict);
}

BackendGuard::BackendGuard(std::shared_ptr<const BackendPreference> pref) : active_(pref != nullptr) {
  if (!active_) return;
  prev_ = std::move(t_override);
  t_override = std::move(pref);
}

BackendGuard::~BackendGuard() {
  if (active_) t_override = std::move(prev_);
}

}  // namespace kiln
