// The inner product as gemm products (engine/ops/linear_gemm.h).
#include "engine/ops/linear_gemm.h"

#ifdef KILN_HAVE_CUDA

#include <algorithm>
#include <map>
#include <mutex>

#include "engine/dispatch.h"
#include "engine/tensor.h"
#include "kernels/cuda/runtime.h"

namespace kiln {
namespace {

constexpr DeviceType kCuda = DeviceType::cuda;

// A device vector of at least n ones of `dtype` on the current device, kept for the process
// (it only grows): the bias of the inner product is ones[n] x bias[oc].
const void* ones_vector(int64_t n, DType dtype) {
  static std::mutex mu;
  static std::map<std::pair<int, DType>, Tensor> cache;
  std::lock_guard<std::mutex> lock(mu);
  const int dev = cuda::current_device();
  Tensor& t = cache[{dev, dtype}];
  if (!t.defined() || t.numel() < n)
    t = kiln::ones({std::max<int64_t>(n, 1024)}, TensorOptions(dtype).with_device(Device(DeviceType::cuda, dev)));
  return t.data_ptr();
}

GemmDesc gemm_desc(DType dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                   int64_t ldc, double beta) {
  GemmDesc g;
  g.dtype = dtype;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.beta = beta;
  return g;
}

}  // namespace

bool linear_gemm_supported(const LinearDesc& d) {
  const bool half = d.dtype == DType::float16 || d.dtype == DType::bfloat16;
  if (d.dtype != DType::float32 && d.dtype != DType::float64 && !half) return false;
  // Every product the three passes make must find a gemm.
  const GemmDesc g[] = {gemm_desc(d.dtype, false, true, d.n, d.oc, d.ic, d.ic, d.ic, d.oc, 0),
                        gemm_desc(d.dtype, false, false, d.n, d.ic, d.oc, d.oc, d.ic, d.ic, 0),
                        gemm_desc(d.dtype, true, false, d.oc, d.ic, d.n, d.oc, d.ic, d.ic, 0)};
  for (const GemmDesc& x : g)
    if (!find_kernel<kernel_op::gemm>(kCuda, x)) return false;
  if (d.has_bias) {
    const GemmDesc b[] = {gemm_desc(d.dtype, false, false, d.n, d.oc, 1, 1, d.oc, d.oc, 1),
                          gemm_desc(d.dtype, false, false, 1, d.oc, d.n, d.n, d.oc, d.oc, 0)};
    for (const GemmDesc& x : b)
      if (!find_kernel<kernel_op::gemm>(kCuda, x)) return false;
  }
  return true;
}

// dst[n, oc] = src[n, ic] . wei[oc, ic]^T (+ ones[n] . bias[oc]).
void linear_gemm_fwd(const LinearDesc& d, const void* src, const void* wei, const void* bias, void* dst) {
  dispatch<kernel_op::gemm>(kCuda, gemm_desc(d.dtype, false, true, d.n, d.oc, d.ic, d.ic, d.ic, d.oc, 0), src, wei, dst);
  if (d.has_bias && bias)
    dispatch<kernel_op::gemm>(kCuda, gemm_desc(d.dtype, false, false, d.n, d.oc, 1, 1, d.oc, d.oc, 1), ones_vector(d.n, d.dtype), bias, dst);
}

// diff_src[n, ic] = diff_dst[n, oc] . wei[oc, ic].
void linear_gemm_bwd_data(const LinearDesc& d, const void* diff_dst, const void* wei, void* diff_src) {
  dispatch<kernel_op::gemm>(kCuda, gemm_desc(d.dtype, false, false, d.n, d.ic, d.oc, d.oc, d.ic, d.ic, 0), diff_dst, wei, diff_src);
}

// diff_wei[oc, ic] = diff_dst^T . src; diff_bias[oc] = ones[n] . diff_dst (a 1-row product).
void linear_gemm_bwd_weights(const LinearDesc& d, const void* src, const void* diff_dst, void* diff_wei,
                        void* diff_bias) {
  if (diff_wei)
    dispatch<kernel_op::gemm>(kCuda, gemm_desc(d.dtype, true, false, d.oc, d.ic, d.n, d.oc, d.ic, d.ic, 0), diff_dst, src, diff_wei);
  if (d.has_bias && diff_bias)
    dispatch<kernel_op::gemm>(kCuda, gemm_desc(d.dtype, false, false, 1, d.oc, d.n, d.n, d.oc, d.oc, 0), ones_vector(d.n, d.dtype), diff_dst,
              diff_bias);
}


}  // namespace kiln

#endif  // KILN_HAVE_CUDA
