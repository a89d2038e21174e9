// cuDNN's recurrent layer (the v8 RNN API: cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8) behind kiln's one-layer, one-direction kernel ops
// (kernels/common/rnn.h): rnn_tanh, rnn_relu, lstm (with a projection) and gru, whose equations,
// gate orders and linear-before-reset GRU are cuDNN's own. float32, math without TF32 unless
// kiln::cudnn::allow_tf32(); float16 with float32 math precision and tensor-op math (states and
// weight gradients in float16, as cuDNN keeps them; bfloat16 layers run in float32 in the
// engine). Forward-in-time layers only: a cuDNN unidirectional layer cannot start each sequence
// at its own last step, so kiln's own CUDA kernels take `reverse` layers (float32: a half network
// with a reverse layer runs in float32).
// Device pointers, launched on kiln::cuda::current_stream(). With lengths the forward copies them
// to the host (one stream synchronisation): cuDNN's sequence descriptor wants them there.
// The forward leaves in the payload the packed weights, cuDNN's reserve space and its output for
// the backward; the backward consumes them (cuDNN's backward rewrites the reserve space), so a
// second backward on the same payload, an empty payload or another problem's recomputes the
// forward first. An inference descriptor (!training) keeps nothing and has no backward.
//   ctest -L gpu -R 'oracle_cuda|gpu.test_gpu_ops' (tests/oracle/problems_rnn.cpp, tests/gpu/test_gpu_ops.cpp)
#pragma once

#include <cstdint>

#include "kernels/common/payload.h"
#include "kernels/common/rnn.h"

namespace kiln::cudnn {

bool supports_rnn(const RnnDesc& d);
void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, void* dst, void* hn, void* cn);
void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void* diff_w_hr);

}  // namespace kiln::cudnn
