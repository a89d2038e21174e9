#include "kernels/common/parallel.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "kernels/common/env.h"
#include "kernels/common/error.h"

namespace kiln {

static int default_threads() {
  if (const int64_t n = env_int("KILN_NUM_THREADS", 1, 4096, 0); n > 0) return int(n);
  // OpenMP's own variable keeps OpenMP's lenient reading ("8" or a nested list "8,2").
  if (const char* v = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(v);
    if (n > 0) return n;
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

void set_num_threads(int n) {
  KILN_CHECK(n >= 1 && n <= 4096, "set_num_threads: the number of threads must be in [1, 4096], got ", n);
  g_threads.store(n);
}

int get_num_threads() { return num_threads(); }

}  // namespace kiln
