// kiln's own CUDA GEMM. Two kernels:
//  - tiled: 128x128 block tile, k step 8, 256 threads each holding an 8x8 register block of C
//    (two 4x4 groups 64 apart: conflict-free shared reads); operand tiles staged through shared
//    memory (A stored k-major so the inner loop reads both tiles along their contiguous dim);
//    each thread loads 4 consecutive elements along the operand's contiguous dim, as one 16-byte
//    load when the operand is float32 and aligned, and fetches the next k tile into registers
//    before computing on the current one.
//  - small: 16x16 tiles, one element of C per thread, for shapes too small to fill the big tile.
// Batches and tile rows beyond the grid limits are walked by grid-stride loops.
// float16 and bfloat16 operands are widened to float as they are loaded: tiles, products and sums
// are float32, and C is rounded once (as cuBLAS with float32 compute; found missing when the
// emulated device ran the mixed-precision tests without cuBLAS).
//   emu test: ctest --test-dir build -R test_gemm -L emu
#include "kernels/cuda/native/gemm.h"

#include "kernels/cuda/launch.h"

#include <type_traits>

#include "kernels/common/error.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8, kThreads = 256;  // 16 x 16 threads
constexpr int kSmall = 16;
constexpr int64_t kMaxGridYZ = 65535;

#if defined(__CUDACC__)
using Float4 = float4;
#else
struct alignas(16) Float4 { float x, y, z, w; };
#endif

// The type products and sums are made in for storage type S: float for the half types.
template <class S> struct Acc { using type = S; };
template <> struct Acc<Half> { using type = float; };
template <> struct Acc<BFloat16> { using type = float; };

template <class S>
struct GemmArgs {
  using T = typename Acc<S>::type;
  bool ta, tb;
  bool vec_a, vec_b;  // operand may be read with 16-byte loads (float32, aligned base, ld, stride)
  int64_t m, n, k, lda, ldb, ldc;
  T alpha, beta;
  int64_t batch, sa, sb, sc;
  const S* a;
  const S* b;
  S* c;
};

#if defined(KILN_EMU_DEVICE)
// The pointers the stream sanitizer checks (kernels/cuda/emu/device.h).
template <class S>
void emu_accesses(const GemmArgs<S>& g, emu_device::Args& x) {
  x.field(g.a);
  x.field(g.b);
  x.field(g.c);
}
#endif

// Four consecutive elements p[0..3] of which the first `avail` exist (zero beyond), widened to T.
template <class S, class T>
KILN_DEVICE inline void load4(const S* p, int64_t avail, bool vec, T out[4]) {
  if constexpr (std::is_same<S, float>::value) {
    if (vec && avail >= 4) {
      const Float4 v = *reinterpret_cast<const Float4*>(p);
      out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
      return;
    }
  }
  for (int j = 0; j < 4; ++j) out[j] = j < avail ? T(p[j]) : T(0);
}

// Row (or column) of the block tile that register i of a thread with tile index u covers: two
// groups of 4, 64 apart, so the 16 threads of a half-warp read 16 consecutive float4s of a
// shared row (no bank conflicts) rather than 16 float4s 32 bytes apart.
KILN_DEVICE inline int tile_index(int u, int i) { return (i < 4 ? 0 : 64) + u * 4 + (i & 3); }

// Four consecutive shared-memory elements (16-byte aligned for float: one 128-bit load).
template <class T>
KILN_DEVICE inline void shared4(const T* p, T out[4]) {
  if constexpr (std::is_same<T, float>::value) {
    const Float4 v = *reinterpret_cast<const Float4*>(p);
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
  } else {
    for (int j = 0; j < 4; ++j) out[j] = p[j];
  }
}

