// kiln's own recurrent layer on CUDA (kernels/common/rnn.h): the time loop of
// kernels/common/rnn_driver.h, as on the CPU, on kiln's CUDA GEMM with each step's gate
// arithmetic one kernel over [N, H]. float32. Same descriptor and signatures as
// kernels/cpu/native/rnn.h, DEVICE pointers, launched on current_stream(), never synchronising;
// the forward's saved gates and states stay in device memory in the payload.
// Test (emulated): ctest --test-dir build -R oracle_emu
#pragma once

#include <cstdint>

#include "kernels/common/payload.h"
#include "kernels/common/rnn.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_rnn(const RnnDesc& d);
void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, void* dst, void* hn, void* cn);
void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void* diff_w_hr);

KILN_CUDA_NAMESPACE_END
