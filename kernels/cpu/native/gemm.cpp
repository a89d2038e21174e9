// The GEMM driver shared by every path: descriptor checks, path selection (the CPU's features,
// KILN_CPU_ISA, KILN_GEMM), splitting C into one rectangle per thread, batching, and the
// per-thread packing buffers. The blocked, packed compute lives in gemm_avx512.cpp,
// gemm_avx2.cpp, gemm_vsx.cpp, gemm_neon.cpp, gemm_sve.cpp and gemm_eigen.cpp.
//   ctest --test-dir build -R test_gemm         ./build/bench/bench_gemm
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/native/thread_buffer.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/native/gemm_bf16.h"
#include "kernels/cpu/native/gemm_internal.h"
#include "kernels/cpu/ref/gemm.h"

namespace kiln::native {

using gemm_detail::Blocking;
using gemm_detail::GemmPathImpl;
using gemm_detail::SgemmArgs;

namespace {

// Below this many flops per thread the OpenMP fork/join (a few microseconds) is not worth it.
constexpr double kMinFlopsPerThread = 1.5e6;

// Each ISA file's path is built only where the CPU can run it: those files are compiled for their
// ISA, so even their setup code may use its instructions.
const GemmPathImpl& path_impl(GemmPath p) {
  static const GemmPathImpl none{};
  static const GemmPathImpl avx512 = has_avx512f() ? gemm_detail::avx512_path() : none;
  static const GemmPathImpl avx2 = has_avx2() ? gemm_detail::avx2_path() : none;
  static const GemmPathImpl vsx = cpu_isa().vsx ? gemm_detail::vsx_path() : none;
  static const GemmPathImpl neon = cpu_isa().asimd ? gemm_detail::neon_path() : none;
  static const GemmPathImpl sve = cpu_isa().sve ? gemm_detail::sve_path(cpu_isa().sve_bits) : none;
  static const GemmPathImpl eigen = gemm_detail::eigen_path();
  switch (p) {
    case GemmPath::avx512: return avx512;
    case GemmPath::avx2: return avx2;
    case GemmPath::vsx: return vsx;
    case GemmPath::neon: return neon;
    case GemmPath::sve: return sve;
    case GemmPath::eigen: return eigen;
    default: return none;
  }
}

constexpr GemmPath kAllPaths[] = {GemmPath::best, GemmPath::avx512, GemmPath::avx2, GemmPath::vsx,
                                  GemmPath::neon, GemmPath::sve,    GemmPath::eigen, GemmPath::ref};

// The path kernel_paths() names for this CPU (cpu_features.cpp), else the next one this build has.
GemmPath best_path() {
  const std::string want = kernel_paths(cpu_isa()).gemm;
  for (GemmPath p : kAllPaths)
    if (p != GemmPath::best && want == gemm_path_name(p) && gemm_path_available(p)) return p;
  for (GemmPath p : {GemmPath::neon, GemmPath::eigen})
    if (gemm_path_available(p)) return p;
  return GemmPath::ref;
}

GemmPath path_from_env() {
  const char* v = std::getenv("KILN_GEMM");
  if (!v || !*v) return best_path();
  const std::string s(v);
  for (GemmPath p : kAllPaths) {
    if (s != gemm_path_name(p)) continue;
    if (p == GemmPath::best) return best_path();
    KILN_CHECK(gemm_path_available(p), "KILN_GEMM=", s, ": this ", p == GemmPath::eigen ? "build" : "CPU or build",
               " lacks it (CPU features: ", cpu_features_str(), ")");
    return p;
  }
  KILN_THROW("KILN_GEMM=", s, ": unknown GEMM path (avx512, avx2, vsx, neon, sve, eigen, ref or auto)");
}

std::atomic<int> g_path{-1};  // -1: not resolved yet

Blocking blocking_for(const GemmPathImpl& impl) {
  Blocking b = impl.blk;
  static const char* env = std::getenv("KILN_GEMM_BLOCKING");  // "kc,nc", for tuning runs
  if (env && *env) {
    long kc = 0, nc = 0;
    int used = 0;
    KILN_CHECK(std::sscanf(env, "%ld,%ld%n", &kc, &nc, &used) == 2 && env[used] == '\0' && kc > 0 && nc > 0 &&
                   kc <= (1 << 20) && nc <= (1 << 20),
               "KILN_GEMM_BLOCKING='", env, "' is not kc,nc (two whole numbers in [1, 1048576])");
    b.kc = kc;
    b.nc = (nc + b.nr - 1) / b.nr * b.nr;
  }
  return b;
}


void run_tile(const GemmPathImpl& impl, const Blocking& blk, const SgemmArgs& g, int64_t m0, int64_t m1, int64_t n0,
              int64_t n1) {
  thread_local ThreadBuffer<> buf_a("gemm: packing buffer"), buf_b("gemm: packing buffer");
  const bool direct = g.n <= blk.direct_max_n;
  const int64_t kc = std::min(direct ? blk.kc_direct : blk.kc, g.k);
  float* pa = buf_a.get(size_t(std::min(blk.mc, (m1 - m0 + blk.mr - 1) / blk.mr * blk.mr) * kc));
  float* pb = buf_b.get(size_t(std::min(blk.nc, (n1 - n0 + blk.nr - 1) / blk.nr * blk.nr) * kc));
  impl.tile(g, blk, m0, m1, n0, n1, pa, pb);
}

void scale_c(const SgemmArgs& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    float* c = g.c + i * g.ldc;
    if (g.beta == 0.f) std::memset(c, 0, size_t(g.n) * sizeof(float));
    else for (int64_t j = 0; j < g.n; ++j) c[j] *= g.beta;
  }
}

// Splits C into tm x tn rectangles (aligned to the register tile) for nt threads, choosing the
// split that minimises one thread's modelled time: its FMAs plus the packing it repeats.
struct Grid {
  int tm = 1, tn = 1;
  int64_t step_m = 0, step_n = 0;
};

Grid choose_grid(const SgemmArgs& g, const Blocking& blk, int nt) {
  Grid best;
  double best_cost = -1;
  const int64_t um = (g.m + blk.mr - 1) / blk.mr, un = (g.n + blk.nr - 1) / blk.nr;  // tiles
  for (int tm = 1; tm <= nt; ++tm) {
    if (nt % tm) continue;
    const int tn = nt / tm;
    if (tm > um || tn > un) continue;
    const int64_t mt = (um + tm - 1) / tm * blk.mr, ntl = (un + tn - 1) / tn * blk.nr;
    const double k = double(g.k);
    // 32 FMAs per cycle for the kernel against about 4 packed floats per cycle.
    const double cost = double(mt) * double(ntl) * k / 32.0 +
                        (double(mt) * k * double((ntl + blk.nc - 1) / blk.nc) + double(ntl) * k) / 4.0;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = Grid{tm, tn, mt, ntl};
    }
  }
  if (best_cost < 0) best = Grid{1, 1, g.m, g.n};
  return best;
}

