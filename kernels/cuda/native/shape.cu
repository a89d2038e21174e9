// kiln's own CUDA padding and upsampling. Forward: one thread per output element reading through
// pad_source_index / nearest_source_index / linear_tap. Backward inverts the 1-d index maps per
// input element instead of scattering: padding's maps have a closed-form preimage (a point, a
// reflection, a replicated edge range or a circular progression), verified against
// pad_source_index; upsampling's maps are monotone, so the preimage is a range found by binary
// search. Every candidate is checked against the forward rule, so both directions agree exactly.
//   emu test: ctest --test-dir build -R test_shape -L emu
#include "kernels/cuda/native/shape.h"

#include "kernels/cuda/launch.h"
#include "kernels/cuda/native/grid.h"

#include "kernels/common/error.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

using grid::blocks_for;
using grid::kThreads;

struct PadArgs {
  PadMode mode;
  int64_t planes, ih, iw, oh, ow, top, left;
};

PadArgs pad_args(const PadDesc& d) { return {d.mode, d.planes, d.ih, d.iw, d.oh, d.ow, d.top, d.left}; }

template <class T>
KILN_GLOBAL void pad_fwd_kernel(PadArgs a, T value, const T* src, T* dst) {
  const int64_t n = a.planes * a.oh * a.ow;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t x = i % a.ow, y = (i / a.ow) % a.oh, p = i / (a.ow * a.oh);
    const int64_t sy = pad_source_index(a.mode, y, a.top, a.ih, a.oh);
    const int64_t sx = pad_source_index(a.mode, x, a.left, a.iw, a.ow);
    dst[i] = (sy < 0 || sx < 0) ? value : src[(p * a.ih + sy) * a.iw + sx];
  }
}

// The output indices o with pad_source_index(o) == x, as an arithmetic progression
// [start, end) step `step` plus up to two extra points (reflect); callers verify each.
struct Preimage {
  int64_t start, end, step;
  int64_t extra[2];
  int nextra;
};

KILN_DEVICE inline Preimage pad_preimage(PadMode m, int64_t x, int64_t before, int64_t in, int64_t out) {
  Preimage r{before + x, before + x + 1, 1, {0, 0}, 0};
  switch (m) {
    case PadMode::constant: break;
    case PadMode::reflect: {
      const int64_t e0 = before - x, e1 = before + 2 * (in - 1) - x;
      if (e0 != r.start) r.extra[r.nextra++] = e0;
      if (e1 != r.start && e1 != e0) r.extra[r.nextra++] = e1;
      break;
    }
    case PadMode::replicate:
      r.start = x == 0 ? 0 : before + x;
      r.end = (x == in - 1 ? out - 1 : before + x) + 1;
      break;
    case PadMode::circular: {
      const int64_t after = out - in - before;
      const int64_t c0 = before < 0 ? -before : 0;
      const int64_t len = in - c0 - (after < 0 ? -after : 0);
      if (len <= 0) {
        r.end = r.start;
        break;
      }
      const int64_t q = ((before > 0 ? before : 0) + x - c0) % len;
      r.start = q < 0 ? q + len : q;
      r.end = out;
      r.step = len;
      break;
    }
  }
  if (r.start < 0) r.start += ((-r.start + r.step - 1) / r.step) * r.step;  // first member >= 0
  if (r.end > out) r.end = out;
  return r;
}

// Whether output index o reads input x (o may be out of range).
KILN_DEVICE inline bool pad_reads(PadMode m, int64_t o, int64_t x, int64_t before, int64_t in, int64_t out) {
  return o >= 0 && o < out && pad_source_index(m, o, before, in, out) == x;
}

template <class T>
KILN_DEVICE inline T pad_row_sum(const PadArgs& a, const Preimage& px, int64_t b, const T* row) {
  T acc = T(0);
  for (int64_t x = px.start; x < px.end; x += px.step)
    if (pad_reads(a.mode, x, b, a.left, a.iw, a.ow)) acc += row[x];
  for (int e = 0; e < px.nextra; ++e)
    if (pad_reads(a.mode, px.extra[e], b, a.left, a.iw, a.ow)) acc += row[px.extra[e]];
  return acc;
}

template <class T>
KILN_GLOBAL void pad_bwd_kernel(PadArgs a, const T* diff_dst, T* diff_src) {
  const int64_t n = a.planes * a.ih * a.iw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i % a.iw, c = (i / a.iw) % a.ih, p = i / (a.iw * a.ih);
    const Preimage py = pad_preimage(a.mode, c, a.top, a.ih, a.oh);
    const Preimage px = pad_preimage(a.mode, b, a.left, a.iw, a.ow);
    const T* plane = diff_dst + p * a.oh * a.ow;
    T acc = T(0);
    for (int64_t y = py.start; y < py.end; y += py.step)
      if (pad_reads(a.mode, y, c, a.top, a.ih, a.oh)) acc += pad_row_sum(a, px, b, plane + y * a.ow);
    for (int e = 0; e < py.nextra; ++e)
      if (pad_reads(a.mode, py.extra[e], c, a.top, a.ih, a.oh)) acc += pad_row_sum(a, px, b, plane + py.extra[e] * a.ow);
    diff_src[i] = acc;
  }
}

struct UpArgs {
  bool bilinear, align_corners;
  int64_t planes, ih, iw, oh, ow;
  double scale_h, scale_w;
};

UpArgs up_args(const UpsampleDesc& d) {
  return {d.mode == UpsampleMode::bilinear, d.align_corners, d.planes(), d.ih, d.iw, d.oh, d.ow, d.scale_h, d.scale_w};
}

