// The `onednn` backend on the CPU: oneDNN primitives, cached by shape (kernels/cpu/onednn).
// Its candidates default to priority::secondary (`auto` takes native first, and oneDNN only
// where native says no); each one raised above native says why, with the figures.
// Figures: build/bench/bench_backends (interleaved, medians).
#include "engine/dispatch.h"

#ifdef KILN_HAVE_ONEDNN

#include "kernels/cpu/onednn/concat.h"
#include "kernels/cpu/onednn/conv.h"
#include "kernels/cpu/onednn/elementwise.h"
#include "kernels/cpu/onednn/gemm.h"
#include "kernels/cpu/onednn/linear.h"
#include "kernels/cpu/onednn/matmul.h"
#include "kernels/cpu/onednn/norm.h"
#include "kernels/cpu/onednn/pool.h"
#include "kernels/cpu/onednn/rnn.h"

namespace kiln {
namespace {

namespace k = onednn;

// Every figure below was measured on x86-64, where oneDNN runs its JIT kernels. On POWER its
// float32 primitives are reference code, and on ARM64 they are unmeasured: there oneDNN ranks
// after native everywhere, and kiln's own kernels are the `auto` choice.
#if defined(__x86_64__)
constexpr int kPreferred = priority::preferred;
#else
constexpr int kPreferred = priority::secondary;
#endif

// Channels-last backward-weights has no reorders on oneDNN and beats the native GEMM rows
// (mnist-cnn conv2 23.7 vs 37.9 ms per step at batch 128; ResNet-50 train 1.88 vs 2.15 s at batch
// 16). NCHW depthwise on small planes too: native's direct kernel sums rows of 7-14 elements,
// oneDNN vectorises over blocked channels (oneDNN 2.4x native at 14x14, 4.2x at 7x7; native
// 1.2-1.3x oneDNN at 28x28 and 112x112; bench_backends --threads 1 --cpu-time, MobileNet-v2
// shapes, batch 16). Elsewhere (NCHW) the reorders of src and diff_dst make ResNet-50 ~7% slower
// on oneDNN (AlexNet 1.1-1.6x faster): native first.
int conv_bwd_weights_priority(const ConvDesc& d) {
  const bool small_depthwise = d.groups > 1 && d.groups == d.C && d.P * d.Q < 28 * 28;
  return d.nhwc || small_depthwise ? kPreferred : priority::secondary;
}

// oneDNN first for an inference forward over many rows (steps x batch): it reorders the weights
// on every call, which many rows amortise. kiln bench, forward medians, AMD EPYC Zen 4, 2 threads,
// oneDNN against native: lstm-h1024-t25 batch 128 (3200 rows) 270 / 338 ms, gru-h512-t1500
// batch 32 (48000) 783 / 1204 ms; lstm-h1536-t50 batch 4 (200) 178 / 89 ms, lstm-forecast batch
// 64 (384, hidden 64) 0.46 / 0.21 ms. Training: native first (lstm-h1024-t25 batch 128, a step
// 800 against oneDNN's 958 ms), so the training forward and its backward stay together there.
int rnn_priority(const RnnDesc& d) {
  return !d.training && d.T * d.N >= 1024 ? kPreferred : priority::secondary;
}

}  // namespace

void register_cpu_onednn(BackendRegistrar& r) {
  // Forward and backward-data: 1.1-2.3x native on AlexNet and on ResNet-50's 3x3 layers, ~1.14x
  // over ResNet-50 as a whole even with the per-call reorders (its 1x1 layers at 56x56/28x28
  // lose 10-35% to them). With a payload: the backward primitives travel from forward to backward.
  using FwdP = kernel_op::conv2d_fwd::PayloadKernel;
  using DataP = kernel_op::conv2d_bwd_data::PayloadKernel;
  using WeiP = kernel_op::conv2d_bwd_weights::PayloadKernel;
  r.add<kernel_op::conv2d_fwd>(k::supports_conv_fwd, FwdP(k::conv2d_fwd), kPreferred);
  r.add<kernel_op::conv2d_bwd_data>(k::supports_conv_bwd_data, DataP(k::conv2d_bwd_data), kPreferred);
  r.add<kernel_op::conv2d_bwd_weights>(k::supports_conv_bwd_weights, WeiP(k::conv2d_bwd_weights), conv_bwd_weights_priority);

  // Average pooling 1.4-2.4x native; oneDNN says no to max pooling (PyTorch's indices), which
  // stays native. LRN: oneDNN ~0.95x native forward, 0.06x backward.
  r.add<kernel_op::pool_fwd>(k::supports_pool_fwd, k::pool_fwd, kPreferred);
  r.add<kernel_op::pool_bwd>(k::supports_pool_bwd, k::pool_bwd, kPreferred);
  r.add<kernel_op::lrn_fwd>(k::supports_lrn, k::lrn_fwd);
  r.add<kernel_op::lrn_bwd>(k::supports_lrn, k::lrn_bwd);

  // Softmax forward 4.5-5.7x native over 1000-21841 classes; backward 0.6-0.95x. Batch norm
  // 0.3-0.67x native on plain NCHW.
  r.add<kernel_op::softmax_fwd>(k::supports_softmax, k::softmax_fwd, kPreferred);
  r.add<kernel_op::softmax_bwd>(k::supports_softmax, k::softmax_bwd);
  r.add<kernel_op::batch_norm_fwd>(k::supports_batch_norm, k::batch_norm_fwd);
  r.add<kernel_op::batch_norm_bwd>(k::supports_batch_norm, k::batch_norm_bwd);

  r.add<kernel_op::unary>(k::supports_unary, k::unary);
  r.add<kernel_op::binary>(k::supports_binary, k::binary);

  // Batched products: one matmul primitive, 0.9-1.16x dnnl_sgemm per product and 0.83-1.15x
  // native (bench_backends --only matmul, medians of 9, interleaved): native stays first (within
  // noise, and its bits do not depend on the thread count). Two candidates: matmul takes the
  // batched and strided products, sgemm the plain ones.
  r.add<kernel_op::gemm>(k::supports_matmul, k::matmul);
  r.add<kernel_op::gemm>(k::supports_gemm, k::gemm);

  // Inner product on plain nc/oi layouts, as a fraction of native's speed at the AlexNet/VGG/
  // GoogLeNet classifier shapes, batch 16 and 64 (bench_backends --only linear): 2 threads:
  // forward 0.57-0.89, backward-data 0.76-1.33, backward-weights 0.51-1.16; 1 thread, CPU time:
  // forward 0.72-1.04, backward-data 0.82-1.34, backward-weights 0.57-1.16.
  r.add<kernel_op::linear_fwd>(k::supports_linear, k::linear_fwd);
  r.add<kernel_op::linear_bwd_data>(k::supports_linear, k::linear_bwd_data);
  r.add<kernel_op::linear_bwd_weights>(k::supports_linear, k::linear_bwd_weights);

  // concat 0.94-1.05x native on GoogLeNet's inception outputs (both ~29 GB/s, the copy
  // bandwidth), sum 0.68-0.93x (bench_backends --only concat --threads 1, batch 16).
  r.add<kernel_op::concat>(k::supports_concat, k::concat);
  r.add<kernel_op::sum>(k::supports_sum, k::sum);

  // Recurrent layers without per-sequence lengths or a projection (oneDNN has neither): the
  // forward's workspace travels to the backward in the payload. See rnn_priority. bfloat16 layers
  // (CPUs with AVX512_BF16) have no other candidate: the engine runs them here or in float32.
  r.add<kernel_op::rnn_fwd>(k::supports_rnn, kernel_op::rnn_fwd::PayloadKernel(k::rnn_fwd), rnn_priority);
  r.add<kernel_op::rnn_bwd>(k::supports_rnn, kernel_op::rnn_bwd::PayloadKernel(k::rnn_bwd), rnn_priority);
}

}  // namespace kiln

#endif  // KILN_HAVE_ONEDNN