// y[i] = alpha * sum_p M(i, p) x(p) + beta * y[i] for i < rows, p < len, with M(i, p) at
// m[i * rs + p * cs] where cs == 1 (rows of M contiguous: dot products) or rs == 1 (columns
// contiguous: a sum of scaled columns). A GEMM with one row or column of C is this: packing
// would double its memory traffic and a 12 x 32 tile would compute mostly padding. 16 partial
// sums per row (in a fixed order) let the compiler vectorise without reassociating.
void gemv(int64_t rows, int64_t len, float alpha, const float* m, int64_t rs, int64_t cs, const float* x, int64_t xs,
          float beta, float* y, int64_t ys, int threads) {
  thread_local ThreadBuffer<> xbuf("gemm: gathered x");
  if (xs != 1) {  // gather x once so the inner loops are unit stride
    float* xc = xbuf.get(size_t(len));
    for (int64_t p = 0; p < len; ++p) xc[p] = x[p * xs];
    x = xc;
  }
  auto finish = [&](int64_t i, float s) { y[i * ys] = beta == 0.f ? alpha * s : alpha * s + beta * y[i * ys]; };
  const int64_t grain = std::max<int64_t>(64, int64_t(kMinFlopsPerThread / 2) / std::max<int64_t>(len, 1));
  auto run = [&](auto&& body) {
    if (threads > 1) parallel_for(0, rows, grain, body);
    else body(int64_t(0), rows);
  };
  if (cs == 1) {
    run([&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float* row = m + i * rs;
        float acc[16] = {};
        int64_t p = 0;
        for (; p + 16 <= len; p += 16)
          for (int l = 0; l < 16; ++l) acc[l] += row[p + l] * x[p + l];
        for (int l = 0; p < len; ++p, ++l) acc[l] += row[p] * x[p];
        float s = 0.f;
        for (int l = 0; l < 16; ++l) s += acc[l];
        finish(i, s);
      }
    });
  } else {
    run([&](int64_t i0, int64_t i1) {
      thread_local ThreadBuffer<> tbuf("gemm: row sums");
      float* t = tbuf.get(size_t(i1 - i0));
      std::memset(t, 0, size_t(i1 - i0) * sizeof(float));
      for (int64_t p = 0; p < len; ++p) {
        const float xv = x[p];
        const float* col = m + p * cs + i0;
        for (int64_t i = 0; i < i1 - i0; ++i) t[i] += xv * col[i];
      }
      for (int64_t i = i0; i < i1; ++i) finish(i, t[i - i0]);
    });
  }
}

