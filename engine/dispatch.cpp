#include "engine/dispatch.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "engine/backends/backends.h"
#include "kernels/common/env.h"

namespace kiln {

namespace detail {

std::atomic<uint64_t> g_registry_generation{1};

namespace {
thread_local std::vector<std::unique_ptr<ThreadCacheBase>> t_caches;
}

std::unique_ptr<ThreadCacheBase>& thread_cache(size_t index) {
  if (index >= t_caches.size()) t_caches.resize(index + 16);
  return t_caches[index];
}

bool trace_dispatch() {
  static const bool on = env_flag("KILN_TRACE_DISPATCH", false);
  return on;
}

void trace_choice(const std::string& op, DeviceType dev, int backend, const std::string& desc) {
  static std::mutex mu;
  static std::set<std::string> seen;
  const std::string& b = backend_name(backend);
  std::string key = op + "|" + device_type_name(dev) + "|" + b + "|" + desc;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(key).second)
    std::fprintf(stderr, "[kiln dispatch] %s on %s -> %s  (%s)\n", op.c_str(), device_type_name(dev), b.c_str(),
                 desc.c_str());
}

void throw_no_dtype(const std::string& op, DeviceType dev, const char* dtype, const std::string& desc) {
  KILN_THROW("dtype ", dtype, " is not supported by op '", op, "' on ", device_type_name(dev), " (", desc,
             "; with backend preference '", backend_preference(), "')");
}

void throw_no_kernel(const std::string& op, DeviceType dev, const std::string& desc,
                     const std::vector<std::string>& registered) {
  std::string regs;
  for (const auto& r : registered) regs += (regs.empty() ? "" : ", ") + r;
  KILN_THROW("no kernel for op '", op, "' on ", device_type_name(dev), " for ", desc, " with backend preference '",
             backend_preference(), "' (registered: ", regs.empty() ? "none" : regs, ")");
}

}  // namespace detail

std::vector<std::string> OpTableBase::candidates() const {
  std::vector<std::string> out;
  for (const Info& i : candidate_info()) out.push_back(backend_name(i.backend) + "/" + device_type_name(i.device));
  return out;
}

bool OpTableBase::has(const std::string& backend, DeviceType device) const {
  const int id = backend_id(backend);
  for (const Info& i : candidate_info())
    if (i.backend == id && i.device == device) return true;
  return false;
}

size_t Registry::next_index() {
  static std::atomic<size_t> n{0};
  return n.fetch_add(1);
}

std::vector<const OpTableBase*> Registry::ops() const {
  std::vector<const OpTableBase*> out;
  for (const auto& [name, t] : tables_) out.push_back(t.get());
  return out;
}

const OpTableBase* Registry::find_op(const std::string& name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

static Registry* g_registry = nullptr;

void register_builtin_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto* r = new Registry();  // lives for the process: kernels may run during static teardown
    register_backends(*r);
    g_registry = r;
  });
}

Registry& registry() {
  register_builtin_kernels();
  return *g_registry;
}

}  // namespace kiln
