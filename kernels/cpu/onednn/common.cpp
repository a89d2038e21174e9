// Engine, stream, primitive cache, scratch buffers and error check of the oneDNN backend.
//   Test: ctest --test-dir build -R test_onednn
#include "kernels/cpu/onednn/dnnl_common.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <oneapi/dnnl/dnnl_debug.h>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"

namespace kiln::onednn {
namespace {

// Distinct shapes seen by a long-running process (varying batch sizes, sequence lengths) would
// grow the cache without bound; past this many entries it starts over.
constexpr size_t kMaxCacheEntries = 4096;

std::mutex g_cache_mu;
std::unordered_map<std::string, std::shared_ptr<const void>>& cache_map() {
  static auto* m = new std::unordered_map<std::string, std::shared_ptr<const void>>();  // outlives static teardown
  return *m;
}

std::atomic<uint64_t> g_created{0}, g_hits{0}, g_execs{0}, g_reorders{0}, g_reorder_ns{0}, g_wreorder_ns{0};

struct ScratchSlot {
  void* p = nullptr;
  size_t bytes = 0;
  ~ScratchSlot() { std::free(p); }
};

}  // namespace

// KILN_CPU_ISA caps oneDNN's JIT kernels too, so that a capped run is one ISA end to end
// (ONEDNN_MAX_CPU_ISA, where set, is oneDNN's own and wins). Must precede any primitive.
void cap_isa() {
  const std::string cap = native::cpu_isa_cap();
  native::cpu_isa();  // a KILN_CPU_ISA that names no level here is an error before oneDNN runs
  if (native::build_arch() != native::CpuArch::x86_64 || cap == "auto" || cap == "avx512") return;
  if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA")) return;
  const dnnl::status st = dnnl::set_max_cpu_isa(cap == "avx2" ? dnnl::cpu_isa::avx2 : dnnl::cpu_isa::sse41);
  KILN_CHECK(st == dnnl::status::success, "KILN_CPU_ISA=", cap, ": oneDNN refused the cap (status ", int(st),
             "); ONEDNN_MAX_CPU_ISA does the same for oneDNN alone");
}

dnnl::engine& engine() {
  static dnnl::engine* e = [] {
    cap_isa();
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

int sync_threads() {
  const int n = num_threads();
#ifdef _OPENMP
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
#endif
  return n;
}

std::string cache_key(const char* kind, const std::string& desc_str) {
  return std::string(kind) + "|" + desc_str + "|nt" + std::to_string(sync_threads());
}

void* scratch(int slot, size_t bytes) {
  thread_local ScratchSlot slots[8];
  KILN_CHECK(slot >= 0 && slot < 8, "onednn: scratch slot ", slot, " out of range");
  ScratchSlot& s = slots[slot];
  if (s.bytes < bytes) {
    std::free(s.p);
    s.p = nullptr;
    s.bytes = 0;
    const size_t rounded = (bytes + 63) / 64 * 64;
    s.p = std::aligned_alloc(64, rounded);
    KILN_CHECK(s.p, "onednn: cannot allocate a scratch buffer of ", bytes, " bytes");
    s.bytes = rounded;
  }
  return s.p;
}

void count_execution() { g_execs.fetch_add(1, std::memory_order_relaxed); }
void count_reorder(double seconds, bool weights) {
  g_reorders.fetch_add(1, std::memory_order_relaxed);
  g_reorder_ns.fetch_add(uint64_t(seconds * 1e9), std::memory_order_relaxed);
  if (weights) g_wreorder_ns.fetch_add(uint64_t(seconds * 1e9), std::memory_order_relaxed);
}

namespace detail {

std::shared_ptr<const void> cache_find(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  auto& m = cache_map();
  auto it = m.find(key);
  if (it == m.end()) return nullptr;
  g_hits.fetch_add(1, std::memory_order_relaxed);
  return it->second;
}

std::shared_ptr<const void> cache_insert(const std::string& key, std::shared_ptr<const void> v) {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  auto& m = cache_map();
  if (m.size() >= kMaxCacheEntries) m.clear();  // entries in use stay alive through their shared_ptr
  auto [it, inserted] = m.emplace(key, std::move(v));
  if (inserted) g_created.fetch_add(1, std::memory_order_relaxed);
  return it->second;
}

}  // namespace detail

Stats stats() {
  Stats s;
  s.primitives_created = g_created.load();
  s.cache_hits = g_hits.load();
  s.executions = g_execs.load();
  s.reorders = g_reorders.load();
  s.reorder_seconds = double(g_reorder_ns.load()) * 1e-9;
  s.weight_reorder_seconds = double(g_wreorder_ns.load()) * 1e-9;
  return s;
}

void clear_cache() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  cache_map().clear();
  g_created = 0, g_hits = 0, g_execs = 0, g_reorders = 0, g_reorder_ns = 0, g_wreorder_ns = 0;
}

const char* version() {
  static const std::string v = [] {
    const dnnl_version_t* ver = dnnl_version();
    return std::to_string(ver->major) + "." + std::to_string(ver->minor) + "." + std::to_string(ver->patch);
  }();
  return v.c_str();
}

std::string& current_call() {
  thread_local std::string call;
  return call;
}

void rethrow(const dnnl::error& e, const char* expr, const char* op, const std::string& shapes, const char* file,
             int line) {
  std::string call = current_call();
  if (call.empty()) {
    call = expr;
    if (call.size() > 80) call = call.substr(0, 77) + "...";
  }
  throw Error(::kiln::detail::concat(op, ": oneDNN call ", call, " failed for ", shapes, ": ", e.what(), " (status ",
                                     dnnl_status2str(e.status), ")"),
              file, line);
}

void check_status(dnnl_status_t st, const char* call, const char* op, const std::string& shapes, const char* file,
                  int line) {
  if (st == dnnl_success) return;
  throw Error(::kiln::detail::concat(op, ": oneDNN call ", call, " failed for ", shapes, ": status ", dnnl_status2str(st)),
              file, line);
}

Reorder::Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to, bool weights)
    : needed(from != to), weights(weights) {
  if (needed) prim = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), from, engine(), to));
}

void Reorder::run(dnnl::memory& from, dnnl::memory& to) const {
  current_call() = "dnnl::reorder::execute";
  const auto t0 = std::chrono::steady_clock::now();
  prim.execute(stream(), from, to);
  stream().wait();
  count_reorder(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), weights);
}

dnnl::memory operand_in(const Reorder& r, const dnnl::memory::desc& user, const dnnl::memory::desc& prim,
                        const void* p, int slot) {
  dnnl::memory u = user_memory(user, p);
  if (!r.needed) return u;
  dnnl::memory m(prim, engine(), scratch(slot, prim.get_size()));
  r.run(u, m);
  return m;
}

dnnl::memory operand_out(const Reorder& r, const dnnl::memory::desc& user, const dnnl::memory::desc& prim, void* p,
                         int slot) {
  if (!r.needed) return user_memory(user, p);
  return dnnl::memory(prim, engine(), scratch(slot, prim.get_size()));
}

void finish_out(const Reorder& r, dnnl::memory& m, const dnnl::memory::desc& user, void* p) {
  if (!r.needed) return;
  dnnl::memory u = user_memory(user, p);
  r.run(m, u);
}

void execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args) {
  current_call() = std::string("dnnl::primitive::execute (") +
                   dnnl_prim_kind2str(dnnl::convert_to_c(prim.get_kind())) + ")";
  prim.execute(stream(), args);
  stream().wait();
  count_execution();
}

}  // namespace kiln::onednn
