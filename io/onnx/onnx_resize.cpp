// The ONNX importer's index-mapping ops (io/onnx/onnx_ops.h): Pad (attributes before opset 11,
// inputs after, axes from 18, wrap from 19), Slice (attributes before opset 10, inputs with steps
// after, negative steps included) and Resize / Upsample. Resize follows the ONNX reference
// (onnx/reference/ops/op_resize.py) axis by axis: each output position reads n input neighbours
// (clamped to the edge) with the reference's coefficients for nearest (four rounding modes),
// linear and cubic, antialias, exclude_outside, the seven coordinate transformations and
// tf_crop_and_resize's extrapolation value; gathers are slices and concatenation, so an input
// value reaches an output only where the reference reads it. Upsample and Resize-10 map input
// coordinates asymmetrically (x_out / scale), as onnxruntime does.
//   ctest --test-dir build -R onnx
#include <algorithm>
#include <cmath>

#include "engine/checked_size.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/shape.h"
#include "io/onnx/onnx_ops.h"

namespace kiln::onnx::detail {
namespace {

// Output sizes from the file (pads, resize sizes and scales) are bounded: beyond, the arithmetic
// would overflow and the allocation fail.
constexpr int64_t kMaxOut = int64_t(1) << 24;

void check_axes(const NodeCtx& c, std::vector<int64_t>& axes, int64_t r) {
  std::vector<bool> seen(size_t(r), false);
  for (int64_t& a : axes) {
    a = norm_axis(c, a, r, "axis");
    if (seen[size_t(a)]) c.refuse("axis ", a, " is given twice");
    seen[size_t(a)] = true;
  }
}

// ops::pad along one dim (moved last and back).
Tensor pad_dim(const Tensor& x, int64_t d, int64_t b, int64_t e, PadMode m, double v) {
  const int64_t last = x.dim() - 1;
  if (d == last) return ops::pad(x, {b, e}, m, v);
  return ops::pad(x.transpose(d, last), {b, e}, m, v).transpose(d, last).contiguous();
}

}  // namespace

OpFn pad_op(NodeCtx& c) {
  const std::string mode = c.s("mode", "constant");
  std::vector<int64_t> pads, axes;
  double value = 0;
  if (c.version < 11) {
    if (!c.has("pads")) c.refuse("attribute 'pads' is required");
    pads = c.ints("pads", {});
    value = c.f("value", 0.0);
  } else {
    pads = c.const_ints(1, "pads");
    if (c.has_input(2)) {
      const std::vector<float> v = c.const_floats(2, "constant_value");
      if (v.size() > 1) c.refuse("constant_value has ", v.size(), " values, expected one");
      if (!v.empty()) value = double(v[0]);
    }
    if (c.version >= 18 && c.has_input(3)) axes = c.const_ints(3, "axes");
  }
  const bool wrap_ok = c.version >= 19;
  if (mode != "constant" && mode != "reflect" && mode != "edge" && !(wrap_ok && mode == "wrap"))
    c.refuse("attribute 'mode' = '", mode, "' is not a mode of Pad-", c.version);
  if (pads.size() % 2 != 0) c.refuse("pads has an odd number of values (", pads.size(), ")");
  if (!axes.empty() && pads.size() != 2 * axes.size())
    c.refuse("pads has ", pads.size(), " values for ", axes.size(), " axes");
  for (int64_t p : pads) {
    if (p < 0 && mode != "constant") c.refuse("negative pads with mode ", mode, " are not implemented");
    if (p > kMaxOut || p < -kMaxOut) c.refuse("a pad of ", p, " is beyond kiln's bound ", kMaxOut);
  }
  const PadMode m = mode == "reflect" ? PadMode::reflect
                    : mode == "edge"  ? PadMode::replicate
                    : mode == "wrap"  ? PadMode::circular
                                      : PadMode::constant;
  return [&c, pads, axes, value, m, mode](const std::vector<Tensor>& in) {
    Tensor y = in[0];
    const int64_t r = y.dim();
    std::vector<int64_t> ax = axes;
    if (ax.empty())
      for (int64_t d = 0; d < r; ++d) ax.push_back(d);
    if (pads.size() != 2 * ax.size()) c.refuse("pads has ", pads.size(), " values for a ", r, "-d input");
    check_axes(c, ax, r);
    // The output's size, bounded before the first of the per-dim pads makes a partial result.
    Shape out_shape = y.sizes();
    for (size_t i = 0; i < ax.size(); ++i)
      out_shape[size_t(ax[i])] = std::max<int64_t>(0, out_shape[size_t(ax[i])] + pads[i] + pads[i + ax.size()]);
    check_tensor_bytes(out_shape, y.element_size(), c.where() + "the padded output");
    for (size_t i = 0; i < ax.size(); ++i) {
      const int64_t b = pads[i], e = pads[i + ax.size()], n = y.size(ax[i]);
      if (b == 0 && e == 0) continue;
      if (m == PadMode::reflect && (b >= n || e >= n))
        c.refuse("reflect pads ", b, ", ", e, " of a dim of ", n, " are not implemented (each must be < the size)");
      if (m == PadMode::circular && (b > n || e > n))
        c.refuse("wrap pads ", b, ", ", e, " of a dim of ", n, " are not implemented (each must be <= the size)");
      if (n + b + e < 0) c.refuse("pads ", b, ", ", e, " remove more than the ", n, " values of dim ", ax[i]);
      y = pad_dim(y, ax[i], b, e, m, value);
    }
    return y;
  };
}

OpFn slice_op(NodeCtx& c) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.version < 10) {
    if (!c.has("starts") || !c.has("ends")) c.refuse("attributes 'starts' and 'ends' are required");
    starts = c.ints("starts", {});
    ends = c.ints("ends", {});
    axes = c.ints("axes", {});
  } else {
    starts = c.const_ints(1, "starts");
    ends = c.const_ints(2, "ends");
    if (c.has_input(3)) axes = c.const_ints(3, "axes");
    if (c.has_input(4)) steps = c.const_ints(4, "steps");
  }
  if (ends.size() != starts.size()) c.refuse("starts has ", starts.size(), " values, ends ", ends.size());
  if (!axes.empty() && axes.size() != starts.size())
    c.refuse("axes has ", axes.size(), " values, starts ", starts.size());
  if (!steps.empty() && steps.size() != starts.size())
    c.refuse("steps has ", steps.size(), " values, starts ", starts.size());
  if (steps.empty()) steps.assign(starts.size(), 1);
  for (int64_t s : steps)
    if (s == 0) c.refuse("a step is 0");
  return [&c, starts, ends, axes, steps](const std::vector<Tensor>& in) {
    Tensor y = in[0];
    std::vector<int64_t> ax = axes;
    if (ax.empty())
      for (size_t i = 0; i < starts.size(); ++i) ax.push_back(int64_t(i));
    check_axes(c, ax, y.dim());
    for (size_t i = 0; i < ax.size(); ++i) {
      const int64_t n = y.size(ax[i]);
      // A step beyond the size reaches one element either way; bounded so that kiln's slice
      // arithmetic cannot overflow.
      const int64_t step = std::clamp<int64_t>(steps[i], -std::max<int64_t>(n, 1), std::max<int64_t>(n, 1));
      // ONNX's clamping: negative values count from the end, then [0, n] for positive steps and
      // [0, n-1] (start) / [-1, n-1] (end) for negative ones.
      auto wrapped = [n](int64_t v) { return v < 0 ? (v < -n ? -n - 1 : v + n) : v; };
      int64_t s = wrapped(starts[i]), e = wrapped(ends[i]);
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, n), e = std::clamp<int64_t>(e, 0, n);
        y = y.slice(ax[i], s, std::max(s, e), step);
        continue;
      }
      s = std::clamp<int64_t>(s, 0, n - 1), e = std::clamp<int64_t>(e, -1, n - 1);
      std::vector<int64_t> idx;
      for (int64_t k = s; k > e; k += step) idx.push_back(k);
      if (idx.empty() || n == 0) {
        y = y.slice(ax[i], 0, 0);
        continue;
      }
      y = take(y, ax[i], idx);
    }
    return y.contiguous();
  };
}

