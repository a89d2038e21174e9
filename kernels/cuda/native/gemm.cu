// kiln's own CUDA GEMM. Two kernels:
//  - tiled: 128x128 block tile, k step 8, 256 threads each holding an 8x8 register block of C;
//    operand tiles staged through shared memory (A stored k-major so the inner loop reads both
//    tiles along their contiguous dim); each thread loads 4 consecutive elements along the
//    operand's contiguous dim, as one 16-byte load when the operand is float32 and aligned.
//  - small: 16x16 tiles, one element of C per thread, for shapes too small to fill the big tile.
// Batches and tile rows beyond the grid limits are walked by grid-stride loops.
//   emu test: ctest --test-dir build -R test_gemm -L emu
#include "kernels/cuda/native/gemm.h"

#include <type_traits>

#include "kernels/common/error.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8, kThreads = 256;
constexpr int kSmall = 16;
constexpr int64_t kMaxGridYZ = 65535;

#if defined(__CUDACC__)
using Float4 = float4;
#else
struct alignas(16) Float4 { float x, y, z, w; };
#endif

template <class T>
struct GemmArgs {
  bool ta, tb;
  bool vec_a, vec_b;  // operand may be read with 16-byte loads (float32, aligned base, ld, stride)
  int64_t m, n, k, lda, ldb, ldc;
  T alpha, beta;
  int64_t batch, sa, sb, sc;
  const T* a;
  const T* b;
  T* c;
};

// Four consecutive elements p[0..3] of which the first `avail` exist (zero beyond).
template <class T>
KILN_DEVICE inline void load4(const T* p, int64_t avail, bool vec, T out[4]) {
  if constexpr (std::is_same<T, float>::value) {
    if (vec && avail >= 4) {
      const Float4 v = *reinterpret_cast<const Float4*>(p);
      out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
      return;
    }
  }
  for (int j = 0; j < 4; ++j) out[j] = j < avail ? p[j] : T(0);
}

template <class T>
KILN_GLOBAL void gemm_tiled_kernel(GemmArgs<T> g) {
  KILN_SHARED T As[kBK][kBM];  // As[kk][i] = op(A)[i0 + i][k0 + kk]
  KILN_SHARED T Bs[kBK][kBN];  // Bs[kk][j] = op(B)[k0 + kk][j0 + j]
  const int t = threadIdx.x;
  const int ty = t / (kBN / kTN), tx = t % (kBN / kTN);
  const int64_t j0 = int64_t(blockIdx.x) * kBN;
  const int64_t mtiles = (g.m + kBM - 1) / kBM;
  for (int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const T* a = g.a + z * g.sa;
    const T* b = g.b + z * g.sb;
    T* c = g.c + z * g.sc;
    for (int64_t mt = blockIdx.y; mt < mtiles; mt += gridDim.y) {
      const int64_t i0 = mt * kBM;
      T acc[kTM][kTN];
      for (int i = 0; i < kTM; ++i)
        for (int j = 0; j < kTN; ++j) acc[i][j] = T(0);
      for (int64_t k0 = 0; k0 < g.k; k0 += kBK) {
        T v[4];
        if (!g.ta) {  // A row-major M x K: 4 consecutive k of one row
          const int r = t / 2, kc = (t % 2) * 4;
          const int64_t i = i0 + r, kk = k0 + kc;
          const int64_t avail = i < g.m ? g.k - kk : 0;
          load4(a + i * g.lda + kk, avail, g.vec_a, v);
          for (int j = 0; j < 4; ++j) As[kc + j][r] = v[j];
        } else {  // A stored K x M: 4 consecutive m of one k
          const int kc = t / 32, r = (t % 32) * 4;
          const int64_t i = i0 + r, kk = k0 + kc;
          const int64_t avail = kk < g.k ? g.m - i : 0;
          load4(a + kk * g.lda + i, avail, g.vec_a, v);
          for (int j = 0; j < 4; ++j) As[kc][r + j] = v[j];
        }
        if (!g.tb) {  // B row-major K x N: 4 consecutive n of one k
          const int kc = t / 32, cidx = (t % 32) * 4;
          const int64_t j = j0 + cidx, kk = k0 + kc;
          const int64_t avail = kk < g.k ? g.n - j : 0;
          load4(b + kk * g.ldb + j, avail, g.vec_b, v);
          for (int q = 0; q < 4; ++q) Bs[kc][cidx + q] = v[q];
        } else {  // B stored N x K: 4 consecutive k of one n
          const int cidx = t / 2, kc = (t % 2) * 4;
          const int64_t j = j0 + cidx, kk = k0 + kc;
          const int64_t avail = j < g.n ? g.k - kk : 0;
          load4(b + j * g.ldb + kk, avail, g.vec_b, v);
          for (int q = 0; q < 4; ++q) Bs[kc + q][cidx] = v[q];
        }
        __syncthreads();
        for (int kk = 0; kk < kBK; ++kk) {
          T ar[kTM], br[kTN];
          for (int i = 0; i < kTM; ++i) ar[i] = As[kk][ty * kTM + i];
          for (int j = 0; j < kTN; ++j) br[j] = Bs[kk][tx * kTN + j];
          for (int i = 0; i < kTM; ++i)
            for (int j = 0; j < kTN; ++j) acc[i][j] += ar[i] * br[j];
        }
        __syncthreads();
      }
      for (int i = 0; i < kTM; ++i) {
        const int64_t row = i0 + ty * kTM + i;
        if (row >= g.m) break;
        for (int j = 0; j < kTN; ++j) {
          const int64_t col = j0 + tx * kTN + j;
          if (col >= g.n) break;
          T& out = c[row * g.ldc + col];
          out = g.beta == T(0) ? g.alpha * acc[i][j] : g.alpha * acc[i][j] + g.beta * out;
        }
      }
    }
  }
}

