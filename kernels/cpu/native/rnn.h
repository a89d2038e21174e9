// kiln's own recurrent layer on the CPU (kernels/common/rnn.h): the time loop of
// kernels/common/rnn_driver.h on kiln's GEMM (kernels/cpu/native/gemm.h, its ISA picked at run
// time) with the gate arithmetic of a step fused into one pass, parallel over the batch and
// hidden units (rnn_gates.h: vectorised, ISA picked at run time). float32. A training forward
// leaves its gates and states in the payload for the backward; a backward without them recomputes
// the forward first. An inference forward (!training) keeps them in a per-thread buffer reused
// across calls (grown, never shrunk) and leaves the payload empty.
//   ctest --test-dir build -R 'oracle|rnn'     build/tools/kiln bench --model lstm-h1024-t25 --batch 128 --backend native
#pragma once

#include <cstdint>

#include "kernels/common/payload.h"
#include "kernels/common/rnn.h"

namespace kiln::native {

bool supports_rnn(const RnnDesc& d);
void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, void* dst, void* hn, void* cn);
void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void* diff_w_hr);

}  // namespace kiln::native