template <class T>
KILN_GLOBAL void upsample_fwd_kernel(UpArgs a, const T* src, T* dst) {
  const int64_t n = a.planes * a.oh * a.ow;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t x = i % a.ow, y = (i / a.ow) % a.oh, p = i / (a.ow * a.oh);
    const T* s = src + p * a.ih * a.iw;
    if (!a.bilinear) {
      dst[i] = s[nearest_source_index(y, a.ih, a.oh, a.scale_h) * a.iw + nearest_source_index(x, a.iw, a.ow, a.scale_w)];
    } else {  // the reference's association order, so float results match it closely
      const LinearTap<T> ty = linear_tap<T>(y, a.ih, a.oh, a.align_corners, a.scale_h);
      const LinearTap<T> tx = linear_tap<T>(x, a.iw, a.ow, a.align_corners, a.scale_w);
      dst[i] = ty.l0 * (tx.l0 * s[ty.i0 * a.iw + tx.i0] + tx.l1 * s[ty.i0 * a.iw + tx.i1]) +
               ty.l1 * (tx.l0 * s[ty.i1 * a.iw + tx.i0] + tx.l1 * s[ty.i1 * a.iw + tx.i1]);
    }
  }
}

// First output index o in [0, out) whose source index (i0 for bilinear) is >= v, else out. The
// maps are non-decreasing in o (a monotone float expression, floored and clamped).
template <class T>
KILN_DEVICE inline int64_t first_reading(bool bilinear, int64_t v, int64_t in, int64_t out, bool align, double scale) {
  int64_t lo = 0, hi = out;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const int64_t s = bilinear ? linear_tap<T>(mid, in, out, align, scale).i0 : nearest_source_index(mid, in, out, scale);
    if (s >= v) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// Weight with which output o reads input v along one dim (0 when it does not).
template <class T>
KILN_DEVICE inline T up_weight(bool bilinear, int64_t o, int64_t v, int64_t in, int64_t out, bool align, double scale) {
  if (!bilinear) return nearest_source_index(o, in, out, scale) == v ? T(1) : T(0);
  const LinearTap<T> t = linear_tap<T>(o, in, out, align, scale);
  return (t.i0 == v ? t.l0 : T(0)) + (t.i1 == v ? t.l1 : T(0));
}

template <class T>
KILN_GLOBAL void upsample_bwd_kernel(UpArgs a, const T* diff_dst, T* diff_src) {
  const int64_t n = a.planes * a.ih * a.iw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i % a.iw, c = (i / a.iw) % a.ih, p = i / (a.iw * a.ih);
    // Outputs reading input row c: source (i0) in {c} for nearest, {c - 1, c} for bilinear.
    const int64_t lo_back = a.bilinear ? 1 : 0;
    const int64_t y0 = first_reading<T>(a.bilinear, c - lo_back, a.ih, a.oh, a.align_corners, a.scale_h);
    const int64_t y1 = first_reading<T>(a.bilinear, c + 1, a.ih, a.oh, a.align_corners, a.scale_h);
    const int64_t x0 = first_reading<T>(a.bilinear, b - lo_back, a.iw, a.ow, a.align_corners, a.scale_w);
    const int64_t x1 = first_reading<T>(a.bilinear, b + 1, a.iw, a.ow, a.align_corners, a.scale_w);
    const T* plane = diff_dst + p * a.oh * a.ow;
    T acc = T(0);
    for (int64_t y = y0; y < y1; ++y) {
      const T wy = up_weight<T>(a.bilinear, y, c, a.ih, a.oh, a.align_corners, a.scale_h);
      if (wy == T(0)) continue;
      for (int64_t x = x0; x < x1; ++x) {
        const T wx = up_weight<T>(a.bilinear, x, b, a.iw, a.ow, a.align_corners, a.scale_w);
        if (wx != T(0)) acc += wy * wx * plane[y * a.ow + x];
      }
    }
    diff_src[i] = acc;
  }
}

void check_float(DType t, const char* what) {
  KILN_CHECK(t == DType::float32 || t == DType::float64, "cuda native ", what, ": float32 or float64 only, got ", t);
}

template <class F>
void with_float(DType t, F&& f) {
  if (t == DType::float64) f(double{});
  else f(float{});
}

}  // namespace

bool supports_pad(const PadDesc& d) { return d.dtype == DType::float32 || d.dtype == DType::float64; }
bool supports_upsample(const UpsampleDesc& d) { return d.dtype == DType::float32 || d.dtype == DType::float64; }

void pad_fwd(const PadDesc& d, const void* src, void* dst) {
  check_float(d.dtype, "pad_fwd");
  const int64_t n = d.planes * d.oh * d.ow;
  if (n == 0) return;
  with_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH(pad_fwd_kernel<T>, dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), pad_args(d), T(d.value),
                static_cast<const T*>(src), static_cast<T*>(dst));
  });
}

void pad_bwd(const PadDesc& d, const void* diff_dst, void* diff_src) {
  check_float(d.dtype, "pad_bwd");
  const int64_t n = d.planes * d.ih * d.iw;
  if (n == 0) return;
  with_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH(pad_bwd_kernel<T>, dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), pad_args(d),
                static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}

void upsample_fwd(const UpsampleDesc& d, const void* src, void* dst) {
  check_float(d.dtype, "upsample_fwd");
  const int64_t n = d.planes() * d.oh * d.ow;
  if (n == 0) return;
  with_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH(upsample_fwd_kernel<T>, dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), up_args(d),
                static_cast<const T*>(src), static_cast<T*>(dst));
  });
}

void upsample_bwd(const UpsampleDesc& d, const void* diff_dst, void* diff_src) {
  check_float(d.dtype, "upsample_bwd");
  const int64_t n = d.planes() * d.ih * d.iw;
  if (n == 0) return;
  with_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH(upsample_bwd_kernel<T>, dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), up_args(d),
                static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}

KILN_CUDA_NAMESPACE_END
