// kiln's own CPU 2-d convolution, float32: im2col / col2im around native::sgemm, one image and
// group at a time. 1x1 stride-1 unpadded convolutions skip im2col (the input already is the
// column matrix). Layouts and semantics as in kernels/common/conv.h; all buffers contiguous.
//
// Threads: with enough (image, group) work items for the team, items are split across threads,
// each with its own 64-byte aligned column buffer (allocated once per call) and a single-threaded
// sgemm; otherwise items run one after another and sgemm and im2col use the whole team. Never a
// nested parallel region. Backward-weights sums per-thread partial gradients in a fixed order, so
// results are bitwise reproducible for a given thread count.
//   Test: ctest --test-dir build -R conv      Bench: build/bench/bench_conv
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/conv.h"

namespace kiln::native {

bool supports_conv(const ConvDesc& d);  // float32 only (float64 runs on ref)
void conv2d_fwd(const ConvDesc& d, const void* src, const void* wei, const void* bias, void* dst);
void conv2d_bwd_data(const ConvDesc& d, const void* diff_dst, const void* wei, void* diff_src);
// diff_wei or diff_bias may be null (not wanted).
void conv2d_bwd_weights(const ConvDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias);

// Channels-last (d.nhwc) paths, conv_nhwc.cpp: pixels as GEMM rows, groups == 1. The entry
// points above call them when d.nhwc.
bool supports_conv_nhwc(const ConvDesc& d);
// With accumulate the result is added to what dst holds (the residual post-op, d.sum).
void conv2d_fwd_nhwc(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst,
                     bool accumulate = false);
void conv2d_bwd_data_nhwc(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src);
void conv2d_bwd_weights_nhwc(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei,
                             float* diff_bias);

// Direct channels-last convolution, conv_direct.cpp (float32, groups == 1, no im2col): forward,
// backward-data and backward-weights for every shape but the 1x1 stride-1 unpadded one (a plain
// GEMM); backward-data at a stride needs no dilation along the strided axis. The forward applies
// d.relu and, with accumulate (d.sum), adds what dst holds. The entry points above take it first
// where it applies. Path: avx512 or avx2 as the CPU has them; "off" (or
// KILN_CONV_DIRECT=off) sends these convolutions down the im2col path, to compare the two.
bool conv_direct_fwd_applies(const ConvDesc& d);
bool conv_direct_bwd_data_applies(const ConvDesc& d);
void conv2d_fwd_direct(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst,
                       bool accumulate);
void conv2d_bwd_data_direct(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src);
// Where conv_direct_fwd_applies; the bias gradient is the caller's.
void conv2d_bwd_weights_direct(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei);
// The direct path in use (avx512, avx2 or off); set_conv_direct_path takes those or "auto" and
// throws kiln::Error on an unknown or unavailable one. Process-wide, for tests and benchmarks.
const char* conv_direct_path();
bool conv_direct_path_available(const std::string& name);
void set_conv_direct_path(const std::string& name);
// bfloat16 (AVX512_BF16 CPUs, the avx512 path): forward and backward-data on the vdpbf16ps tile
// (an odd C runs as C + 1 channels; backward-data needs K even), float32 sums rounded once;
// backward-weights on the float32 tiles, its operands widened as they are read (taken for fewer
// than 16 input channels only: the bfloat16 GEMM of conv_bf16.cpp is faster beyond). Operands as ConvDesc says for bfloat16 (bias float32).
bool conv_direct_bf16_applies(const ConvDesc& d);
bool conv_direct_bwd_data_bf16_applies(const ConvDesc& d);
void conv2d_fwd_direct_bf16(const ConvDesc& d, const uint16_t* src, const uint16_t* wei, const float* bias,
                            uint16_t* dst, bool accumulate);
void conv2d_bwd_data_direct_bf16(const ConvDesc& d, const uint16_t* diff_dst, const uint16_t* wei,
                                 uint16_t* diff_src);
// The float32 tiles on bfloat16 read widened; diff_wei rounded once; diff_bias (float32, may be
// null, as may diff_wei) summed in double.
void conv2d_bwd_weights_direct_bf16(const ConvDesc& d, const uint16_t* src, const uint16_t* diff_dst,
                                    uint16_t* diff_wei, float* diff_bias);
// Its blocking (conv_direct.cpp says what each size does): for tests, which force every case
// (windows per item, channel chunks, several images per item) on small shapes.
struct ConvDirectTuning {
  int64_t batch_bytes, panel_bytes, item_pixels;
};
ConvDirectTuning conv_direct_tuning();
void set_conv_direct_tuning(const ConvDirectTuning& t);
void reset_conv_direct_tuning();

// Depthwise (groups == C > 1, K a multiple of C), conv_depthwise.cpp: direct loops, NCHW and
// NHWC, no im2col. The entry points above call them first when is_depthwise(d) (which
// KILN_CONV_DEPTHWISE=0 turns off, for comparisons: NHWC depthwise then is not supported).
bool is_depthwise(const ConvDesc& d);
void conv2d_fwd_depthwise(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst);
void conv2d_bwd_data_depthwise(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src);
void conv2d_bwd_weights_depthwise(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei,
                                  float* diff_bias);
// The build of the depthwise loops in use: avx512, avx2, sve or baseline (kernel_paths() picks;
// "auto" restores that). Available: the CPU has the ISA and this build targets its architecture.
// Process-wide, for tests; throws kiln::Error on an unavailable or unknown name.
const char* conv_depthwise_path();
bool conv_depthwise_path_available(const std::string& name);
void set_conv_depthwise_path(const std::string& name);

}  // namespace kiln::native