namespace {

struct ResizeSpec {
  std::string mode = "nearest", ct = "half_pixel", nearest = "round_prefer_floor", policy = "stretch";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
  std::vector<int64_t> axes, sizes;
  std::vector<float> scales, roi;
};

// The reference's coefficients for one output position (ratio: the source coordinate's fraction,
// 1 where it is an integer; scale: the axis' scale factor).
std::vector<double> coeffs(const ResizeSpec& r, double ratio, double scale) {
  if (r.mode == "nearest") {
    if (ratio == 1.0) return {0, 1};
    if (r.nearest == "round_prefer_floor") return {double(ratio <= 0.5), double(ratio > 0.5)};
    if (r.nearest == "round_prefer_ceil") return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (r.nearest == "floor") return {1, 0};
    return {0, 1};  // ceil
  }
  if (r.mode == "linear") {
    if (!r.antialias) return {1 - ratio, ratio};
    const double sc = std::min(scale, 1.0);
    const int64_t start = int64_t(std::floor(-1 / sc) + 1), footprint = 2 - 2 * start;
    std::vector<double> v;
    double sum = 0;
    for (int64_t i = start; i < start + footprint; ++i) {
      v.push_back(std::clamp(1 - std::abs((double(i) - ratio) * sc), 0.0, 1.0));
      sum += v.back();
    }
    for (double& x : v) x /= sum;
    return v;
  }
  const double A = r.cubic_a;
  if (!r.antialias) {
    const double t = ratio + 1, u = 1 - ratio, w = u + 1;
    return {((A * t - 5 * A) * t + 8 * A) * t - 4 * A, ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
            ((A + 2) * u - (A + 3)) * u * u + 1, ((A * w - 5 * A) * w + 8 * A) * w - 4 * A};
  }
  const double sc = std::min(scale, 1.0);
  const int64_t i_start = int64_t(std::floor(-2 / sc) + 1), i_end = 2 - i_start;
  std::vector<double> v;
  double sum = 0;
  for (int64_t i = i_start; i < i_end; ++i) {
    const double x = std::abs(sc * (double(i) - ratio)), x2 = x * x, x3 = x2 * x;
    v.push_back(x <= 1 ? (A + 2) * x3 - (A + 3) * x2 + 1 : x < 2 ? A * x3 - 5 * A * x2 + 8 * A * x - 4 * A : 0.0);
    sum += v.back();
  }
  for (double& x : v) x /= sum;
  return v;
}

// One axis resized to `out` positions: the reference's _interpolate_1d_along_axis.
Tensor resize_axis(const NodeCtx& c, const ResizeSpec& r, const Tensor& x, int64_t axis, double scale, int64_t out,
                   double roi0, double roi1) {
  const int64_t in = x.size(axis);
  if (out <= 0) c.refuse("resizing dim ", axis, " of ", in, " gives ", out, " values");
  const double out_f = scale * double(in);
  std::vector<std::vector<double>> cf(static_cast<size_t>(out));
  std::vector<std::vector<int64_t>> idx(static_cast<size_t>(out));
  std::vector<bool> extrapolated(static_cast<size_t>(out), false);
  for (int64_t o = 0; o < out; ++o) {
    const double y = double(o);
    double xo;
    const std::string& ct = r.ct;
    if (ct == "align_corners") {
      xo = out_f == 1 ? 0.0 : y * double(in - 1) / (out_f - 1);
    } else if (ct == "asymmetric") {
      xo = y / scale;
    } else if (ct == "tf_crop_and_resize") {
      xo = out_f == 1 ? (roi1 - roi0) * double(in - 1) / 2 : y * (roi1 - roi0) * double(in - 1) / (out_f - 1);
      xo += roi0 * double(in - 1);
      extrapolated[size_t(o)] = xo < 0 || xo > double(in - 1);
    } else if (ct == "pytorch_half_pixel") {
      xo = out_f == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    } else if (ct == "half_pixel") {
      xo = (y + 0.5) / scale - 0.5;
    } else {  // half_pixel_symmetric
      const double adjustment = double(out) / out_f, center = double(in) / 2, offset = center * (1 - adjustment);
      xo = offset + (y + 0.5) / scale - 0.5;
    }
    const double fl = std::floor(xo);
    const double ratio = xo == fl ? 1.0 : xo - fl;
    std::vector<double> w = coeffs(r, ratio, scale);
    const int64_t n = int64_t(w.size()), pad = (n + 1) / 2;
    const double xp = xo + double(pad), p = std::floor(xp), frac = xp - p;
    int64_t off;
    if (n % 2 == 0) off = frac == 0 ? -(n / 2) : -(n / 2) + 1;
    else off = frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1;
    const int64_t start = int64_t(p) + off;
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) ids[size_t(j)] = start + j - pad;
    if (r.exclude_outside) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (ids[size_t(j)] < 0 || ids[size_t(j)] >= in) w[size_t(j)] = 0;
        sum += w[size_t(j)];
      }
      if (sum == 0) sum = 1;
      for (double& v : w) v /= sum;
    }
    for (int64_t& i : ids) i = std::clamp<int64_t>(i, 0, in - 1);
    cf[size_t(o)] = w;
    idx[size_t(o)] = ids;
  }
  const size_t n = cf[0].size();
  Tensor y;
  Shape cshape(size_t(x.dim()), 1);
  cshape[size_t(axis)] = out;
  for (size_t j = 0; j < n; ++j) {
    std::vector<int64_t> ids(static_cast<size_t>(out));
    std::vector<float> w(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) ids[size_t(o)] = idx[size_t(o)][j], w[size_t(o)] = float(cf[size_t(o)][j]);
    const Tensor term =
        ops::mul(take(x, axis, ids), from_vector(w, cshape, TensorOptions(x.dtype()).with_device(x.device())));
    y = y.defined() ? ops::add(y, term) : term;
  }
  if (std::find(extrapolated.begin(), extrapolated.end(), true) == extrapolated.end()) return y;
  // tf_crop_and_resize: positions outside the input take the extrapolation value.
  std::vector<Tensor> parts;
  for (int64_t a = 0; a < out;) {
    int64_t b = a;
    while (b < out && extrapolated[size_t(b)] == extrapolated[size_t(a)]) ++b;
    if (extrapolated[size_t(a)]) {
      Shape s = y.sizes();
      s[size_t(axis)] = b - a;
      parts.push_back(full(s, r.extrapolation, TensorOptions(y.dtype()).with_device(y.device())));
    } else {
      parts.push_back(y.slice(axis, a, b));
    }
    a = b;
  }
  return parts.size() == 1 ? parts[0] : ops::cat(parts, axis);
}

