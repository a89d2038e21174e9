// The bfloat16 GEMM driver (gemm_bf16.h): path selection (the CPU's features, KILN_GEMM_BF16),
// splitting C into one rectangle per thread, per-thread packing buffers, the widening fallback,
// and the bfloat16-C entries (float32 scratch, one rounding). The packed compute lives in
// gemm_bf16_avx512bf16.cpp. The threading follows gemm.cpp's float32 driver.
//   ctest --test-dir build -R kernels.test_gemm_bf16         ./build/bench/bench_gemm_bf16
#include "kernels/cpu/native/gemm_bf16.h"
#include "kernels/cpu/native/thread_buffer.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/native/gemm_bf16_internal.h"

namespace kiln::native {

using gemm_bf16_detail::Bf16Args;
using gemm_bf16_detail::Bf16Blocking;
using gemm_bf16_detail::Bf16PathImpl;

namespace {

// Below this many flops per thread the OpenMP fork/join is not worth it (gemm.cpp's figure).
constexpr double kMinFlopsPerThread = 1.5e6;
// Float32 scratch of the bfloat16-C entries, in floats (4 MiB): rows of C are done in blocks of
// at most this many elements.
constexpr int64_t kRoundBudget = int64_t(1) << 20;

const Bf16PathImpl& avx512_bf16_impl() {
  static const Bf16PathImpl none{};
  static const Bf16PathImpl p =
      has_avx512_bf16() && cpu_isa().avx512bw && cpu_isa().avx512vl ? gemm_bf16_detail::avx512_bf16_path(l2_cache_bytes())
                                                                     : none;
  return p;
}

// The path kernel_paths() names for this CPU (cpu_features.cpp), where this build has it.
Bf16GemmPath best_path() {
  const std::string want = kernel_paths(cpu_isa()).gemm_bf16;
  return want == "avx512_bf16" && bf16_gemm_path_available(Bf16GemmPath::avx512_bf16) ? Bf16GemmPath::avx512_bf16
                                                                                      : Bf16GemmPath::widen;
}

Bf16GemmPath path_from_env() {
  const char* v = std::getenv("KILN_GEMM_BF16");
  if (!v || !*v) return best_path();
  const std::string s(v);
  for (Bf16GemmPath p : {Bf16GemmPath::best, Bf16GemmPath::avx512_bf16, Bf16GemmPath::widen}) {
    if (s != bf16_gemm_path_name(p)) continue;
    if (p == Bf16GemmPath::best) return best_path();
    KILN_CHECK(bf16_gemm_path_available(p), "KILN_GEMM_BF16=", s, ": this CPU or build lacks it (CPU features: ",
               cpu_features_str(), ")");
    return p;
  }
  KILN_THROW("KILN_GEMM_BF16=", s, ": unknown bfloat16 GEMM path (avx512_bf16, widen or auto)");
}

std::atomic<int> g_path{-1};  // -1: not resolved yet


int available_threads() { return in_parallel_region() ? 1 : num_threads(); }

void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.f) std::memset(row, 0, size_t(n) * sizeof(float));
    else for (int64_t j = 0; j < n; ++j) row[j] *= beta;
  }
}

// bfloat16 -> float32 is exact: the 16 bits become the high half.
inline float widen1(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void widen_rows(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld, float* dst, int threads) {
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint16_t* s = src + r * ld;
      float* o = dst + r * cols;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) o[j] = widen1(s[j]);
    }
  };
  if (threads > 1) parallel_for(0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(cols, 1)), body);
  else body(0, rows);
}

// The portable path: op(A) and op(B) widened to dense float32 copies, then the float32 GEMM.
void run_widen(const Bf16Args& g) {
  thread_local ThreadBuffer<float> wa("gemm (bfloat16): widened A"), wb("gemm (bfloat16): widened B");
  const int64_t ra = g.trans_a ? g.k : g.m, ca = g.trans_a ? g.m : g.k;
  const int64_t rb = g.trans_b ? g.n : g.k, cb = g.trans_b ? g.k : g.n;
  float* fa = wa.get(size_t(ra * ca));
  float* fb = wb.get(size_t(rb * cb));
  const int nt = available_threads();
  widen_rows(g.a, ra, ca, g.lda, fa, nt);
  widen_rows(g.b, rb, cb, g.ldb, fb, nt);
  sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, fa, ca, fb, cb, g.beta, g.c, g.ldc);
}

