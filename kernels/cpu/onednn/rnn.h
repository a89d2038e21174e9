// oneDNN's RNN primitives on kiln's RnnDesc (kernels/common/rnn.h): vanilla RNN (tanh, relu),
// LSTM and the linear-before-reset GRU, which is PyTorch's GRU; forward (training or inference)
// and backward, one layer in one direction (left-to-right or right-to-left), same signatures as
// kernels/cpu/native/rnn.h. float32, and bfloat16 where the CPU has AVX512_BF16 (oneDNN's
// effective ISA: rnn_bf16_unavailable()): src, dst, h0, hn, the weights and every gradient in
// the caller's bfloat16 buffers; inside, bfloat16 layer data, hidden state and weights with a
// float32 bias and a float32 LSTM cell state (c0 and cn converted at the boundary, the cell state
// the backward reads kept in float32), float32 gates, and float32 gradients (oneDNN's only type
// for them: each converted in, accumulated in float32, rounded once out). kiln's weights are
// PyTorch's [G*H, in] matrices, which are oneDNN's ldgoi layout (reordered to what the primitive
// picks); the GRU's gates go from PyTorch's order r z n to oneDNN's u r o, and the two bias
// vectors become oneDNN's one (the LBR GRU keeps b_hn as its fourth). The forward keeps the
// workspace and its outputs in the payload; a backward without them runs the training forward
// first. oneDNN has
// no per-sequence lengths and kiln does not map LSTM projections yet: supports() says no to both
// (kiln's own kernels take them).
//   Test: ctest --test-dir build -R 'oracle|test_onednn|test_rnn_layers'
#pragma once

#include <cstdint>

#include "kernels/common/payload.h"
#include "kernels/common/rnn.h"

namespace kiln::onednn {

bool supports_rnn(const RnnDesc& d);
// Null when oneDNN runs bfloat16 recurrent layers natively here, else why not (supports_rnn then
// declines bfloat16 and the engine runs those layers in float32).
const char* rnn_bf16_unavailable();
void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, void* dst, void* hn, void* cn);
void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void* diff_w_hr);

}  // namespace kiln::onednn
