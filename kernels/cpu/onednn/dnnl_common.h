// The internal part of the oneDNN backend shared by its kernel files (never included above
// kernels/: it pulls in dnnl.hpp). Engine and stream, the primitive cache, per-thread scratch
// buffers, the thread-count bridge and the error check.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <string>
#include <unordered_map>

#include "kernels/common/error.h"
#include "kernels/cpu/onednn/common.h"

namespace kiln::onednn {

dnnl::engine& engine();
dnnl::stream& stream();  // one per thread

// oneDNN's OpenMP runtime sizes its teams by omp_get_max_threads(); kiln by num_threads(). Makes
// the first follow the second on this thread and returns the count. A primitive must run with
// the thread count it was created for, so the count is part of every cache key.
int sync_threads();

// "kind|str|nt<threads>": the cache key of a primitive of `kind` for a descriptor string.
std::string cache_key(const char* kind, const std::string& desc_str);

// A thread-local, 64-byte aligned buffer of at least `bytes` that lives until the next call with
// the same slot on this thread (slots 0..7): the blocked copies around a primitive.
void* scratch(int slot, size_t bytes);

// Counters (common.h).
void count_execution();
void count_reorder(double seconds, bool weights);

namespace detail {
std::shared_ptr<const void> cache_find(const std::string& key);
// Inserts unless another thread did first; returns the entry that is in the cache.
std::shared_ptr<const void> cache_insert(const std::string& key, std::shared_ptr<const void> v);
}  // namespace detail

// The cached entry for `key`, made by make() (returning T) on the first call. Entries are
// immutable once made: threads share them. make() may run twice when two threads race; one
// result wins.
template <class T, class Make>
std::shared_ptr<const T> cached(const std::string& key, Make make) {
  if (auto p = detail::cache_find(key)) return std::static_pointer_cast<const T>(p);
  std::shared_ptr<const void> v = std::make_shared<const T>(make());
  return std::static_pointer_cast<const T>(detail::cache_insert(key, std::move(v)));
}

// The oneDNN call this thread is in (set by execute() and Reorder::run(), which name the
// primitive kind), for error messages; empty outside them.
std::string& current_call();

// Turns a dnnl::error into kiln::Error naming the call (current_call(), else the expression
// text), the op, the shapes and oneDNN's message.
[[noreturn]] void rethrow(const dnnl::error& e, const char* expr, const char* op, const std::string& shapes,
                          const char* file, int line);
void check_status(dnnl_status_t st, const char* call, const char* op, const std::string& shapes, const char* file,
                  int line);

// Evaluates the expression; a dnnl::error becomes kiln::Error (desc.str() is only built then).
#define KILN_DNNL(op, desc, ...)                                                                  \
  [&]() -> decltype(auto) {                                                                       \
    try {                                                                                         \
      ::kiln::onednn::current_call().clear();                                                     \
      return __VA_ARGS__;                                                                         \
    } catch (const ::dnnl::error& kiln_dnnl_e_) {                                                 \
      ::kiln::onednn::rethrow(kiln_dnnl_e_, #__VA_ARGS__, op, (desc).str(), __FILE__, __LINE__); \
    }                                                                                             \
  }()

// A primitive descriptor made inside a cache entry's make(): on failure the entry records why
// (supports() then says no) instead of throwing.
struct Made {
  bool ok = false;
  std::string why;  // oneDNN's message when !ok
};

// Plain (user) memory on a caller's pointer.
inline dnnl::memory user_memory(const dnnl::memory::desc& md, const void* p) {
  return dnnl::memory(md, engine(), const_cast<void*>(p));
}

// A reorder between two descriptors, cached with the entry that needs it (null when equal).
struct Reorder {
  bool needed = false;
  bool weights = false;  // counted as a weight reorder
  dnnl::reorder prim;
  Reorder() = default;
  Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to, bool weights = false);
  // Runs from -> to on the stream, timed into the reorder counters.
  void run(dnnl::memory& from, dnnl::memory& to) const;
};

// An input operand of a primitive: the caller's buffer, or its reorder into scratch `slot`.
dnnl::memory operand_in(const Reorder& r, const dnnl::memory::desc& user, const dnnl::memory::desc& prim,
                        const void* p, int slot);
// An output operand: the caller's buffer, or scratch `slot` that finish_out() reorders back.
dnnl::memory operand_out(const Reorder& r, const dnnl::memory::desc& user, const dnnl::memory::desc& prim, void* p,
                         int slot);
void finish_out(const Reorder& r, dnnl::memory& m, const dnnl::memory::desc& user, void* p);
// Executes a primitive on this thread's stream and counts it.
void execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args);

}  // namespace kiln::onednn