void run_tile(const Bf16PathImpl& impl, const Bf16Args& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  thread_local ThreadBuffer<uint32_t> buf_a("gemm (bfloat16): packing buffer"),
      buf_b("gemm (bfloat16): packing buffer");
  const Bf16Blocking& blk = impl.blk;
  const bool direct = !g.trans_a && g.n <= blk.direct_max_n;
  const int64_t kp = (std::min(direct ? blk.kc_direct : blk.kc, g.k) + 1) / 2;
  uint32_t* pa = buf_a.get(size_t(std::min(blk.mc, (m1 - m0 + blk.mr - 1) / blk.mr * blk.mr) * kp));
  uint32_t* pb = buf_b.get(size_t(std::min(blk.nc, (n1 - n0 + blk.nr - 1) / blk.nr * blk.nr) * kp));
  impl.tile(g, blk, m0, m1, n0, n1, pa, pb);
}

// Splits C into tm x tn rectangles (aligned to the register tile) for nt threads, minimising one
// thread's modelled time: its multiply-adds plus the packing it repeats (gemm.cpp's model, with
// the bfloat16 kernel's 64 multiply-adds per cycle against about 8 packed values per cycle).
struct Grid {
  int tm = 1, tn = 1;
  int64_t step_m = 0, step_n = 0;
};

Grid choose_grid(const Bf16Args& g, const Bf16Blocking& blk, int nt) {
  Grid best;
  double best_cost = -1;
  const int64_t um = (g.m + blk.mr - 1) / blk.mr, un = (g.n + blk.nr - 1) / blk.nr;
  for (int tm = 1; tm <= nt; ++tm) {
    if (nt % tm) continue;
    const int tn = nt / tm;
    if (tm > um || tn > un) continue;
    const int64_t mt = (um + tm - 1) / tm * blk.mr, ntl = (un + tn - 1) / tn * blk.nr;
    const double k = double(g.k);
    const double cost = double(mt) * double(ntl) * k / 64.0 +
                        (double(mt) * k * double((ntl + blk.nc - 1) / blk.nc) + double(ntl) * k) / 8.0;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = Grid{tm, tn, mt, ntl};
    }
  }
  if (best_cost < 0) best = Grid{1, 1, g.m, g.n};
  return best;
}

void run(const Bf16Args& g, int max_threads) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k == 0 || g.alpha == 0.f) return scale_c(g.m, g.n, g.beta, g.c, g.ldc);
  if (bf16_gemm_path() == Bf16GemmPath::widen) return run_widen(g);
  if (g.n == 1 && g.m > 1 && g.ldc == 1) {
    // One column of C, stored densely: C^T [1 x m] = op(B)^T op(A)^T, so the 32-column register
    // tile runs along m instead of computing 31 columns of padding.
    return run(Bf16Args{!g.trans_b, !g.trans_a, 1, g.m, g.k, g.alpha, g.b, g.ldb, g.a, g.lda, g.beta, g.c, g.m},
               max_threads);
  }
  const Bf16PathImpl& impl = avx512_bf16_impl();
  const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k);
  const int nt = int(std::min<double>(max_threads, std::max(1.0, flops / kMinFlopsPerThread)));
  const Grid grid = nt > 1 ? choose_grid(g, impl.blk, nt) : Grid{1, 1, g.m, g.n};
  if (grid.tm * grid.tn == 1) return run_tile(impl, g, 0, g.m, 0, g.n);
  parallel_for(0, grid.tm * grid.tn, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t m0 = (t / grid.tn) * grid.step_m, n0 = (t % grid.tn) * grid.step_n;
      const int64_t m1 = std::min(g.m, m0 + grid.step_m), n1 = std::min(g.n, n0 + grid.step_n);
      if (m0 < m1 && n0 < n1) run_tile(impl, g, m0, m1, n0, n1);
    }
  });
}

const uint16_t* bits(const BFloat16* p) { return reinterpret_cast<const uint16_t*>(p); }

}  // namespace

const char* bf16_gemm_path_name(Bf16GemmPath p) {
  switch (p) {
    case Bf16GemmPath::best: return "auto";
    case Bf16GemmPath::avx512_bf16: return "avx512_bf16";
    case Bf16GemmPath::widen: return "widen";
  }
  return "?";
}

bool bf16_gemm_path_available(Bf16GemmPath p) {
  switch (p) {
    case Bf16GemmPath::best: case Bf16GemmPath::widen: return true;
    case Bf16GemmPath::avx512_bf16: return avx512_bf16_impl().tile != nullptr;
  }
  return false;
}

