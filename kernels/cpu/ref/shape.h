// Reference padding and upsampling kernels: one loop over every output element, reading (forward)
// or scattering into (backward) the input through the shared index rules of
// kernels/common/shape.h. Templated so the tests run them in double.
//   tests: ctest --test-dir build -R shape
#pragma once

#include <cstring>

#include "kernels/common/shape.h"

namespace kiln::ref {

template <class T>
void pad_fwd(const PadDesc& d, const T* src, T* dst) {
  for (int64_t p = 0; p < d.planes; ++p)
    for (int64_t y = 0; y < d.oh; ++y)
      for (int64_t x = 0; x < d.ow; ++x) {
        const int64_t sy = pad_source_index(d.mode, y, d.top, d.ih, d.oh);
        const int64_t sx = pad_source_index(d.mode, x, d.left, d.iw, d.ow);
        dst[(p * d.oh + y) * d.ow + x] = (sy < 0 || sx < 0) ? T(d.value) : src[(p * d.ih + sy) * d.iw + sx];
      }
}

template <class T>
void pad_bwd(const PadDesc& d, const T* diff_dst, T* diff_src) {
  std::memset(static_cast<void*>(diff_src), 0, sizeof(T) * size_t(d.planes * d.ih * d.iw));
  for (int64_t p = 0; p < d.planes; ++p)
    for (int64_t y = 0; y < d.oh; ++y)
      for (int64_t x = 0; x < d.ow; ++x) {
        const int64_t sy = pad_source_index(d.mode, y, d.top, d.ih, d.oh);
        const int64_t sx = pad_source_index(d.mode, x, d.left, d.iw, d.ow);
        if (sy >= 0 && sx >= 0) diff_src[(p * d.ih + sy) * d.iw + sx] += diff_dst[(p * d.oh + y) * d.ow + x];
      }
}

template <class T>
void upsample_fwd(const UpsampleDesc& d, const T* src, T* dst) {
  for (int64_t p = 0; p < d.planes(); ++p) {
    const T* s = src + p * d.ih * d.iw;
    for (int64_t y = 0; y < d.oh; ++y)
      for (int64_t x = 0; x < d.ow; ++x) {
        T& out = dst[(p * d.oh + y) * d.ow + x];
        if (d.mode == UpsampleMode::nearest) {
          const int64_t sy = nearest_source_index(y, d.ih, d.oh, d.scale_h);
          const int64_t sx = nearest_source_index(x, d.iw, d.ow, d.scale_w);
          out = s[sy * d.iw + sx];
        } else {
          const LinearTap<T> ty = linear_tap<T>(y, d.ih, d.oh, d.align_corners, d.scale_h);
          const LinearTap<T> tx = linear_tap<T>(x, d.iw, d.ow, d.align_corners, d.scale_w);
          out = ty.l0 * (tx.l0 * s[ty.i0 * d.iw + tx.i0] + tx.l1 * s[ty.i0 * d.iw + tx.i1]) +
                ty.l1 * (tx.l0 * s[ty.i1 * d.iw + tx.i0] + tx.l1 * s[ty.i1 * d.iw + tx.i1]);
        }
      }
  }
}

template <class T>
void upsample_bwd(const UpsampleDesc& d, const T* diff_dst, T* diff_src) {
  std::memset(static_cast<void*>(diff_src), 0, sizeof(T) * size_t(d.planes() * d.ih * d.iw));
  for (int64_t p = 0; p < d.planes(); ++p) {
    T* ds = diff_src + p * d.ih * d.iw;
    for (int64_t y = 0; y < d.oh; ++y)
      for (int64_t x = 0; x < d.ow; ++x) {
        const T g = diff_dst[(p * d.oh + y) * d.ow + x];
        if (d.mode == UpsampleMode::nearest) {
          const int64_t sy = nearest_source_index(y, d.ih, d.oh, d.scale_h);
          const int64_t sx = nearest_source_index(x, d.iw, d.ow, d.scale_w);
          ds[sy * d.iw + sx] += g;
        } else {
          const LinearTap<T> ty = linear_tap<T>(y, d.ih, d.oh, d.align_corners, d.scale_h);
          const LinearTap<T> tx = linear_tap<T>(x, d.iw, d.ow, d.align_corners, d.scale_w);
          ds[ty.i0 * d.iw + tx.i0] += ty.l0 * tx.l0 * g;
          ds[ty.i0 * d.iw + tx.i1] += ty.l0 * tx.l1 * g;
          ds[ty.i1 * d.iw + tx.i0] += ty.l1 * tx.l0 * g;
          ds[ty.i1 * d.iw + tx.i1] += ty.l1 * tx.l1 * g;
        }
      }
  }
}

}  // namespace kiln::ref
