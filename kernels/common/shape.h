// Descriptors for padding and 2-d upsampling of contiguous planes, and the source-index rules
// every implementation shares (PyTorch's: reflect/replicate/circular index maps, nearest
// floor(dst * scale) computed in float, bilinear area-pixel source index with and without
// align_corners). cat and split need no kernel of their own: they are strided copies and views.
//   tests: ctest --test-dir build -R shape
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

#include "kernels/common/host_device.h"

namespace kiln {

enum class PadMode : uint8_t { constant, reflect, replicate, circular };
const char* pad_mode_name(PadMode m);

// [planes, ih, iw] -> [planes, oh, ow]; output (y, x) reads input (y - top, x - left) mapped
// by the mode. Negative top/left crop. A 1-d pad is ih = oh = 1, top = 0.
struct PadDesc {
  PadMode mode = PadMode::constant;
  DType dtype = DType::float32;
  int64_t planes = 1, ih = 1, iw = 1, oh = 1, ow = 1;
  int64_t top = 0, left = 0;
  double value = 0;  // constant mode
  std::string str() const;
};

// Input index read by output index `o` (of `out`) along one dim of size `in` padded by `before`
// (and out - in - before after), or -1 (constant mode, outside the input). Negative pads crop.
// reflect and replicate index the whole input (PyTorch's kernels); circular wraps within the
// cropped input, as PyTorch's crop-then-wrap does. The op checks reflect pads < in and circular
// pads <= the cropped size.
KILN_HOST_DEVICE inline int64_t pad_source_index(PadMode m, int64_t o, int64_t before, int64_t in, int64_t out) {
  int64_t x = o - before;
  switch (m) {
    case PadMode::constant: return (x >= 0 && x < in) ? x : -1;
    case PadMode::reflect:
      if (x < 0) x = -x;
      if (x >= in) x = 2 * (in - 1) - x;
      return x;
    case PadMode::replicate: return x < 0 ? 0 : (x >= in ? in - 1 : x);
    case PadMode::circular: {
      const int64_t after = out - in - before;
      const int64_t c0 = before < 0 ? -before : 0;
      const int64_t len = in - c0 - (after < 0 ? -after : 0);
      const int64_t q = (o - (before > 0 ? before : 0)) % len;
      return c0 + (q < 0 ? q + len : q);
    }
  }
  return -1;
}

enum class UpsampleMode : uint8_t { nearest, bilinear };

// [n*c planes, ih, iw] -> [n*c, oh, ow]. scale_h/scale_w: the user's scale factors (0: none);
// PyTorch uses 1/scale rather than in/out for the source index when one was given.
struct UpsampleDesc {
  UpsampleMode mode = UpsampleMode::nearest;
  DType dtype = DType::float32;
  int64_t n = 1, c = 1, ih = 1, iw = 1, oh = 1, ow = 1;
  bool align_corners = false;
  double scale_h = 0, scale_w = 0;
  int64_t planes() const { return n * c; }
  std::string str() const;
};

// Nearest: ATen's nearest_idx: identity when out == in, dst / 2 when out == 2 * in, else
// min(floor(dst * scale), in - 1) computed in float as PyTorch's CPU kernel does for float
// tensors (so float and double runs pick the same pixel). PyTorch 1.13's forward skips the
// shortcuts on some paths when a scale factor is given (its backward never does); kiln uses the
// one rule both ways so the gradient is the forward's true gradient.
KILN_HOST_DEVICE inline int64_t nearest_source_index(int64_t dst, int64_t in, int64_t out, double user_scale) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  const float scale = user_scale > 0 ? float(1.0 / user_scale) : float(in) / float(out);
  const int64_t s = int64_t(floorf(float(dst) * scale));
  return s < in - 1 ? s : in - 1;
}

// Bilinear taps along one dim: src = l0 * in[i0] + l1 * in[i1].
template <class T>
struct LinearTap {
  int64_t i0, i1;
  T l0, l1;
};

template <class T>
KILN_HOST_DEVICE inline LinearTap<T> linear_tap(int64_t dst, int64_t in, int64_t out, bool align_corners,
                                                double user_scale) {
  T scale;
  if (align_corners) scale = out > 1 ? T(in - 1) / T(out - 1) : T(0);
  else scale = user_scale > 0 ? T(1.0 / user_scale) : T(in) / T(out);
  T src = align_corners ? scale * T(dst) : scale * (T(dst) + T(0.5)) - T(0.5);
  if (src < T(0)) src = T(0);
  int64_t i0 = int64_t(std::floor(src));
  if (i0 > in - 1) i0 = in - 1;
  T l1 = src - T(i0);
  l1 = l1 < T(0) ? T(0) : (l1 > T(1) ? T(1) : l1);
  LinearTap<T> t;
  t.i0 = i0;
  t.i1 = i0 + (i0 < in - 1 ? 1 : 0);
  t.l1 = l1;
  t.l0 = T(1) - l1;
  return t;
}

}  // namespace kiln
