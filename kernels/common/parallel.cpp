#include "kernels/common/parallel.h"

#include <atomic>
#include <cstdlib>
#include <thread>

namespace kiln {

static int default_threads() {
  for (const char* var : {"KILN_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* v = std::getenv(var)) {
      int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return int(std::max(1u, std::thread::hardware_concurrency()));
#endif
}

static std::atomic<int> g_threads{0};

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_threads();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int n) { g_threads.store(n > 0 ? n : default_threads()); }

}  // namespace kiln
