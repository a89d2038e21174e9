// The dispatcher: per op (engine/op_decl.h) a table of candidate kernels
// {backend, device, supports(desc), priority(desc), run(desc, args...)}. A call picks, for its
// device and descriptor, the first backend of the preference (engine/backend_preference.h) with
// a candidate that supports the descriptor, else (unless strict) the supporting candidate of
// highest priority, ties going to the earlier registration. The choice is cached per thread per
// (op, device, descriptor, preference): a hit costs a hash and a compare of the descriptor's
// bytes, with no lock; registering a kernel or changing the preference invalidates it.
//
// Registration is explicit and by backend: engine/backends/backends.cpp lists one registration
// unit per backend and device, in order, and kiln::register_builtin_kernels() runs them once (no static
// initialisers: static archives drop them). A program adds its own candidates or ops with
// registry().add<Op>(...) before other threads run ops (examples/custom_kernel).
//
//   dispatch<kernel_op::conv2d_fwd>(DeviceType::cpu, desc, src, wei, bias, dst);
//   dispatch_with<kernel_op::conv2d_fwd>(dev, desc, payload, ...);  // forward state for backward
//
// KILN_TRACE_DISPATCH=1 prints each distinct (op, device, backend, descriptor) choice to stderr.
//   Test: ctest --test-dir build -R 'dispatch|oracle'; bench: build/bench/bench_dispatch
#pragma once

#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/backend_preference.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/op_decl.h"

namespace kiln {

// Priorities of candidates in `auto` order (higher first). A backend unit gives its candidates a
// default (ref: fallback, so the oracle runs only when nothing else takes a problem); a
// candidate may raise or lower it, as a constant or as a function of the descriptor.
namespace priority {
constexpr int fallback = 0;    // the ref backend
constexpr int secondary = 5;   // slower than the native kernel where both apply
constexpr int normal = 10;     // the device's native kernels
constexpr int preferred = 20;  // faster than native where it applies (measured; say where)
}  // namespace priority

namespace detail {
bool trace_dispatch();
void trace_choice(const std::string& op, DeviceType dev, int backend, const std::string& desc);
// Descriptors with a `dtype` member (most): the dispatcher can tell a dtype no kernel takes.
template <class D, class = void> struct has_dtype : std::false_type {};
template <class D> struct has_dtype<D, std::void_t<decltype(std::declval<D&>().dtype = DType::float32)>> : std::true_type {};
template <class D> inline constexpr bool has_dtype_v = has_dtype<D>::value;
[[noreturn]] void throw_no_dtype(const std::string& op, DeviceType dev, const char* dtype, const std::string& desc);
[[noreturn]] void throw_no_kernel(const std::string& op, DeviceType dev, const std::string& desc,
                                  const std::vector<std::string>& registered);
// Bumped by every registration: cached choices made before it are stale.
extern std::atomic<uint64_t> g_registry_generation;
// This thread's cache of table `index` (null until the table first dispatches on this thread).
struct ThreadCacheBase {
  virtual ~ThreadCacheBase() = default;
};
std::unique_ptr<ThreadCacheBase>& thread_cache(size_t index);
}  // namespace detail

class OpTableBase {
 public:
  struct Info {
    int backend;
    DeviceType device;
    int priority;           // the constant one; see by_descriptor
    bool by_descriptor;     // the priority is a function of the descriptor
  };
  OpTableBase(std::string name, size_t index) : name_(std::move(name)), index_(index) {}
  virtual ~OpTableBase() = default;
  const std::string& name() const { return name_; }
  size_t index() const { return index_; }
  // "backend/device" of every candidate, in registration order.
  std::vector<std::string> candidates() const;
  virtual std::vector<Info> candidate_info() const = 0;
  bool has(const std::string& backend, DeviceType device) const;