template <class S>
KILN_GLOBAL void gemm_tiled_kernel(GemmArgs<S> g) {
  using T = typename GemmArgs<S>::T;
  struct alignas(16) Tiles {  // 16-byte aligned rows for shared4
    T a[kBK][kBM];  // a[kk][i] = op(A)[i0 + i][k0 + kk]
    T b[kBK][kBN];  // b[kk][j] = op(B)[k0 + kk][j0 + j]
  };
  KILN_SHARED Tiles tiles;
  auto& As = tiles.a;
  auto& Bs = tiles.b;
  const int t = threadIdx.x;
  const int ty = t / 16, tx = t % 16;
  const int64_t j0 = int64_t(blockIdx.x) * kBN;
  const int64_t mtiles = (g.m + kBM - 1) / kBM;
  // This thread's 4 elements of each operand tile: 4 consecutive along the operand's
  // contiguous dim (see the loads below), at tile coordinates (ra, ka) and (kb, cb).
  const int ra = g.ta ? (t % 32) * 4 : t / 2, ka = g.ta ? t / 32 : (t % 2) * 4;
  const int cb = g.tb ? t / 2 : (t % 32) * 4, kb = g.tb ? (t % 2) * 4 : t / 32;
  for (int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const S* a = g.a + z * g.sa;
    const S* b = g.b + z * g.sb;
    S* c = g.c + z * g.sc;
    for (int64_t mt = blockIdx.y; mt < mtiles; mt += gridDim.y) {
      const int64_t i0 = mt * kBM;
      T acc[kTM][kTN];
      for (int i = 0; i < kTM; ++i)
        for (int j = 0; j < kTN; ++j) acc[i][j] = T(0);
      T va[4], vb[4];
      // Global -> registers for the k tile at k0 (issued before the previous tile's compute,
      // so the loads are in flight while it runs).
      auto fetch = [&](int64_t k0) {
        const int64_t i = i0 + ra, ka_ = k0 + ka;
        if (!g.ta) load4(a + i * g.lda + ka_, i < g.m ? g.k - ka_ : 0, g.vec_a, va);
        else load4(a + ka_ * g.lda + i, ka_ < g.k ? g.m - i : 0, g.vec_a, va);
        const int64_t j = j0 + cb, kb_ = k0 + kb;
        if (!g.tb) load4(b + kb_ * g.ldb + j, kb_ < g.k ? g.n - j : 0, g.vec_b, vb);
        else load4(b + j * g.ldb + kb_, j < g.n ? g.k - kb_ : 0, g.vec_b, vb);
      };
      if (g.k > 0) fetch(0);
      for (int64_t k0 = 0; k0 < g.k; k0 += kBK) {
        for (int q = 0; q < 4; ++q) {
          if (!g.ta) As[ka + q][ra] = va[q];
          else As[ka][ra + q] = va[q];
          if (!g.tb) Bs[kb][cb + q] = vb[q];
          else Bs[kb + q][cb] = vb[q];
        }
        __syncthreads();
        if (k0 + kBK < g.k) fetch(k0 + kBK);
        // Unrolled for float (128-bit shared loads, no index math); double would spill.
        constexpr int kUnroll = std::is_same<T, float>::value ? kBK : 1;
        (void)kUnroll;
#if defined(__CUDACC__)
#pragma unroll kUnroll
#endif
        for (int kk = 0; kk < kBK; ++kk) {
          T ar[kTM], br[kTN];
          shared4(&As[kk][ty * 4], ar);
          shared4(&As[kk][64 + ty * 4], ar + 4);
          shared4(&Bs[kk][tx * 4], br);
          shared4(&Bs[kk][64 + tx * 4], br + 4);
          for (int i = 0; i < kTM; ++i)
            for (int j = 0; j < kTN; ++j) acc[i][j] += ar[i] * br[j];
        }
        __syncthreads();
      }
      for (int i = 0; i < kTM; ++i) {
        const int64_t row = i0 + tile_index(ty, i);
        if (row >= g.m) continue;
        for (int j = 0; j < kTN; ++j) {
          const int64_t col = j0 + tile_index(tx, j);
          if (col >= g.n) continue;
          S& out = c[row * g.ldc + col];
          out = S(g.beta == T(0) ? g.alpha * acc[i][j] : g.alpha * acc[i][j] + g.beta * T(out));
        }
      }
    }
  }
}