void run_sgemm(const GemmPathImpl& impl, const SgemmArgs& g, int max_threads) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k == 0 || g.alpha == 0.f) return scale_c(g);
  if (impl.gemv && g.m == 1) {  // c[j] = sum_p a(0, p) b(p, j): M = op(B)^T
    return gemv(g.n, g.k, g.alpha, g.b, g.trans_b ? g.ldb : 1, g.trans_b ? 1 : g.ldb, g.a, g.trans_a ? g.lda : 1,
                g.beta, g.c, 1, max_threads);
  }
  if (impl.gemv && g.n == 1) {  // c[i] = sum_p a(i, p) b(p, 0): M = op(A)
    return gemv(g.m, g.k, g.alpha, g.a, g.trans_a ? 1 : g.lda, g.trans_a ? g.lda : 1, g.b, g.trans_b ? 1 : g.ldb,
                g.beta, g.c, g.ldc, max_threads);
  }
  const Blocking blk = blocking_for(impl);
  const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k);
  int nt = int(std::min<double>(max_threads, std::max(1.0, flops / kMinFlopsPerThread)));
  Grid grid = nt > 1 ? choose_grid(g, blk, nt) : Grid{1, 1, g.m, g.n};
  if (grid.tm * grid.tn == 1) return run_tile(impl, blk, g, 0, g.m, 0, g.n);
  parallel_for(0, grid.tm * grid.tn, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t m0 = (t / grid.tn) * grid.step_m, n0 = (t % grid.tn) * grid.step_n;
      const int64_t m1 = std::min(g.m, m0 + grid.step_m), n1 = std::min(g.n, n0 + grid.step_n);
      if (m0 < m1 && n0 < n1) run_tile(impl, blk, g, m0, m1, n0, n1);
    }
  });
}

int available_threads() { return in_parallel_region() ? 1 : num_threads(); }

void check_desc(const GemmDesc& d) {
  KILN_CHECK(d.m >= 0 && d.n >= 0 && d.k >= 0 && d.batch >= 0, "gemm: negative size in ", d.str());
  const int64_t a_cols = d.trans_a ? d.m : d.k, b_cols = d.trans_b ? d.k : d.n;
  KILN_CHECK(d.lda >= std::max<int64_t>(1, a_cols), "gemm: lda ", d.lda, " < ", a_cols, " in ", d.str());
  KILN_CHECK(d.ldb >= std::max<int64_t>(1, b_cols), "gemm: ldb ", d.ldb, " < ", b_cols, " in ", d.str());
  KILN_CHECK(d.ldc >= std::max<int64_t>(1, d.n), "gemm: ldc ", d.ldc, " < ", d.n, " in ", d.str());
}

}  // namespace