 private:
  std::string name_;
  size_t index_;
};

template <class D, class... A>
class OpTable final : public OpTableBase {
 public:
  using Decl = OpDecl<void(const D&, A...)>;
  using Kernel = typename Decl::Kernel;
  using PayloadKernel = typename Decl::PayloadKernel;
  using Supports = typename Decl::Supports;
  using Priority = typename Decl::Priority;
  struct Candidate {
    int backend;
    DeviceType device;
    Supports supports;     // null: takes every descriptor
    Priority priority_fn;  // null: `priority`
    int priority;
    Kernel run;                 // exactly one of run and run_payload is set
    PayloadKernel run_payload;
    bool takes(const D& d) const { return !supports || supports(d); }
    int rank(const D& d) const { return priority_fn ? priority_fn(d) : priority; }
  };

  using OpTableBase::OpTableBase;

  void add(Candidate c) {
    impls_.push_back(std::make_unique<Candidate>(c));  // stable addresses: the caches hold them
    detail::g_registry_generation.fetch_add(1, std::memory_order_acq_rel);
  }

  // The candidate a call would run, or null when none takes `d` (no error, no trace): ops use it
  // to pick between layouts or dtypes before committing to one.
  const Candidate* find(DeviceType device, const D& d) const {
    const BackendPreference& pref = detail::effective_preference();
    if constexpr (kCacheable) {
      auto& owner = detail::thread_cache(index());
      if (!owner) owner = std::make_unique<Cache>();
      Cache& cache = static_cast<Cache&>(*owner);
      const size_t set = Cache::set_of(device, d, pref.id);
      Slot* ways = &cache.slots[set * kWays];
      const uint64_t gen = detail::g_registry_generation.load(std::memory_order_acquire);
      for (size_t w = 0; w < kWays; ++w) {
        const Slot& s = ways[w];
        if (s.generation == gen && s.pref == pref.id && s.device == device &&
            std::memcmp(static_cast<const void*>(&s.desc), static_cast<const void*>(&d), sizeof(D)) == 0)
          return s.chosen;
      }
      const Candidate* c = choose(device, d, pref);
      Slot& s = ways[cache.victim[set]++ % kWays];
      s.generation = gen;
      s.pref = pref.id;
      s.device = device;
      std::memcpy(static_cast<void*>(&s.desc), static_cast<const void*>(&d), sizeof(D));
      s.chosen = c;
      if (c && detail::trace_dispatch()) detail::trace_choice(name(), device, c->backend, d.str());
      return c;
    } else {
      const Candidate* c = choose(device, d, pref);
      if (c && detail::trace_dispatch()) detail::trace_choice(name(), device, c->backend, d.str());
      return c;
    }
  }

  const Candidate& select(DeviceType device, const D& d) const {
    const Candidate* c = find(device, d);
    if (!c) {
      // When the same problem in float32 has a kernel, the dtype is what no kernel takes: say so.
      if constexpr (detail::has_dtype_v<D>) {
        if (d.dtype != DType::float32) {
          D f = d;
          f.dtype = DType::float32;
          if (find(device, f)) detail::throw_no_dtype(name(), device, dtype_name(d.dtype), d.str());
        }
      }
      detail::throw_no_kernel(name(), device, d.str(), candidates());
    }
    return *c;
  }

  template <class... T>
  void operator()(DeviceType device, const D& d, T&&... args) const {
    const Candidate& c = select(device, d);
    if (c.run) {
      c.run(d, std::forward<T>(args)...);
    } else {
      KernelPayload none;
      none.backend = c.backend;
      c.run_payload(d, none, std::forward<T>(args)...);
    }
  }

  template <class... T>
  void call_with(DeviceType device, const D& d, KernelPayload& payload, T&&... args) const {
    const Candidate& c = select(device, d);
    if (c.run) return c.run(d, std::forward<T>(args)...);
    if (payload.backend < 0) payload.backend = c.backend;  // a forward call: fill it
    if (payload.backend == c.backend) return c.run_payload(d, payload, std::forward<T>(args)...);
    KernelPayload other;  // another backend's state means nothing to this kernel
    other.backend = c.backend;
    c.run_payload(d, other, std::forward<T>(args)...);
  }

