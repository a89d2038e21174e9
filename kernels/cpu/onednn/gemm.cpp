// dnnl_sgemm behind kiln's GemmDesc. See gemm.h.
//   Test: ctest --test-dir build -R test_onednn
#include "kernels/cpu/onednn/gemm.h"

#include <algorithm>
#include <atomic>

#include "kernels/common/parallel.h"
#include "kernels/cpu/onednn/dnnl_common.h"

namespace kiln::onednn {
namespace {

// Below this many flops per product, a batch is split across threads rather than each product.
constexpr double kSmallGemmFlops = 6e6;

dnnl_status_t one(const GemmDesc& d, const float* a, const float* b, float* c, int64_t i) {
  count_execution();
  return dnnl_sgemm(d.trans_a ? 'T' : 'N', d.trans_b ? 'T' : 'N', d.m, d.n, d.k, float(d.alpha), a + i * d.stride_a,
                    d.lda, b + i * d.stride_b, d.ldb, float(d.beta), c + i * d.stride_c, d.ldc);
}

}  // namespace

bool supports_gemm(const GemmDesc& d) {
  const int64_t a_cols = d.trans_a ? d.m : d.k, b_cols = d.trans_b ? d.k : d.n;
  return d.dtype == DType::float32 && d.m >= 0 && d.n >= 0 && d.k >= 0 && d.batch >= 0 &&
         d.lda >= std::max<int64_t>(1, a_cols) && d.ldb >= std::max<int64_t>(1, b_cols) &&
         d.ldc >= std::max<int64_t>(1, d.n);
}

void gemm(const GemmDesc& d, const void* a, const void* b, void* c) {
  KILN_CHECK(supports_gemm(d), "gemm (onednn): unsupported ", d.str(), " (lda ", d.lda, ", ldb ", d.ldb, ", ldc ",
             d.ldc, ")");
  if (d.batch == 0 || d.m == 0 || d.n == 0) return;
  const auto* A = static_cast<const float*>(a);
  const auto* B = static_cast<const float*>(b);
  auto* C = static_cast<float*>(c);
  if (d.k == 0) {  // an empty sum: BLAS scales C (and never reads it when beta == 0)
    for (int64_t i = 0; i < d.batch; ++i)
      for (int64_t r = 0; r < d.m; ++r) {
        float* row = C + i * d.stride_c + r * d.ldc;
        for (int64_t j = 0; j < d.n; ++j) row[j] = d.beta == 0.0 ? 0.f : float(d.beta) * row[j];
      }
    return;
  }
  const int nt = sync_threads();
  const double flops = 2.0 * double(d.m) * double(d.n) * double(d.k);
  std::atomic<int> failed{int(dnnl_success)};  // no exception may leave a parallel region
  if (d.batch > 1 && nt > 1 && flops < kSmallGemmFlops) {
    parallel_for(0, d.batch, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        if (dnnl_status_t st = one(d, A, B, C, i); st != dnnl_success) failed = int(st);
    });
  } else {
    for (int64_t i = 0; i < d.batch && failed == int(dnnl_success); ++i) failed = int(one(d, A, B, C, i));
  }
  check_status(dnnl_status_t(failed.load()), "dnnl_sgemm", "gemm", d.str(), __FILE__, __LINE__);
}

}  // namespace kiln::onednn
