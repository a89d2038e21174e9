// The dispatcher: per op, an ordered table of candidate kernels {backend, device, supports(desc),
// run(desc, args...)}. A call walks the backend preference (KILN_BACKEND, set_backend_preference,
// a BackendGuard such as a layer's own setting; "auto" = registration order) and runs the first
// candidate on the device whose supports() accepts the descriptor. Registration is explicit
// (kiln::init() calls one function per op family, in order), never by static initialisers.
//
// KILN_TRACE_DISPATCH=1 prints each distinct (op, backend, descriptor) choice to stderr.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"

namespace kiln {

// Backends of the CPU and GPU: "ref", "native", "onednn", "cudnn".
// A preference is a comma-separated list tried in order ("onednn,native"). Ops that none of the
// listed backends implement fall back to the others in registration order, unless the
// preference is strict (tests use strict lists to pin one implementation). "auto" or "" means
// registration order. KILN_BACKEND sets the initial process-wide list; KILN_BACKEND_STRICT=1
// makes it strict.
struct BackendPreference {
  std::vector<std::string> backends;  // empty: auto
  bool strict = false;
};
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

namespace detail {
const BackendPreference& effective_preference();
// This thread's BackendGuard override (null when none is open).
const std::shared_ptr<const BackendPreference>& current_override();
bool trace_dispatch();
void trace_choice(const std::string& op, DeviceType dev, const std::string& backend, const std::string& desc);
[[noreturn]] void throw_no_kernel(const std::string& op, DeviceType dev, const std::string& desc,
                                  const std::vector<std::string>& registered);
std::vector<std::string> split_csv(const std::string& csv);
}  // namespace detail

class OpTableBase {
 public:
  explicit OpTableBase(std::string name) : name_(std::move(name)) {}
  virtual ~OpTableBase() = default;
  const std::string& name() const { return name_; }
  // "backend/device" of every registered candidate, in order.
  virtual std::vector<std::string> candidates() const = 0;

 private:
  std::string name_;
};

// Desc must provide `std::string str() const` (used in errors and traces).
template <class Desc, class... Args>
class OpTable final : public OpTableBase {
 public:
  using Run = void (*)(const Desc&, Args...);
  using Supports = bool (*)(const Desc&);
  struct Impl {
    std::string backend;
    DeviceType device;
    Supports supports;
    Run run;
  };

  using OpTableBase::OpTableBase;

  void add(const std::string& backend, DeviceType device, Supports supports, Run run) {
    impls_.push_back(Impl{backend, device, supports, run});
  }

  // The candidate a call would run, or null when none takes `desc` (no error, no trace): ops
  // use it to pick between layouts before committing to one.
  const Impl* find(DeviceType device, const Desc& desc) const {
    const BackendPreference& pref = detail::effective_preference();
    for (const std::string& b : pref.backends)
      for (const Impl& i : impls_)
        if (i.backend == b && i.device == device && (!i.supports || i.supports(desc))) return &i;
    if (pref.backends.empty() || !pref.strict)
      for (const Impl& i : impls_)
        if (i.device == device && (!i.supports || i.supports(desc))) return &i;
    return nullptr;
  }
  const Impl& select(DeviceType device, const Desc& desc) const {
    const BackendPreference& pref = detail::effective_preference();
    const Impl* chosen = nullptr;
    for (const std::string& b : pref.backends) {
      for (const Impl& i : impls_)
        if (i.backend == b && i.device == device && (!i.supports || i.supports(desc))) { chosen = &i; break; }
      if (chosen) break;
    }
    if (!chosen && (pref.backends.empty() || !pref.strict))
      for (const Impl& i : impls_)
        if (i.device == device && (!i.supports || i.supports(desc))) { chosen = &i; break; }
    if (!chosen) detail::throw_no_kernel(name(), device, desc.str(), candidates());
    if (detail::trace_dispatch()) detail::trace_choice(name(), device, chosen->backend, desc.str());
    return *chosen;
  }

  void operator()(DeviceType device, const Desc& desc, Args... args) const {
    select(device, desc).run(desc, args...);
  }

  bool has(const std::string& backend, DeviceType device) const {
    for (const Impl& i : impls_)
      if (i.backend == backend && i.device == device) return true;
    return false;
  }

  std::vector<std::string> candidates() const override {
    std::vector<std::string> out;
    for (const Impl& i : impls_) out.push_back(i.backend + "/" + device_type_name(i.device));
    return out;
  }

 private:
  std::vector<Impl> impls_;
};

class Registry {
 public:
  // The table of op `name`, created on first use. Throws if it exists with another signature.
  template <class Desc, class... Args>
  OpTable<Desc, Args...>& op(const std::string& name) {
    auto it = tables_.find(name);
    if (it == tables_.end())
      it = tables_.emplace(name, std::make_unique<OpTable<Desc, Args...>>(name)).first;
    auto* t = dynamic_cast<OpTable<Desc, Args...>*>(it->second.get());
    KILN_CHECK(t, "dispatch: op '", name, "' is registered with a different kernel signature");
    return *t;
  }
  std::vector<const OpTableBase*> ops() const;

 private:
  std::map<std::string, std::unique_ptr<OpTableBase>> tables_;
};

// Registers every built-in kernel (once; thread-safe). Called by registry() on first use.
void init();
Registry& registry();

// The typed table of an op, cached in a function-local static by the KILN_OP macro:
//   KILN_OP("relu_fwd", UnaryDesc, const void*, void*)(DeviceType::cpu, desc, src, dst);
#define KILN_OP(name, ...)                                                       \
  ([]() -> auto& {                                                              \
    static auto& table = ::kiln::registry().op<__VA_ARGS__>(name);             \
    return table;                                                               \
  }())

}  // namespace kiln
