// The `cudnn` backend on CUDA devices: cuDNN and cuBLAS (kernels/cuda/cudnn). Its candidates
// come first in `auto` (priority::preferred) where they say yes; kiln's own CUDA kernels take
// the rest. The inner product is the gemm composite (engine/ops/linear_gemm.h), on cuBLAS under
// a strict "cudnn" preference. cuDNN cannot be emulated: tools/gpu-check runs this on a GPU.
#include "engine/dispatch.h"

#ifdef KILN_HAVE_CUDNN

#include "engine/ops/linear_gemm.h"
#include "kernels/cuda/cudnn/activation.h"
#include "kernels/cuda/cudnn/conv.h"
#include "kernels/cuda/cudnn/gemm.h"
#include "kernels/cuda/cudnn/norm.h"
#include "kernels/cuda/cudnn/pool.h"
#include "kernels/cuda/cudnn/rnn.h"

namespace kiln {

void register_cuda_cudnn(BackendRegistrar& r) {
  namespace k = cudnn;
  r.add<kernel_op::conv2d_fwd>(k::supports_conv_fwd, k::conv2d_fwd);
  r.add<kernel_op::conv2d_bwd_data>(k::supports_conv_bwd_data, k::conv2d_bwd_data);
  r.add<kernel_op::conv2d_bwd_weights>(k::supports_conv_bwd_weights, k::conv2d_bwd_weights);
  r.add<kernel_op::unary>(k::supports_unary, k::unary);
  r.add<kernel_op::binary>(k::supports_binary, k::binary);
  r.add<kernel_op::gemm>(k::supports_gemm, k::gemm);
  r.add<kernel_op::linear_fwd>(linear_gemm_supported, linear_gemm_fwd);
  r.add<kernel_op::linear_bwd_data>(linear_gemm_supported, linear_gemm_bwd_data);
  r.add<kernel_op::linear_bwd_weights>(linear_gemm_supported, linear_gemm_bwd_weights);
  r.add<kernel_op::batch_norm_fwd>(k::supports_batch_norm_fwd, k::batch_norm_fwd);
  r.add<kernel_op::batch_norm_bwd>(k::supports_batch_norm_bwd, k::batch_norm_bwd);
  r.add<kernel_op::softmax_fwd>(k::supports_softmax, k::softmax_fwd);
  r.add<kernel_op::softmax_bwd>(k::supports_softmax, k::softmax_bwd);
  r.add<kernel_op::pool_fwd>(k::supports_pool, k::pool_fwd);
  r.add<kernel_op::pool_bwd>(k::supports_pool, k::pool_bwd);
  r.add<kernel_op::lrn_fwd>(k::supports_lrn, k::lrn_fwd);
  r.add<kernel_op::lrn_bwd>(k::supports_lrn, k::lrn_bwd);
  r.add<kernel_op::rnn_fwd>(k::supports_rnn, kernel_op::rnn_fwd::PayloadKernel(k::rnn_fwd));
  r.add<kernel_op::rnn_bwd>(k::supports_rnn, kernel_op::rnn_bwd::PayloadKernel(k::rnn_bwd));
}

}  // namespace kiln

#endif  // KILN_HAVE_CUDNN
