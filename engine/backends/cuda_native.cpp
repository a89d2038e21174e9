// The `native` backend on CUDA devices: kiln's own CUDA kernels (kernels/cuda/native, also run by
// the emulator in CI: ctest -L emu). Every op that exists on the CPU exists here (shared/DESIGN.md);
// `auto` takes cuDNN/cuBLAS first where they say yes (engine/backends/cuda_cudnn.cpp) and these
// elsewhere (max pooling with PyTorch's indices, adaptive pooling, dropout, the losses, the
// optimizers ...). The inner product is the gemm composite (engine/ops/linear_gemm.h) over
// kiln's GEMM under a strict "native" preference.
#include "engine/dispatch.h"

#ifdef KILN_HAVE_CUDA

#include "engine/ops/linear_gemm.h"
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

namespace kiln {

void register_cuda_native(BackendRegistrar& r) {
  namespace k = cuda;
  r.add<op::unary>(k::supports_unary, k::unary);
  r.add<op::binary>(k::supports_binary, k::binary);
  r.add<op::copy>(k::supports_copy, k::copy);
  r.add<op::fill>(k::supports_fill, k::fill);
  r.add<op::random>(k::supports_random, k::random);
  r.add<op::reduce>(k::supports_reduce, k::reduce);
  r.add<op::index_scatter>(k::supports_index_scatter, k::index_scatter);
  r.add<op::gemm>(k::supports_gemm, k::gemm);
  r.add<op::conv2d_fwd>(k::supports_conv, k::conv2d_fwd);
  r.add<op::conv2d_bwd_data>(k::supports_conv, k::conv2d_bwd_data);
  r.add<op::conv2d_bwd_weights>(k::supports_conv, k::conv2d_bwd_weights);
  r.add<op::pool_fwd>(k::supports_pool, k::pool_fwd);
  r.add<op::pool_bwd>(k::supports_pool, k::pool_bwd);
  r.add<op::adaptive_pool_fwd>(k::supports_adaptive_pool, k::adaptive_pool_fwd);
  r.add<op::adaptive_pool_bwd>(k::supports_adaptive_pool, k::adaptive_pool_bwd);
  r.add<op::lrn_fwd>(k::supports_lrn, k::lrn_fwd);
  r.add<op::lrn_bwd>(k::supports_lrn, k::lrn_bwd);
  r.add<op::batch_norm_fwd>(k::supports_batch_norm, k::batch_norm_fwd);
  r.add<op::batch_norm_bwd>(k::supports_batch_norm, k::batch_norm_bwd);
  r.add<op::dropout_fwd>(k::supports_dropout, k::dropout_fwd);
  r.add<op::dropout_bwd>(k::supports_dropout, k::dropout_bwd);
  r.add<op::softmax_fwd>(k::supports_softmax, k::softmax_fwd);
  r.add<op::softmax_bwd>(k::supports_softmax, k::softmax_bwd);
  r.add<op::cross_entropy_fwd>(k::supports_class_loss, k::cross_entropy_fwd);
  r.add<op::cross_entropy_bwd>(k::supports_class_loss, k::cross_entropy_bwd);
  r.add<op::nll_fwd>(k::supports_class_loss, k::nll_fwd);
  r.add<op::nll_bwd>(k::supports_class_loss, k::nll_bwd);
  r.add<op::point_loss_fwd>(k::supports_point_loss, k::point_loss_fwd);
  r.add<op::point_loss_bwd>(k::supports_point_loss, k::point_loss_bwd);
  r.add<op::sgd_step>(k::supports_optim_sgd, k::sgd_step);
  r.add<op::adam_step>(k::supports_optim_adam, k::adam_step);
  r.add<op::lars_step>(k::supports_optim_lars, k::lars_step);
  r.add<op::sum_squares>(k::supports_optim_vec, k::sum_squares);
  r.add<op::scale>(k::supports_optim_vec, k::scale);
  r.add<op::multi_tensor_step>(k::supports_multi_tensor, k::multi_tensor_step);
  r.add<op::multi_tensor_sum_squares>(k::supports_multi_tensor, k::multi_tensor_sum_squares);
  r.add<op::concat>(k::supports_concat, k::concat);
  r.add<op::sum>(k::supports_sum, k::sum);
  r.add<op::pad_fwd>(k::supports_pad, k::pad_fwd);
  r.add<op::pad_bwd>(k::supports_pad, k::pad_bwd);
  r.add<op::upsample_fwd>(k::supports_upsample, k::upsample_fwd);
  r.add<op::upsample_bwd>(k::supports_upsample, k::upsample_bwd);
  r.add<op::linear_fwd>(linear_gemm_supported, linear_gemm_fwd);
  r.add<op::linear_bwd_data>(linear_gemm_supported, linear_gemm_bwd_data);
  r.add<op::linear_bwd_weights>(linear_gemm_supported, linear_gemm_bwd_weights);
}

}  // namespace kiln

#endif  // KILN_HAVE_CUDA
