// register_cuda: kiln's own CUDA kernels ("native" on DeviceType::cuda), registered after every
// family's CPU kernels and after the cuDNN/cuBLAS candidates the families add themselves, so on a
// GPU `auto` tries cuDNN first and falls back to kiln's kernels where cuDNN says no (max pooling
// with PyTorch's indices, adaptive pooling, dropout, the losses, the optimizers ...). Every op
// that exists on the CPU exists here (shared/DESIGN.md); the inner product is a composite of the
// `gemm` op (cuBLAS or kiln's GEMM), with the bias as a rank-1 product against a ones vector.
// float16/bfloat16 inner products (mixed precision: engine/ops/linalg.cpp sends them here on
// CUDA) run where a gemm candidate takes the half type, i.e. cuBLAS's cublasGemmEx with float32
// accumulation on tensor cores; the bias is in the data type (LinearDesc's contract) and is added
// by a second product with beta = 1, so dst rounds to half once per product.
// Compiled only with CUDA (KILN_HAVE_CUDA); the kernels' own tests run in the emulator
// (ctest -L emu), their registration on a GPU (ctest -L gpu, tools/gpu-check).
#include "engine/dispatch.h"

#ifdef KILN_HAVE_CUDA

#include <map>
#include <mutex>

#include "engine/tensor.h"
#include "kernels/common/linear.h"
#include "kernels/common/multi_tensor.h"
#include "kernels/cuda/native/concat.h"
#include "kernels/cuda/native/conv.h"
#include "kernels/cuda/native/copy.h"
#include "kernels/cuda/native/elementwise.h"
#include "kernels/cuda/native/gemm.h"
#include "kernels/cuda/native/loss.h"
#include "kernels/cuda/native/norm.h"
#include "kernels/cuda/native/optim.h"
#include "kernels/cuda/native/pool.h"
#include "kernels/cuda/native/reduce.h"
#include "kernels/cuda/native/shape.h"
#include "kernels/cuda/runtime.h"