const char* gemm_path_name(GemmPath p) {
  switch (p) {
    case GemmPath::best: return "auto";
    case GemmPath::avx512: return "avx512";
    case GemmPath::avx2: return "avx2";
    case GemmPath::vsx: return "vsx";
    case GemmPath::neon: return "neon";
    case GemmPath::sve: return "sve";
    case GemmPath::eigen: return "eigen";
    case GemmPath::ref: return "ref";
  }
  return "?";
}

bool gemm_path_available(GemmPath p) {
  switch (p) {
    case GemmPath::best: case GemmPath::ref: return true;
    case GemmPath::avx512: case GemmPath::avx2: case GemmPath::vsx: case GemmPath::neon: case GemmPath::sve:
    case GemmPath::eigen: return path_impl(p).tile != nullptr;
  }
  return false;
}

GemmPath gemm_path() {
  int p = g_path.load(std::memory_order_acquire);
  if (p < 0) {
    p = int(path_from_env());
    g_path.store(p, std::memory_order_release);
  }
  return GemmPath(p);
}

void set_gemm_path(GemmPath p) {
  if (p == GemmPath::best) p = best_path();
  KILN_CHECK(gemm_path_available(p), "set_gemm_path: ", gemm_path_name(p), " is not available (CPU features: ",
             cpu_features_str(), ")");
  g_path.store(int(p), std::memory_order_release);
}

bool supports_gemm(const GemmDesc& d) {
  return d.dtype == DType::float32 || d.dtype == DType::float64 || d.dtype == DType::bfloat16;
}

void gemm(const GemmDesc& d, const void* a, const void* b, void* c) {
  check_desc(d);
  KILN_CHECK(supports_gemm(d), "gemm (native): unsupported dtype in ", d.str());
  if (d.batch == 0 || d.m == 0 || d.n == 0) return;
  if (d.dtype == DType::bfloat16) return gemm_bf16(d, a, b, c);
  if (d.dtype == DType::float64) {
    const auto* A = static_cast<const double*>(a);
    const auto* B = static_cast<const double*>(b);
    auto* C = static_cast<double*>(c);
    if (gemm_path() == GemmPath::ref || d.k == 0 || !gemm_path_available(GemmPath::eigen))
      return ref::gemm<double>(d, A, B, C);
    for (int64_t i = 0; i < d.batch; ++i)
      gemm_detail::eigen_dgemm(d.trans_a, d.trans_b, d.m, d.n, d.k, d.alpha, A + i * d.stride_a, d.lda,
                               B + i * d.stride_b, d.ldb, d.beta, C + i * d.stride_c, d.ldc);
    return;
  }
  const auto* A = static_cast<const float*>(a);
  const auto* B = static_cast<const float*>(b);
  auto* C = static_cast<float*>(c);
  const GemmPath path = gemm_path();
  if (path == GemmPath::ref) return ref::gemm<float>(d, A, B, C);
  const GemmPathImpl& impl = path_impl(path);
  auto one = [&](int64_t i, int threads) {
    SgemmArgs g{d.trans_a, d.trans_b, d.m, d.n, d.k, float(d.alpha), A + i * d.stride_a, d.lda,
                B + i * d.stride_b, d.ldb, float(d.beta), C + i * d.stride_c, d.ldc};
    run_sgemm(impl, g, threads);
  };
  const int nt = available_threads();
  const double flops = 2.0 * double(d.m) * double(d.n) * double(d.k);
  // Small GEMMs: one per thread. Large ones: one after another, each split across the threads.
  if (d.batch > 1 && nt > 1 && flops < 4.0 * nt * kMinFlopsPerThread) {
    parallel_for(0, d.batch, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) one(i, 1);
    });
  } else {
    for (int64_t i = 0; i < d.batch; ++i) one(i, nt);
  }
}

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c, int64_t ldc) {
  GemmDesc d;
  d.trans_a = ta;
  d.trans_b = tb;
  d.m = m, d.n = n, d.k = k;
  d.lda = lda, d.ldb = ldb, d.ldc = ldc;
  d.alpha = alpha, d.beta = beta;
  gemm(d, a, b, c);
}

}  // namespace kiln::native