  std::vector<Info> candidate_info() const override {
    std::vector<Info> out;
    for (const auto& c : impls_) out.push_back({c->backend, c->device, c->priority, c->priority_fn != nullptr});
    return out;
  }
  const std::vector<std::unique_ptr<Candidate>>& all() const { return impls_; }

 private:
  // Descriptors are cached by their bytes: equal bytes are equal descriptors, so a hit is never
  // wrong; padding that differs only costs a fresh choice. Descriptors with heap parts
  // (ConcatDesc's sizes) are not cached.
  static constexpr bool kCacheable = std::is_trivially_copyable_v<D> && std::is_default_constructible_v<D>;
  // Per thread and op: 64 sets of 4 slots (ResNet-50 has 53 convolutions per pass, ~20 distinct;
  // a GoogLeNet ~60), replaced round-robin within a set. Allocated when the op first runs on the
  // thread (ConvDesc: ~40 KB).
  static constexpr size_t kSets = 64, kWays = 4;
  struct Slot {
    uint64_t generation = 0;  // 0: empty
    uint32_t pref = 0;
    DeviceType device = DeviceType::cpu;
    D desc{};
    const Candidate* chosen = nullptr;
  };
  struct Cache final : detail::ThreadCacheBase {
    std::array<Slot, kSets * kWays> slots;
    std::array<uint8_t, kSets> victim{};
    // Four independent multiply lanes over the descriptor's 8-byte words, mixed at the end with
    // the device and preference: ~0.3 ns per word (a byte-wise FNV took ~1 ns per byte).
    static size_t set_of(DeviceType device, const D& d, uint32_t pref) {
      const auto* p = reinterpret_cast<const unsigned char*>(&d);
      auto word = [p](size_t i) {
        uint64_t w;
        std::memcpy(&w, p + 8 * i, 8);
        return w;
      };
      constexpr size_t kWords = sizeof(D) / 8;
      uint64_t l0 = 0x9e3779b97f4a7c15ull, l1 = 0xc2b2ae3d27d4eb4full, l2 = 0x165667b19e3779f9ull,
               l3 = 0x27d4eb2f165667c5ull;
      size_t i = 0;
      for (; i + 4 <= kWords; i += 4) {
        l0 = (l0 ^ word(i)) * 0xff51afd7ed558ccdull;
        l1 = (l1 ^ word(i + 1)) * 0xc4ceb9fe1a85ec53ull;
        l2 = (l2 ^ word(i + 2)) * 0xff51afd7ed558ccdull;
        l3 = (l3 ^ word(i + 3)) * 0xc4ceb9fe1a85ec53ull;
      }
      for (; i < kWords; ++i) l0 = (l0 ^ word(i)) * 0xff51afd7ed558ccdull;
      if constexpr (sizeof(D) % 8 != 0) {
        uint64_t t = 0;
        std::memcpy(&t, p + 8 * kWords, sizeof(D) % 8);
        l1 = (l1 ^ t) * 0xc4ceb9fe1a85ec53ull;
      }
      uint64_t h = l0 ^ (l1 >> 7) ^ (l2 << 13) ^ (l3 >> 19) ^ (uint64_t(pref) << 8) ^ uint64_t(device);
      h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdull;
      return size_t((h ^ (h >> 29)) % kSets);
    }
  };