bool close_to_one(double v) { return std::abs(v - 1.0) <= 1e-9 * std::max(1.0, std::abs(v)); }

Tensor resize(const NodeCtx& c, const ResizeSpec& r, const Tensor& x0) {
  Tensor x = x0;
  const int64_t rank = x.dim();
  std::vector<int64_t> axes = r.axes;
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  check_axes(c, axes, rank);
  const size_t na = axes.size();
  if (!r.scales.empty() && r.scales.size() != na)
    c.refuse("scales has ", r.scales.size(), " values for ", na, " axes");
  if (!r.sizes.empty() && r.sizes.size() != na) c.refuse("sizes has ", r.sizes.size(), " values for ", na, " axes");
  if (r.ct == "tf_crop_and_resize" && r.roi.size() != 2 * na)
    c.refuse("roi has ", r.roi.size(), " values for ", na, " axes (tf_crop_and_resize needs 2 per axis)");
  std::vector<double> scale(na);
  std::vector<int64_t> out(na);
  if (!r.sizes.empty()) {
    for (size_t i = 0; i < na; ++i) {
      if (r.sizes[i] <= 0 || r.sizes[i] > kMaxOut || x.size(axes[i]) == 0)
        c.refuse("size ", r.sizes[i], " of a dim of ", x.size(axes[i]), " is out of range (1 to ", kMaxOut, ")");
      scale[i] = double(r.sizes[i]) / double(x.size(axes[i])), out[i] = r.sizes[i];
    }
    if (r.policy != "stretch") {
      double s = scale[0];
      for (double v : scale) s = r.policy == "not_larger" ? std::min(s, v) : std::max(s, v);
      for (size_t i = 0; i < na; ++i) scale[i] = s, out[i] = int64_t(s * double(x.size(axes[i])) + 0.5);
      for (int64_t o : out)
        if (o > kMaxOut) c.refuse("size ", o, " is out of range");
    }
  } else {
    for (size_t i = 0; i < na; ++i) {
      scale[i] = double(r.scales[i]);
      const double o = scale[i] * double(x.size(axes[i]));
      if (!(scale[i] > 0) || !(o < double(kMaxOut))) c.refuse("scale ", scale[i], " is out of range");
      out[i] = int64_t(o);
    }
  }
  // The output's size, bounded before the per-axis index tables (as long as an axis) and the
  // partial results are made.
  Shape out_shape = x.sizes();
  for (size_t i = 0; i < na; ++i) out_shape[size_t(axes[i])] = out[i];
  check_tensor_bytes(out_shape, x.element_size(), c.where() + "the resized output");
  for (size_t i = 0; i < na; ++i) {
    const double roi0 = r.roi.size() == 2 * na ? double(r.roi[i]) : 0.0;
    const double roi1 = r.roi.size() == 2 * na ? double(r.roi[na + i]) : 1.0;
    const bool roi_trivial = r.ct != "tf_crop_and_resize" || (std::abs(roi0) < 1e-9 && close_to_one(roi1));
    if (close_to_one(scale[i]) && out[i] == x.size(axes[i]) && roi_trivial) continue;
    x = resize_axis(c, r, x, axes[i], scale[i], out[i], roi0, roi1);
  }
  return x.contiguous();
}

}  // namespace

