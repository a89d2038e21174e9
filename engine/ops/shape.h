// Shape ops, differentiable: concatenation and splitting, padding, 2-d upsampling (NCHW).
// Semantics follow PyTorch (torch.cat/split/chunk/stack, F.pad, F.interpolate with mode
// "nearest" / "bilinear"). Inputs may be non-contiguous; float16/bfloat16 pad and upsample compute
// in float32.
//   tests: ctest --test-dir build -R shape
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "kernels/common/shape.h"  // PadMode, UpsampleMode

namespace kiln::ops {

// Joins tensors along `dim`; all other sizes, the dtype and the device must match.
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);

// Joins same-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
// Views of consecutive pieces of the given sizes along `dim` (sizes must sum to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// `chunks` views of ceil(size / chunks) along `dim` (the last one smaller; fewer pieces when
// the size does not need them all), like torch.chunk.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// pads = {left, right} (last dim) or {left, right, top, bottom} (last two dims), as F.pad.
// Negative pads crop. reflect needs each pad < the input size; circular wraps within the input
// left after cropping (PyTorch 2's crop-then-wrap) and needs each pad <= that size. `value` is
// for constant mode.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode = PadMode::constant, double value = 0);

// NCHW upsampling to an output size {oh, ow}, or by scale factors (output floor(in * scale); the
// source index then uses 1/scale as PyTorch's interpolate does).
Tensor upsample_nearest2d(const Tensor& x, std::array<int64_t, 2> size);
Tensor upsample_nearest2d(const Tensor& x, double scale_h, double scale_w);
Tensor upsample_bilinear2d(const Tensor& x, std::array<int64_t, 2> size, bool align_corners = false);
Tensor upsample_bilinear2d(const Tensor& x, double scale_h, double scale_w, bool align_corners = false);

}  // namespace kiln::ops