template <class S>
KILN_GLOBAL void gemm_small_kernel(GemmArgs<S> g) {
  using T = typename GemmArgs<S>::T;
  KILN_SHARED T As[kSmall][kSmall + 1];  // As[i][kk]
  KILN_SHARED T Bs[kSmall][kSmall + 1];  // Bs[kk][j]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kSmall + tx;
  const int64_t mtiles = (g.m + kSmall - 1) / kSmall;
  for (int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const S* a = g.a + z * g.sa;
    const S* b = g.b + z * g.sb;
    S* c = g.c + z * g.sc;
    for (int64_t mt = blockIdx.y; mt < mtiles; mt += gridDim.y) {
      const int64_t i0 = mt * kSmall, row = i0 + ty;
      T acc = T(0);
      for (int64_t k0 = 0; k0 < g.k; k0 += kSmall) {
        // Thread (ty, tx) loads A[i0 + ty][k0 + tx] and B[k0 + ty][col]; for the transposed
        // layouts the roles swap so consecutive threads read consecutive addresses.
        if (!g.ta) {
          const int64_t i = i0 + ty, kk = k0 + tx;
          As[ty][tx] = (i < g.m && kk < g.k) ? T(a[i * g.lda + kk]) : T(0);
        } else {
          const int64_t i = i0 + tx, kk = k0 + ty;
          As[tx][ty] = (i < g.m && kk < g.k) ? T(a[kk * g.lda + i]) : T(0);
        }
        if (!g.tb) {
          const int64_t kk = k0 + ty;
          Bs[ty][tx] = (kk < g.k && col < g.n) ? T(b[kk * g.ldb + col]) : T(0);
        } else {
          const int64_t j = int64_t(blockIdx.x) * kSmall + ty, kk = k0 + tx;
          Bs[tx][ty] = (j < g.n && kk < g.k) ? T(b[j * g.ldb + kk]) : T(0);
        }
        __syncthreads();
        for (int kk = 0; kk < kSmall; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
      }
      if (row < g.m && col < g.n) {
        S& out = c[row * g.ldc + col];
        out = S(g.beta == T(0) ? g.alpha * acc : g.alpha * acc + g.beta * T(out));
      }
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class S>
void run_gemm(GemmArgs<S> g) {
  if (g.m <= 0 || g.n <= 0 || g.batch <= 0) return;
  const bool f32 = std::is_same<S, float>::value;
  g.vec_a = f32 && aligned16(g.a) && g.lda % 4 == 0 && g.sa % 4 == 0;
  g.vec_b = f32 && aligned16(g.b) && g.ldb % 4 == 0 && g.sb % 4 == 0;
  const int64_t z = g.batch < kMaxGridYZ ? g.batch : kMaxGridYZ;
  // The big tile wastes most of its threads below ~64 rows or columns.
  if (g.m >= 64 && g.n >= 64) {
    const int64_t mt = (g.m + kBM - 1) / kBM, nt = (g.n + kBN - 1) / kBN;
    KILN_LAUNCH(gemm_tiled_kernel<S>, dim3(unsigned(nt), unsigned(mt < kMaxGridYZ ? mt : kMaxGridYZ), unsigned(z)),
                dim3(kThreads), 0, current_stream(), g);
  } else {
    const int64_t mt = (g.m + kSmall - 1) / kSmall, nt = (g.n + kSmall - 1) / kSmall;
    KILN_LAUNCH(gemm_small_kernel<S>, dim3(unsigned(nt), unsigned(mt < kMaxGridYZ ? mt : kMaxGridYZ), unsigned(z)),
                dim3(kSmall, kSmall), 0, current_stream(), g);
  }
}

template <class S, class T = typename Acc<S>::type>
GemmArgs<S> args_of(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const S* a, int64_t lda,
                    int64_t sa, const S* b, int64_t ldb, int64_t sb, T beta, S* c, int64_t ldc, int64_t sc,
                    int64_t batch) {
  KILN_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "cuda gemm: negative size m=", m, " n=", n, " k=", k,
             " batch=", batch);
  KILN_CHECK(lda >= (ta ? m : k) && ldb >= (tb ? k : n) && ldc >= n, "cuda gemm: leading dimension too small: lda=",
             lda, " ldb=", ldb, " ldc=", ldc, " for m=", m, " n=", n, " k=", k);
  GemmArgs<S> g{};
  g.ta = ta; g.tb = tb;
  g.m = m; g.n = n; g.k = k;
  g.lda = lda; g.ldb = ldb; g.ldc = ldc;
  g.alpha = alpha; g.beta = beta;
  g.batch = batch; g.sa = sa; g.sb = sb; g.sc = sc;
  g.a = a; g.b = b; g.c = c;
  return g;
}

}  // namespace

bool supports_gemm(const GemmDesc& d) {
  return d.dtype == DType::float32 || d.dtype == DType::float64 || d.dtype == DType::float16 ||
         d.dtype == DType::bfloat16;
}

void gemm(const GemmDesc& d, const void* a, const void* b, void* c) {
  if (d.dtype == DType::float32) {
    run_gemm(args_of<float>(d.trans_a, d.trans_b, d.m, d.n, d.k, float(d.alpha), static_cast<const float*>(a), d.lda,
                            d.stride_a, static_cast<const float*>(b), d.ldb, d.stride_b, float(d.beta),
                            static_cast<float*>(c), d.ldc, d.stride_c, d.batch));
  } else if (d.dtype == DType::float64) {
    run_gemm(args_of<double>(d.trans_a, d.trans_b, d.m, d.n, d.k, d.alpha, static_cast<const double*>(a), d.lda,
                             d.stride_a, static_cast<const double*>(b), d.ldb, d.stride_b, d.beta,
                             static_cast<double*>(c), d.ldc, d.stride_c, d.batch));
  } else if (d.dtype == DType::float16) {
    run_gemm(args_of<Half>(d.trans_a, d.trans_b, d.m, d.n, d.k, float(d.alpha), static_cast<const Half*>(a), d.lda,
                           d.stride_a, static_cast<const Half*>(b), d.ldb, d.stride_b, float(d.beta),
                           static_cast<Half*>(c), d.ldc, d.stride_c, d.batch));
  } else if (d.dtype == DType::bfloat16) {
    run_gemm(args_of<BFloat16>(d.trans_a, d.trans_b, d.m, d.n, d.k, float(d.alpha), static_cast<const BFloat16*>(a),
                               d.lda, d.stride_a, static_cast<const BFloat16*>(b), d.ldb, d.stride_b, float(d.beta),
                               static_cast<BFloat16*>(c), d.ldc, d.stride_c, d.batch));
  } else {
    KILN_THROW("cuda native gemm: unsupported dtype ", d.dtype, " (", d.str(), ")");
  }
}

void sgemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                   int64_t ldc, int64_t stride_c, int64_t batch) {
  run_gemm(args_of<float>(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                          batch));
}

KILN_CUDA_NAMESPACE_END