OpFn resize_op(NodeCtx& c) {
  ResizeSpec r;
  const bool upsample = c.node.op_type == "Upsample";
  if (upsample || c.version == 10) {
    // Upsample and Resize-10: onnxruntime's mapping, x_in = x_out / scale; nearest takes the
    // floor (kiln refuses a nearest downscale, where onnxruntime rounds differently).
    r.mode = c.s("mode", "nearest");
    if (r.mode != "nearest" && r.mode != "linear")
      c.refuse("attribute 'mode' = '", r.mode, "' is not implemented (nearest, linear)");
    r.scales = upsample && c.version < 9 ? c.floats("scales", {}) : c.const_floats(1, "scales");
    if (r.scales.empty()) c.refuse("scales are required");
    for (float s : r.scales)
      if (r.mode == "nearest" && s < 1) c.refuse("nearest with a scale below 1 (", s, ") is not implemented");
    r.ct = "asymmetric";
    r.nearest = "floor";
    return [&c, r](const std::vector<Tensor>& in) { return resize(c, r, in[0]); };
  }
  r.mode = c.s("mode", "nearest");
  r.ct = c.s("coordinate_transformation_mode", "half_pixel");
  r.nearest = c.s("nearest_mode", "round_prefer_floor");
  r.cubic_a = c.f("cubic_coeff_a", -0.75);
  r.exclude_outside = c.i("exclude_outside", 0) != 0;
  r.extrapolation = c.f("extrapolation_value", 0.0);
  if (c.version >= 18) {
    r.antialias = c.i("antialias", 0) != 0;
    r.axes = c.ints("axes", {});
    r.policy = c.s("keep_aspect_ratio_policy", "stretch");
  }
  if (r.mode != "nearest" && r.mode != "linear" && r.mode != "cubic")
    c.refuse("attribute 'mode' = '", r.mode, "' is not a Resize mode");
  static const char* cts[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                              "tf_crop_and_resize", "half_pixel_symmetric"};
  if (std::find(std::begin(cts), std::end(cts), r.ct) == std::end(cts) ||
      (r.ct == "half_pixel_symmetric" && c.version < 19))
    c.refuse("attribute 'coordinate_transformation_mode' = '", r.ct, "' is not implemented for Resize-", c.version,
             r.ct == "tf_half_pixel_for_nn" ? " (tf_half_pixel_for_nn is not in the ONNX reference)" : "");
  if (r.nearest != "round_prefer_floor" && r.nearest != "round_prefer_ceil" && r.nearest != "floor" &&
      r.nearest != "ceil")
    c.refuse("attribute 'nearest_mode' = '", r.nearest, "' is not a nearest mode");
  if (r.policy != "stretch" && r.policy != "not_larger" && r.policy != "not_smaller")
    c.refuse("attribute 'keep_aspect_ratio_policy' = '", r.policy, "' is not a policy");
  if (r.antialias && r.mode == "nearest") c.refuse("antialias with mode nearest is not defined");
  if (c.has_input(1) && r.ct == "tf_crop_and_resize") r.roi = c.const_floats(1, "roi");
  if (c.has_input(2)) r.scales = c.const_floats(2, "scales");
  if (c.has_input(3)) r.sizes = c.const_ints(3, "sizes");
  if (r.scales.empty() == r.sizes.empty()) c.refuse("exactly one of scales and sizes must be given");
  if (r.policy != "stretch" && r.sizes.empty()) r.policy = "stretch";  // the policy applies to sizes only
  return [&c, r](const std::vector<Tensor>& in) { return resize(c, r, in[0]); };
}

}  // namespace kiln::onnx::detail
