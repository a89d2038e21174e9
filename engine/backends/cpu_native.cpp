// The `native` backend on the CPU: kiln's own OpenMP + SIMD kernels (kernels/cpu/native), the
// ISA chosen at run time. Every op has one; they are `auto`'s default on the CPU except where
// oneDNN's unit raises its own candidate (engine/backends/cpu_onednn.cpp says where and why).
#include "engine/backends/supports.h"
#include "engine/dispatch.h"
#include "kernels/cpu/native/concat.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/native/elementwise.h"
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/native/linear.h"
#include "kernels/cpu/native/loss.h"
#include "kernels/cpu/native/multi_tensor.h"
#include "kernels/cpu/native/norm.h"
#include "kernels/cpu/native/optim.h"
#include "kernels/cpu/native/index.h"
#include "kernels/cpu/native/pool.h"
#include "kernels/cpu/native/reduce.h"
#include "kernels/cpu/native/rnn.h"
#include "kernels/cpu/native/shape.h"

namespace kiln {

void register_cpu_native(BackendRegistrar& r) {
  namespace k = native;
  r.add<kernel_op::unary>(k::supports_unary, k::unary);
  r.add<kernel_op::binary>(k::supports_binary, k::binary);
  r.add<kernel_op::compare>(nullptr, k::compare);
  r.add<kernel_op::copy>(nullptr, k::copy);
  r.add<kernel_op::fill>(nullptr, k::fill);
  r.add<kernel_op::random>(nullptr, k::random);
  r.add<kernel_op::reduce>(k::supports_reduce, k::reduce);
  r.add<kernel_op::index_scatter>(takes_float<IndexScatterDesc>, k::index_scatter);
  r.add<kernel_op::gather>(nullptr, k::gather);
  r.add<kernel_op::scatter>(nullptr, k::scatter);
  r.add<kernel_op::where>(nullptr, k::where);
  r.add<kernel_op::sort>(k::supports_sort, k::sort);
  r.add<kernel_op::cumsum>(k::supports_cumsum, k::cumsum);

  r.add<kernel_op::gemm>(k::supports_gemm, k::gemm);
  r.add<kernel_op::linear_fwd>(k::supports_linear, k::linear_fwd);
  r.add<kernel_op::linear_bwd_data>(k::supports_linear, k::linear_bwd_data);
  r.add<kernel_op::linear_bwd_weights>(k::supports_linear, k::linear_bwd_weights);

  r.add<kernel_op::conv2d_fwd>(k::supports_conv, k::conv2d_fwd);  // the residual post-op on channels-last only
  r.add<kernel_op::conv2d_bwd_data>(k::supports_conv, k::conv2d_bwd_data);
  r.add<kernel_op::conv2d_bwd_weights>(k::supports_conv, k::conv2d_bwd_weights);

  r.add<kernel_op::pool_fwd>(k::supports_pool, k::pool_fwd);
  r.add<kernel_op::pool_bwd>(k::supports_pool, k::pool_bwd);
  r.add<kernel_op::adaptive_pool_fwd>(k::supports_adaptive_pool, k::adaptive_pool_fwd);
  r.add<kernel_op::adaptive_pool_bwd>(k::supports_adaptive_pool, k::adaptive_pool_bwd);
  r.add<kernel_op::lrn_fwd>(k::supports_lrn, k::lrn_fwd);
  r.add<kernel_op::lrn_bwd>(k::supports_lrn, k::lrn_bwd);

  r.add<kernel_op::batch_norm_fwd>(k::supports_batch_norm, k::batch_norm_fwd);
  r.add<kernel_op::batch_norm_bwd>(k::supports_batch_norm, k::batch_norm_bwd);
  r.add<kernel_op::dropout_fwd>(k::supports_dropout, k::dropout_fwd);
  r.add<kernel_op::dropout_bwd>(k::supports_dropout, k::dropout_bwd);
  r.add<kernel_op::softmax_fwd>(k::supports_softmax, k::softmax_fwd);
  r.add<kernel_op::softmax_bwd>(k::supports_softmax, k::softmax_bwd);

  r.add<kernel_op::cross_entropy_fwd>(k::supports_class_loss, k::cross_entropy_fwd);
  r.add<kernel_op::cross_entropy_bwd>(k::supports_class_loss, k::cross_entropy_bwd);
  r.add<kernel_op::nll_fwd>(k::supports_class_loss, k::nll_fwd);
  r.add<kernel_op::nll_bwd>(k::supports_class_loss, k::nll_bwd);
  r.add<kernel_op::point_loss_fwd>(k::supports_point_loss, k::point_loss_fwd);
  r.add<kernel_op::point_loss_bwd>(k::supports_point_loss, k::point_loss_bwd);

  // The forward's gates and states travel to the backward in the payload.
  r.add<kernel_op::rnn_fwd>(k::supports_rnn, kernel_op::rnn_fwd::PayloadKernel(k::rnn_fwd));
  r.add<kernel_op::rnn_bwd>(k::supports_rnn, kernel_op::rnn_bwd::PayloadKernel(k::rnn_bwd));

  r.add<kernel_op::sgd_step>(k::supports_optim_sgd, k::sgd_step);
  r.add<kernel_op::adam_step>(k::supports_optim_adam, k::adam_step);
  r.add<kernel_op::lars_step>(k::supports_optim_lars, k::lars_step);
  r.add<kernel_op::sum_squares>(k::supports_optim_vec, k::sum_squares);
  r.add<kernel_op::scale>(k::supports_optim_vec, k::scale);
  r.add<kernel_op::multi_tensor_step>(k::supports_multi_tensor, k::multi_tensor_step);
  r.add<kernel_op::multi_tensor_sum_squares>(k::supports_multi_tensor, k::multi_tensor_sum_squares);

  r.add<kernel_op::concat>(k::supports_concat, k::concat);
  r.add<kernel_op::sum>(k::supports_sum, k::sum);
  r.add<kernel_op::pad_fwd>(k::supports_pad, k::pad_fwd);
  r.add<kernel_op::pad_bwd>(k::supports_pad, k::pad_bwd);
  r.add<kernel_op::upsample_fwd>(k::supports_upsample, k::upsample_fwd);
  r.add<kernel_op::upsample_bwd>(k::supports_upsample, k::upsample_bwd);
}

}  // namespace kiln
