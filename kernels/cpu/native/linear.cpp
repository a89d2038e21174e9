// Inner product on kiln's GEMM. See linear.h.
//   ctest --test-dir build -R test_linear_kernels
#include "kernels/cpu/native/linear.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/native/gemm_bf16.h"

namespace kiln::native {
namespace {

GemmDesc gemm_desc(DType t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                   double beta) {
  GemmDesc g;
  g.dtype = t;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m, g.n = n, g.k = k;
  g.lda = std::max<int64_t>(lda, 1), g.ldb = std::max<int64_t>(ldb, 1), g.ldc = std::max<int64_t>(n, 1);
  g.beta = beta;
  return g;
}

template <class T>
void fill_rows(const LinearDesc& d, const T* bias, T* dst) {
  parallel_for(0, d.n, std::max<int64_t>(1, 16384 / std::max<int64_t>(d.oc, 1)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      T* row = dst + i * d.oc;
      if (bias) std::memcpy(row, bias, sizeof(T) * d.oc);
      else std::fill(row, row + d.oc, T(0));
    }
  });
}

// diff_bias[o] = sum_i diff_dst[i, o], rows added in order (the same bits for any thread count).
template <class T>
void column_sum(const LinearDesc& d, const T* diff_dst, T* diff_bias) {
  constexpr int64_t kCols = 256;
  parallel_for(0, (d.oc + kCols - 1) / kCols, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t o0 = b * kCols, o1 = std::min(d.oc, o0 + kCols);
      T acc[kCols];
      std::fill(acc, acc + (o1 - o0), T(0));
      for (int64_t i = 0; i < d.n; ++i) {
        const T* row = diff_dst + i * d.oc + o0;
        for (int64_t o = 0; o < o1 - o0; ++o) acc[o] += row[o];
      }
      std::copy(acc, acc + (o1 - o0), diff_bias + o0);
    }
  });
}

template <class T>
void fwd(const LinearDesc& d, const T* src, const T* wei, const T* bias, T* dst) {
  if (d.n == 0 || d.oc == 0) return;
  const bool b = d.has_bias && bias;
  if (d.ic == 0) return fill_rows(d, b ? bias : nullptr, dst);
  if (b) fill_rows(d, bias, dst);
  // dst[n, oc] (+)= src[n, ic] wei[oc, ic]^T
  gemm(gemm_desc(d.dtype, false, true, d.n, d.oc, d.ic, d.ic, d.ic, b ? 1.0 : 0.0), src, wei, dst);
}

template <class T>
void bwd_data(const LinearDesc& d, const T* diff_dst, const T* wei, T* diff_src) {
  if (d.n == 0 || d.ic == 0) return;
  if (d.oc == 0) return (void)std::fill(diff_src, diff_src + d.n * d.ic, T(0));
  gemm(gemm_desc(d.dtype, false, false, d.n, d.ic, d.oc, d.oc, d.ic, 0.0), diff_dst, wei, diff_src);
}

template <class T>
void bwd_weights(const LinearDesc& d, const T* src, const T* diff_dst, T* diff_wei, T* diff_bias) {
  if (diff_wei && d.oc * d.ic > 0) {
    if (d.n == 0) std::fill(diff_wei, diff_wei + d.oc * d.ic, T(0));
    else  // diff_wei[oc, ic] = diff_dst[n, oc]^T src[n, ic]
      gemm(gemm_desc(d.dtype, true, false, d.oc, d.ic, d.n, d.oc, d.ic, 0.0), diff_dst, src, diff_wei);
  }
  if (diff_bias && d.oc > 0) column_sum(d, diff_dst, diff_bias);
}

// bfloat16 (LinearDesc: every operand bfloat16, the bias too): products summed in float32 by the
// bfloat16 GEMM, the bias added and the bias gradient summed in float32, each result rounded once.
void fwd_bf16(const LinearDesc& d, const BFloat16* src, const BFloat16* wei, const BFloat16* bias, BFloat16* dst) {
  if (d.n == 0 || d.oc == 0) return;
  const bool b = d.has_bias && bias;
  if (d.ic == 0) return fill_rows(d, b ? bias : nullptr, dst);
  std::vector<float> fbias(b ? size_t(d.oc) : 0);
  for (int64_t o = 0; o < int64_t(fbias.size()); ++o) fbias[size_t(o)] = float(bias[o]);
  Bf16Epilogue epi;
  epi.col_bias = b ? fbias.data() : nullptr;
  bf16gemm_round(false, true, d.n, d.oc, d.ic, 1.f, src, d.ic, wei, d.ic, 0.f, dst, d.oc, epi);
}