  const Candidate* choose(DeviceType device, const D& d, const BackendPreference& pref) const {
    for (int b : pref.ids) {
      const Candidate* best = nullptr;
      int best_rank = 0;
      for (const auto& c : impls_) {
        if (c->backend != b || c->device != device) continue;
        const int r = c->rank(d);
        if ((!best || r > best_rank) && c->takes(d)) best = c.get(), best_rank = r;
      }
      if (best) return best;
    }
    if (!pref.ids.empty() && pref.strict) return nullptr;
    const Candidate* best = nullptr;
    int best_rank = 0;
    for (const auto& c : impls_) {
      if (c->device != device) continue;
      const int r = c->rank(d);
      if ((!best || r > best_rank) && c->takes(d)) best = c.get(), best_rank = r;
    }
    return best;
  }

  std::vector<std::unique_ptr<Candidate>> impls_;
};

class Registry {
 public:
  // The table of op Op, made on first use. Throws if a table of that name has another signature.
  template <class Op>
  auto& table() {
    using T = typename Op::Table;
    auto it = tables_.find(Op::name);
    if (it == tables_.end())
      it = tables_.emplace(Op::name, std::make_unique<T>(Op::name, next_index())).first;
    auto* t = dynamic_cast<T*>(it->second.get());
    KILN_CHECK(t, "dispatch: op '", Op::name, "' is registered with a different kernel signature");
    return *t;
  }

  // A candidate for op Op on `device` from `backend` (a name: "native", "user" ...).
  template <class Op>
  void add(const std::string& backend, DeviceType device, typename Op::Supports supports,
           typename Op::Kernel run, int prio = priority::normal, typename Op::Priority prio_fn = nullptr) {
    table<Op>().add({backend_id(backend), device, supports, prio_fn, prio, run, nullptr});
  }
  template <class Op>
  void add(const std::string& backend, DeviceType device, typename Op::Supports supports,
           typename Op::PayloadKernel run, int prio = priority::normal, typename Op::Priority prio_fn = nullptr) {
    table<Op>().add({backend_id(backend), device, supports, prio_fn, prio, nullptr, run});
  }

  std::vector<const OpTableBase*> ops() const;  // by name
  const OpTableBase* find_op(const std::string& name) const;

 private:
  static size_t next_index();
  std::map<std::string, std::unique_ptr<OpTableBase>> tables_;
};

// What a backend's registration unit is given: adds candidates for its own backend and device
// with its default priority.
class BackendRegistrar {
 public:
  BackendRegistrar(Registry& r, const char* backend, DeviceType device, int default_priority)
      : r_(r), backend_(backend), device_(device), priority_(default_priority) {}
  template <class Op, class K>
  void add(typename Op::Supports supports, K run) {
    r_.add<Op>(backend_, device_, supports, run, priority_);
  }
  template <class Op, class K>
  void add(typename Op::Supports supports, K run, int prio) {
    r_.add<Op>(backend_, device_, supports, run, prio);
  }
  template <class Op, class K>
  void add(typename Op::Supports supports, K run, typename Op::Priority prio_fn) {
    r_.add<Op>(backend_, device_, supports, run, priority_, prio_fn);
  }
  Registry& registry() { return r_; }

 private:
  Registry& r_;
  const char* backend_;
  DeviceType device_;
  int priority_;
};

// Registers every built-in kernel (once; thread-safe). Called by registry() on first use.
void register_builtin_kernels();
Registry& registry();

// The table of Op, looked up once per program (a function-local static).
template <class Op>
auto& op_table() {
  static auto& t = registry().table<Op>();
  return t;
}

template <class Op, class... T>
void dispatch(DeviceType device, const typename Op::Desc& d, T&&... args) {
  op_table<Op>()(device, d, std::forward<T>(args)...);
}

// As dispatch, with the payload a forward call fills and its backward calls read.
template <class Op, class... T>
void dispatch_with(DeviceType device, const typename Op::Desc& d, KernelPayload& payload, T&&... args) {
  op_table<Op>().call_with(device, d, payload, std::forward<T>(args)...);
}

// The candidate a dispatch would run (null: none takes d).
template <class Op>
auto find_kernel(DeviceType device, const typename Op::Desc& d) {
  return op_table<Op>().find(device, d);
}

}  // namespace kiln
