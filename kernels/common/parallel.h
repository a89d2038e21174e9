// The one way kiln parallelises inside an op: parallel_for over [begin, end) in chunks of at
// least `grain` iterations, on the OpenMP team sized by set_num_threads / KILN_NUM_THREADS.
// Never nested: a parallel_for called from inside another runs serially. A thread that holds a
// SerialScope (DataLoader workers) also runs every parallel_for serially, so loader threads and
// the op thread team do not oversubscribe the cores.
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kiln {

// Threads used by ops (torch.set_num_threads / get_num_threads). Default: KILN_NUM_THREADS if
// set, else OMP_NUM_THREADS, else all cores. set_num_threads throws kiln::Error outside [1, 4096];
// it takes effect at the next op, on every thread of the process.
int num_threads();
int get_num_threads();  // the same as num_threads(), under LibTorch's name
void set_num_threads(int n);

namespace detail {
inline thread_local bool t_serial = false;
}

// While alive, parallel_for in this thread runs serially (restores the previous state after).
class SerialScope {
 public:
  SerialScope() : prev_(detail::t_serial) { detail::t_serial = true; }
  ~SerialScope() { detail::t_serial = prev_; }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  bool prev_;
};

inline bool in_parallel_region() {
  if (detail::t_serial) return true;
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

// f(chunk_begin, chunk_end) is called on disjoint chunks covering [begin, end).
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
  const int64_t n = end - begin;
  grain = std::max<int64_t>(grain, 1);
#ifdef _OPENMP
  int nt = num_threads();
  int64_t max_chunks = (n + grain - 1) / grain;
  if (nt > 1 && max_chunks > 1 && !in_parallel_region()) {
    nt = int(std::min<int64_t>(nt, max_chunks));
#pragma omp parallel num_threads(nt)
    {
      int tid = omp_get_thread_num();
      int64_t chunk = (n + nt - 1) / nt;
      int64_t b = begin + tid * chunk;
      int64_t e = std::min(end, b + chunk);
      if (b < e) f(b, e);
    }
    return;
  }
#endif
  f(begin, end);
}

}  // namespace kiln