Bf16GemmPath bf16_gemm_path() {
  int p = g_path.load(std::memory_order_acquire);
  if (p < 0) {
    p = int(path_from_env());
    g_path.store(p, std::memory_order_release);
  }
  return Bf16GemmPath(p);
}

void set_bf16_gemm_path(Bf16GemmPath p) {
  if (p == Bf16GemmPath::best) p = best_path();
  KILN_CHECK(bf16_gemm_path_available(p), "set_bf16_gemm_path: ", bf16_gemm_path_name(p),
             " is not available (CPU features: ", cpu_features_str(), ")");
  g_path.store(int(p), std::memory_order_release);
}

void bf16gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda,
              const BFloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  run(Bf16Args{ta, tb, m, n, k, alpha, bits(a), lda, bits(b), ldb, beta, c, ldc}, available_threads());
}

void bf16gemm_round(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda,
                    const BFloat16* b, int64_t ldb, float beta, BFloat16* c, int64_t ldc, const Bf16Epilogue& epi) {
  if (m <= 0 || n <= 0) return;
  thread_local ThreadBuffer<float> tmp_buf("gemm (bfloat16): float32 result");
  // The vector epilogue wherever the AVX512_BF16 path was built (whichever path computes: both
  // give the scalar loop's bits).
  const gemm_bf16_detail::Bf16RoundRowFn round_row = avx512_bf16_impl().round_row;
  const int64_t rows = std::clamp<int64_t>(kRoundBudget / n, 1, m);
  float* tmp = tmp_buf.get(size_t(rows * n));
  const int nt = available_threads();
  for (int64_t i0 = 0; i0 < m; i0 += rows) {
    const int64_t mb = std::min(rows, m - i0);
    const BFloat16* ab = ta ? a + i0 : a + i0 * lda;
    run(Bf16Args{ta, tb, mb, n, k, alpha, bits(ab), lda, bits(b), ldb, 0.f, tmp, n}, nt);
    auto body = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* t = tmp + r * n;
        BFloat16* out = c + (i0 + r) * ldc;
        if (round_row) {
          round_row(t, n, beta, epi.col_bias, epi.relu, reinterpret_cast<uint16_t*>(out));
          continue;
        }
        for (int64_t j = 0; j < n; ++j) {
          float v = t[j];
          if (beta != 0.f) v += beta * float(out[j]);
          if (epi.col_bias) v += epi.col_bias[j];
          if (epi.relu) v = v > 0.f ? v : 0.f;
          out[j] = BFloat16(v);
        }
      }
    };
    if (nt > 1) parallel_for(0, mb, std::max<int64_t>(1, 16384 / n), body);
    else body(0, mb);
  }
}

void round_to_bf16(const float* src, int64_t n, BFloat16* dst) {
  if (const gemm_bf16_detail::Bf16RoundRowFn round_row = avx512_bf16_impl().round_row)
    return round_row(src, n, 0.f, nullptr, false, reinterpret_cast<uint16_t*>(dst));
  for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16(src[i]);
}

void gemm_bf16(const GemmDesc& d, const void* a, const void* b, void* c) {
  KILN_CHECK(d.dtype == DType::bfloat16, "gemm_bf16: dtype ", d.dtype, " in ", d.str());
  if (d.batch == 0 || d.m == 0 || d.n == 0) return;
  const auto* A = static_cast<const BFloat16*>(a);
  const auto* B = static_cast<const BFloat16*>(b);
  auto* C = static_cast<BFloat16*>(c);
  bf16_gemm_path();  // resolved (KILN_GEMM_BF16 may throw) before any parallel region
  auto one = [&](int64_t i) {
    bf16gemm_round(d.trans_a, d.trans_b, d.m, d.n, d.k, float(d.alpha), A + i * d.stride_a, d.lda,
                   B + i * d.stride_b, d.ldb, float(d.beta), C + i * d.stride_c, d.ldc);
  };
  const int nt = available_threads();
  const double flops = 2.0 * double(d.m) * double(d.n) * double(d.k);
  // Small products: one per thread (each then single-threaded inside). Large ones: in turn.
  if (d.batch > 1 && nt > 1 && flops < 4.0 * nt * kMinFlopsPerThread) {
    parallel_for(0, d.batch, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) one(i);
    });
  } else {
    for (int64_t i = 0; i < d.batch; ++i) one(i);
  }
}

}  // namespace kiln::native
