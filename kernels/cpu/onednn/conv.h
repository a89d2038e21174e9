// oneDNN 2-d convolution: forward (bias, groups, dilation), backward-data and backward-weights
// (+ bias gradient), same signatures and semantics as kernels/cpu/native/conv.h on the same
// ConvDesc (NCHW src/dst, [K, C/groups, R, S] weights, all contiguous float32). oneDNN picks its
// layouts (format_tag::any; blocked nChw16c / OIhw16i16o on AVX-512) and every call reorders
// src, weights and dst between them and kiln's plain buffers (weights too: nothing is cached per
// weight tensor yet). Backward primitives take the forward primitive descriptor as their hint.
// supports_*() build (and cache) the primitive and say no when oneDNN cannot express the
// descriptor (float64, a bottom/right padding below what oneDNN accepts).
//   Test: ctest --test-dir build -R test_onednn     Bench: build/bench/bench_backends
#pragma once

#include "kernels/common/conv.h"
#include "kernels/common/payload.h"

namespace kiln::onednn {

bool supports_conv_fwd(const ConvDesc& d);
bool supports_conv_bwd_data(const ConvDesc& d);
bool supports_conv_bwd_weights(const ConvDesc& d);
void conv2d_fwd(const ConvDesc& d, const void* src, const void* wei, const void* bias, void* dst);
void conv2d_bwd_data(const ConvDesc& d, const void* diff_dst, const void* wei, void* diff_src);
// diff_wei or diff_bias may be null (not wanted).
void conv2d_bwd_weights(const ConvDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias);

// The same with a payload (engine/op_decl.h): a training forward puts the backward primitives
// of its problem in it, and the backward calls of that node use them without a cache lookup.
void conv2d_fwd(const ConvDesc& d, KernelPayload& payload, const void* src, const void* wei, const void* bias,
                void* dst);
void conv2d_bwd_data(const ConvDesc& d, KernelPayload& payload, const void* diff_dst, const void* wei,
                     void* diff_src);
void conv2d_bwd_weights(const ConvDesc& d, KernelPayload& payload, const void* src, const void* diff_dst,
                        void* diff_wei, void* diff_bias);

}  // namespace kiln::onednn