void bwd_data_bf16(const LinearDesc& d, const BFloat16* diff_dst, const BFloat16* wei, BFloat16* diff_src) {
  if (d.n == 0 || d.ic == 0) return;
  if (d.oc == 0) return (void)std::fill(diff_src, diff_src + d.n * d.ic, BFloat16(0.f));
  bf16gemm_round(false, false, d.n, d.ic, d.oc, 1.f, diff_dst, d.oc, wei, d.ic, 0.f, diff_src, d.ic);
}

void bwd_weights_bf16(const LinearDesc& d, const BFloat16* src, const BFloat16* diff_dst, BFloat16* diff_wei,
                      BFloat16* diff_bias) {
  if (diff_wei && d.oc * d.ic > 0) {
    if (d.n == 0) std::fill(diff_wei, diff_wei + d.oc * d.ic, BFloat16(0.f));
    else bf16gemm_round(true, false, d.oc, d.ic, d.n, 1.f, diff_dst, d.oc, src, d.ic, 0.f, diff_wei, d.ic);
  }
  if (diff_bias && d.oc > 0) {
    constexpr int64_t kCols = 256;  // column_sum's scheme, summed in float32
    parallel_for(0, (d.oc + kCols - 1) / kCols, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t o0 = b * kCols, o1 = std::min(d.oc, o0 + kCols);
        float acc[kCols] = {};
        for (int64_t i = 0; i < d.n; ++i) {
          const BFloat16* row = diff_dst + i * d.oc + o0;
          for (int64_t o = 0; o < o1 - o0; ++o) acc[o] += float(row[o]);
        }
        for (int64_t o = o0; o < o1; ++o) diff_bias[o] = BFloat16(acc[o - o0]);
      }
    });
  }
}

void check(const LinearDesc& d, const char* op) {
  KILN_CHECK(supports_linear(d), op, " (native): unsupported ", d.str());
}

}  // namespace

bool supports_linear(const LinearDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::float64 || d.dtype == DType::bfloat16) && d.n >= 0 &&
         d.ic >= 0 && d.oc >= 0;
}

void linear_fwd(const LinearDesc& d, const void* src, const void* wei, const void* bias, void* dst) {
  check(d, "linear_fwd");
  if (d.dtype == DType::bfloat16)
    return fwd_bf16(d, static_cast<const BFloat16*>(src), static_cast<const BFloat16*>(wei),
                    static_cast<const BFloat16*>(bias), static_cast<BFloat16*>(dst));
  if (d.dtype == DType::float64)
    fwd(d, static_cast<const double*>(src), static_cast<const double*>(wei), static_cast<const double*>(bias),
        static_cast<double*>(dst));
  else
    fwd(d, static_cast<const float*>(src), static_cast<const float*>(wei), static_cast<const float*>(bias),
        static_cast<float*>(dst));
}

void linear_bwd_data(const LinearDesc& d, const void* diff_dst, const void* wei, void* diff_src) {
  check(d, "linear_bwd_data");
  if (d.dtype == DType::bfloat16)
    return bwd_data_bf16(d, static_cast<const BFloat16*>(diff_dst), static_cast<const BFloat16*>(wei),
                         static_cast<BFloat16*>(diff_src));
  if (d.dtype == DType::float64)
    bwd_data(d, static_cast<const double*>(diff_dst), static_cast<const double*>(wei), static_cast<double*>(diff_src));
  else
    bwd_data(d, static_cast<const float*>(diff_dst), static_cast<const float*>(wei), static_cast<float*>(diff_src));
}

void linear_bwd_weights(const LinearDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias) {
  check(d, "linear_bwd_weights");
  if (d.dtype == DType::bfloat16)
    return bwd_weights_bf16(d, static_cast<const BFloat16*>(src), static_cast<const BFloat16*>(diff_dst),
                            static_cast<BFloat16*>(diff_wei), static_cast<BFloat16*>(diff_bias));
  if (d.dtype == DType::float64)
    bwd_weights(d, static_cast<const double*>(src), static_cast<const double*>(diff_dst), static_cast<double*>(diff_wei),
                static_cast<double*>(diff_bias));
  else
    bwd_weights(d, static_cast<const float*>(src), static_cast<const float*>(diff_dst), static_cast<float*>(diff_wei),
                static_cast<float*>(diff_bias));
}

}  // namespace kiln::native