namespace kiln {
namespace {

constexpr DeviceType kCuda = DeviceType::cuda;

auto& gemm_op() { return KILN_OP("gemm", GemmDesc, const void*, const void*, void*); }

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

bool supports_linear(const LinearDesc& d) {
  const bool half = d.dtype == DType::float16 || d.dtype == DType::bfloat16;
  if (d.dtype != DType::float32 && d.dtype != DType::float64 && !half) return false;
  // Every product the three passes make must find a gemm (the half types: only cuBLAS takes them).
  const GemmDesc g[] = {gemm_desc(d.dtype, false, true, d.n, d.oc, d.ic, d.ic, d.ic, d.oc, 0),
                        gemm_desc(d.dtype, false, false, d.n, d.ic, d.oc, d.oc, d.ic, d.ic, 0),
                        gemm_desc(d.dtype, true, false, d.oc, d.ic, d.n, d.oc, d.ic, d.ic, 0)};
  for (const GemmDesc& x : g)
    if (!gemm_op().find(kCuda, x)) return false;
  if (d.has_bias) {
    const GemmDesc b[] = {gemm_desc(d.dtype, false, false, d.n, d.oc, 1, 1, d.oc, d.oc, 1),
                          gemm_desc(d.dtype, false, false, 1, d.oc, d.n, d.n, d.oc, d.oc, 0)};
    for (const GemmDesc& x : b)
      if (!gemm_op().find(kCuda, x)) return false;
  }
  return true;
}

// dst[n, oc] = src[n, ic] . wei[oc, ic]^T (+ ones[n] . bias[oc]).
void linear_fwd(const LinearDesc& d, const void* src, const void* wei, const void* bias, void* dst) {
  gemm_op()(kCuda, gemm_desc(d.dtype, false, true, d.n, d.oc, d.ic, d.ic, d.ic, d.oc, 0), src, wei, dst);
  if (d.has_bias && bias)
    gemm_op()(kCuda, gemm_desc(d.dtype, false, false, d.n, d.oc, 1, 1, d.oc, d.oc, 1), ones_vector(d.n, d.dtype), bias, dst);
}

// diff_src[n, ic] = diff_dst[n, oc] . wei[oc, ic].
void linear_bwd_data(const LinearDesc& d, const void* diff_dst, const void* wei, void* diff_src) {
  gemm_op()(kCuda, gemm_desc(d.dtype, false, false, d.n, d.ic, d.oc, d.oc, d.ic, d.ic, 0), diff_dst, wei, diff_src);
}

// diff_wei[oc, ic] = diff_dst^T . src; diff_bias[oc] = ones[n] . diff_dst (a 1-row product).
void linear_bwd_weights(const LinearDesc& d, const void* src, const void* diff_dst, void* diff_wei,
                        void* diff_bias) {
  if (diff_wei)
    gemm_op()(kCuda, gemm_desc(d.dtype, true, false, d.oc, d.ic, d.n, d.oc, d.ic, d.ic, 0), diff_dst, src, diff_wei);
  if (d.has_bias && diff_bias)
    gemm_op()(kCuda, gemm_desc(d.dtype, false, false, 1, d.oc, d.n, d.n, d.oc, d.oc, 0), ones_vector(d.n, d.dtype), diff_dst,
              diff_bias);
}

}  // namespace

void register_cuda_kernels(Registry& r) {
  namespace k = cuda;  // kiln's own CUDA kernels (kernels/cuda/native)
  r.op<UnaryDesc, const void*, void*>("unary").add("native", kCuda, k::supports_unary, k::unary);
  r.op<BinaryDesc, const void*, const void*, void*>("binary").add("native", kCuda, k::supports_binary, k::binary);
  r.op<CopyDesc, const void*, void*>("copy").add("native", kCuda, k::supports_copy, k::copy);
  r.op<FillDesc, void*>("fill").add("native", kCuda, k::supports_fill, k::fill);
  r.op<RandomDesc, void*>("random").add("native", kCuda, k::supports_random, k::random);
  r.op<ReduceDesc, const void*, void*, int64_t*>("reduce").add("native", kCuda, k::supports_reduce, k::reduce);
  r.op<IndexScatterDesc, const void*, const int64_t*, void*>("index_scatter")
      .add("native", kCuda, k::supports_index_scatter, k::index_scatter);

  r.op<GemmDesc, const void*, const void*, void*>("gemm").add("native", kCuda, k::supports_gemm, k::gemm);
  // The inner product is the gemm op's composite under both names: under a strict "cudnn" it
  // runs on cuBLAS, under a strict "native" on kiln's GEMM (the gemm dispatch inside follows the
  // same preference).
  auto& lf = r.op<LinearDesc, const void*, const void*, const void*, void*>("linear_fwd");
  auto& ld = r.op<LinearDesc, const void*, const void*, void*>("linear_bwd_data");
  auto& lw = r.op<LinearDesc, const void*, const void*, void*, void*>("linear_bwd_weights");
  for (const char* name : {"cudnn", "native"}) {
    lf.add(name, kCuda, supports_linear, linear_fwd);
    ld.add(name, kCuda, supports_linear, linear_bwd_data);
    lw.add(name, kCuda, supports_linear, linear_bwd_weights);
  }

  r.op<ConvDesc, const void*, const void*, const void*, void*>("conv2d_fwd")
      .add("native", kCuda, k::supports_conv, k::conv2d_fwd);
  r.op<ConvDesc, const void*, const void*, void*>("conv2d_bwd_data")
      .add("native", kCuda, k::supports_conv, k::conv2d_bwd_data);
  r.op<ConvDesc, const void*, const void*, void*, void*>("conv2d_bwd_weights")
      .add("native", kCuda, k::supports_conv, k::conv2d_bwd_weights);

  r.op<PoolDesc, const void*, void*, int64_t*>("pool_fwd").add("native", kCuda, k::supports_pool, k::pool_fwd);
  r.op<PoolDesc, const void*, const int64_t*, void*>("pool_bwd").add("native", kCuda, k::supports_pool, k::pool_bwd);
  r.op<AdaptivePoolDesc, const void*, void*, int64_t*>("pool_adaptive_fwd")
      .add("native", kCuda, k::supports_adaptive_pool, k::adaptive_pool_fwd);
  r.op<AdaptivePoolDesc, const void*, const int64_t*, void*>("pool_adaptive_bwd")
      .add("native", kCuda, k::supports_adaptive_pool, k::adaptive_pool_bwd);
  r.op<LrnDesc, const void*, void*, void*>("pool_lrn_fwd").add("native", kCuda, k::supports_lrn, k::lrn_fwd);
  r.op<LrnDesc, const void*, const void*, const void*, const void*, void*>("pool_lrn_bwd")
      .add("native", kCuda, k::supports_lrn, k::lrn_bwd);

  r.op<BatchNormDesc, const void*, const void*, const void*, void*, void*, void*, void*, void*>("norm_batch_norm_fwd")
      .add("native", kCuda, k::supports_batch_norm, k::batch_norm_fwd);
  r.op<BatchNormDesc, const void*, const void*, const void*, const void*, const void*, void*, void*, void*>(
       "norm_batch_norm_bwd")
      .add("native", kCuda, k::supports_batch_norm, k::batch_norm_bwd);
  r.op<DropoutDesc, const void*, void*, uint8_t*>("norm_dropout_fwd")
      .add("native", kCuda, k::supports_dropout, k::dropout_fwd);
  r.op<DropoutDesc, const void*, const uint8_t*, void*>("norm_dropout_bwd")
      .add("native", kCuda, k::supports_dropout, k::dropout_bwd);
  r.op<SoftmaxDesc, const void*, void*>("norm_softmax_fwd").add("native", kCuda, k::supports_softmax, k::softmax_fwd);
  r.op<SoftmaxDesc, const void*, const void*, void*>("norm_softmax_bwd")
      .add("native", kCuda, k::supports_softmax, k::softmax_bwd);

  r.op<ClassLossDesc, const void*, const int64_t*, void*, void*>("loss_cross_entropy_fwd")
      .add("native", kCuda, k::supports_class_loss, k::cross_entropy_fwd);
  r.op<ClassLossDesc, const void*, const int64_t*, const void*, const void*, void*>("loss_cross_entropy_bwd")
      .add("native", kCuda, k::supports_class_loss, k::cross_entropy_bwd);
  r.op<ClassLossDesc, const void*, const int64_t*, void*>("loss_nll_fwd")
      .add("native", kCuda, k::supports_class_loss, k::nll_fwd);
  r.op<ClassLossDesc, const int64_t*, const void*, void*>("loss_nll_bwd")
      .add("native", kCuda, k::supports_class_loss, k::nll_bwd);
  r.op<PointLossDesc, const void*, const void*, const void*, void*>("loss_point_fwd")
      .add("native", kCuda, k::supports_point_loss, k::point_loss_fwd);
  r.op<PointLossDesc, const void*, const void*, const void*, const void*, void*, void*>("loss_point_bwd")
      .add("native", kCuda, k::supports_point_loss, k::point_loss_bwd);

  r.op<SGDStepDesc, void*, const void*, void*>("optim_sgd").add("native", kCuda, k::supports_optim_sgd, k::sgd_step);
  r.op<AdamStepDesc, void*, const void*, void*, void*>("optim_adam")
      .add("native", kCuda, k::supports_optim_adam, k::adam_step);
  r.op<LarsStepDesc, void*, const void*, void*>("optim_lars")
      .add("native", kCuda, k::supports_optim_lars, k::lars_step);
  r.op<VecDesc, const void*, double*>("optim_sum_squares")
      .add("native", kCuda, k::supports_optim_vec, k::sum_squares);
  r.op<VecDesc, void*>("optim_scale").add("native", kCuda, k::supports_optim_vec, k::scale);
  // The whole list in one launch; engine/ops/optim.cpp copies the planned entries to the device.
  r.op<MultiTensorDesc, const TensorListEntry*>("optim_multi_tensor")
      .add("native", kCuda, k::supports_multi_tensor, k::multi_tensor_step);
  r.op<MultiTensorDesc, const TensorListEntry*, bool, double*>("optim_multi_sum_squares")
      .add("native", kCuda, k::supports_multi_tensor, k::multi_tensor_sum_squares);

  r.op<ConcatDesc, const void* const*, void*>("concat").add("native", kCuda, k::supports_concat, k::concat);
  r.op<SumDesc, const void* const*, void*>("sum").add("native", kCuda, k::supports_sum, k::sum);
  r.op<PadDesc, const void*, void*>("shape_pad_fwd").add("native", kCuda, k::supports_pad, k::pad_fwd);
  r.op<PadDesc, const void*, void*>("shape_pad_bwd").add("native", kCuda, k::supports_pad, k::pad_bwd);
  r.op<UpsampleDesc, const void*, void*>("shape_upsample_fwd")
      .add("native", kCuda, k::supports_upsample, k::upsample_fwd);
  r.op<UpsampleDesc, const void*, void*>("shape_upsample_bwd")
      .add("native", kCuda, k::supports_upsample, k::upsample_bwd);
}

}  // namespace kiln

#endif  // KILN_HAVE_CUDA