template <class T>
KILN_GLOBAL void gemm_small_kernel(GemmArgs<T> g) {
  KILN_SHARED T As[kSmall][kSmall + 1];  // As[i][kk]
  KILN_SHARED T Bs[kSmall][kSmall + 1];  // Bs[kk][j]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kSmall + tx;
  const int64_t mtiles = (g.m + kSmall - 1) / kSmall;
  for (int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const T* a = g.a + z * g.sa;
    const T* b = g.b + z * g.sb;
    T* c = g.c + z * g.sc;
    for (int64_t mt = blockIdx.y; mt < mtiles; mt += gridDim.y) {
      const int64_t i0 = mt * kSmall, row = i0 + ty;
      T acc = T(0);
      for (int64_t k0 = 0; k0 < g.k; k0 += kSmall) {
        // Thread (ty, tx) loads A[i0 + ty][k0 + tx] and B[k0 + ty][col]; for the transposed
        // layouts the roles swap so consecutive threads read consecutive addresses.
        if (!g.ta) {
          const int64_t i = i0 + ty, kk = k0 + tx;
          As[ty][tx] = (i < g.m && kk < g.k) ? a[i * g.lda + kk] : T(0);
        } else {
          const int64_t i = i0 + tx, kk = k0 + ty;
          As[tx][ty] = (i < g.m && kk < g.k) ? a[kk * g.lda + i] : T(0);
        }
        if (!g.tb) {
          const int64_t kk = k0 + ty;
          Bs[ty][tx] = (kk < g.k && col < g.n) ? b[kk * g.ldb + col] : T(0);
        } else {
          const int64_t j = int64_t(blockIdx.x) * kSmall + ty, kk = k0 + tx;
          Bs[tx][ty] = (j < g.n && kk < g.k) ? b[j * g.ldb + kk] : T(0);
        }
        __syncthreads();
        for (int kk = 0; kk < kSmall; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
      }
      if (row < g.m && col < g.n) {
        T& out = c[row * g.ldc + col];
        out = g.beta == T(0) ? g.alpha * acc : g.alpha * acc + g.beta * out;
      }
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class T>
void run_gemm(GemmArgs<T> g) {
  if (g.m <= 0 || g.n <= 0 || g.batch <= 0) return;
  const bool f32 = std::is_same<T, float>::value;
  g.vec_a = f32 && aligned16(g.a) && g.lda % 4 == 0 && g.sa % 4 == 0;
  g.vec_b = f32 && aligned16(g.b) && g.ldb % 4 == 0 && g.sb % 4 == 0;
  const int64_t z = g.batch < kMaxGridYZ ? g.batch : kMaxGridYZ;
  // The big tile wastes most of its threads below ~64 rows or columns.
  if (g.m >= 64 && g.n >= 64) {
    const int64_t mt = (g.m + kBM - 1) / kBM, nt = (g.n + kBN - 1) / kBN;
    launch(gemm_tiled_kernel<T>, dim3(unsigned(nt), unsigned(mt < kMaxGridYZ ? mt : kMaxGridYZ), unsigned(z)),
           dim3(kThreads), 0, current_stream(), g);
  } else {
    const int64_t mt = (g.m + kSmall - 1) / kSmall, nt = (g.n + kSmall - 1) / kSmall;
    launch(gemm_small_kernel<T>, dim3(unsigned(nt), unsigned(mt < kMaxGridYZ ? mt : kMaxGridYZ), unsigned(z)),
           dim3(kSmall, kSmall), 0, current_stream(), g);
  }
}

template <class T>
GemmArgs<T> args_of(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                    int64_t sa, const T* b, int64_t ldb, int64_t sb, T beta, T* c, int64_t ldc, int64_t sc,
                    int64_t batch) {
  KILN_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "cuda gemm: negative size m=", m, " n=", n, " k=", k,
             " batch=", batch);
  KILN_CHECK(lda >= (ta ? m : k) && ldb >= (tb ? k : n) && ldc >= n, "cuda gemm: leading dimension too small: lda=",
             lda, " ldb=", ldb, " ldc=", ldc, " for m=", m, " n=", n, " k=", k);
  GemmArgs<T> g{};
  g.ta = ta; g.tb = tb;
  g.m = m; g.n = n; g.k = k;
  g.lda = lda; g.ldb = ldb; g.ldc = ldc;
  g.alpha = alpha; g.beta = beta;
  g.batch = batch; g.sa = sa; g.sb = sb; g.sc = sc;
  g.a = a; g.b = b; g.c = c;
  return g;
}

}  // namespace

bool supports_gemm(const GemmDesc& d) { return d.dtype == DType::float32 || d.dtype == DType::float64; }

void gemm(const GemmDesc& d, const void* a, const void* b, void* c) {
  if (d.dtype == DType::float32) {
    run_gemm(args_of<float>(d.trans_a, d.trans_b, d.m, d.n, d.k, float(d.alpha), static_cast<const float*>(a), d.lda,
                            d.stride_a, static_cast<const float*>(b), d.ldb, d.stride_b, float(d.beta),
                            static_cast<float*>(c), d.ldc, d.stride_c, d.batch));
  } else if (d.dtype == DType::float64) {
    run_gemm(args_of<double>(d.trans_a, d.trans_b, d.m, d.n, d.k, d.alpha, static_cast<const double*>(a), d.lda,
                             d.stride_a, static_cast<const double*>(b), d.ldb, d.stride_b, d.beta,
                             static_cast<double*>(c), d.ldc, d.stride_c, d.batch));
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
