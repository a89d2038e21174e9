#include "engine/dispatch.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

namespace kiln {

void register_builtin_kernels(Registry& r);  // engine/register.cpp

namespace {
std::mutex g_pref_mu;
BackendPreference g_pref;  // process-wide
bool g_pref_init = false;
thread_local std::shared_ptr<const BackendPreference> t_override;  // BackendGuard
thread_local BackendPreference t_global_copy;
thread_local uint64_t t_global_gen = ~0ull;
uint64_t g_gen = 0;

void init_pref_from_env() {
  if (g_pref_init) return;
  g_pref_init = true;
  if (const char* e = std::getenv("KILN_BACKEND")) g_pref.backends = detail::split_csv(e);
  if (const char* e = std::getenv("KILN_BACKEND_STRICT")) g_pref.strict = std::string(e) == "1";
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
  std::lock_guard<std::mutex> lock(g_pref_mu);
  init_pref_from_env();
  if (t_global_gen != g_gen) {
    t_global_copy = g_pref;
    t_global_gen = g_gen;
  }
  return t_global_copy;
}

bool trace_dispatch() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_TRACE_DISPATCH");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

void trace_choice(const std::string& op, DeviceType dev, const std::string& backend, const std::string& desc) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::string key = op + "|" + device_type_name(dev) + "|" + backend + "|" + desc;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(key).second)
    std::fprintf(stderr, "[kiln dispatch] %s on %s -> %s  (%s)\n", op.c_str(), device_type_name(dev),
                 backend.c_str(), desc.c_str());
}

void throw_no_kernel(const std::string& op, DeviceType dev, const std::string& desc,
                     const std::vector<std::string>& registered) {
  std::string regs;
  for (const auto& r : registered) regs += (regs.empty() ? "" : ", ") + r;
  KILN_THROW("no kernel for op '", op, "' on ", device_type_name(dev), " for ", desc,
             " with backend preference '", backend_preference(), "' (registered: ",
             regs.empty() ? "none" : regs, ")");
}

}  // namespace detail

void set_backend_preference(const std::string& csv, bool strict) {
  std::lock_guard<std::mutex> lock(g_pref_mu);
  g_pref_init = true;
  g_pref.backends = detail::split_csv(csv);
  g_pref.strict = strict;
  ++g_gen;
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
  auto p = std::make_shared<BackendPreference>();
  p->backends = detail::split_csv(csv);
  p->strict = strict;
  prev_ = std::move(t_override);
  t_override = std::move(p);
}

BackendGuard::BackendGuard(std::shared_ptr<const BackendPreference> pref) : active_(pref != nullptr) {
  if (!active_) return;
  prev_ = std::move(t_override);
  t_override = std::move(pref);
}

BackendGuard::~BackendGuard() {
  if (active_) t_override = std::move(prev_);
}

std::vector<const OpTableBase*> Registry::ops() const {
  std::vector<const OpTableBase*> out;
  for (const auto& [name, t] : tables_) out.push_back(t.get());
  return out;
}

static Registry* g_registry = nullptr;

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto* r = new Registry();  // lives for the process: kernels may run during static teardown
    register_builtin_kernels(*r);
    g_registry = r;
  });
}

Registry& registry() {
  init();
  return *g_registry;
}

}  // namespace kiln
