// Shape op wrappers: cat/stack (strided copies into slices of the output), split/chunk (views),
// pad and upsample (pad/upsample kernels), with autograd and PyTorch's argument checks.
// Kernel registration at the end.
//   tests: ctest --test-dir build -R shape
#include "engine/ops/shape.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/graph_op.h"
#include "kernels/common/concat.h"

namespace kiln {
namespace {


std::string vec_str(const std::vector<int64_t>& v) { return shape_str(v); }

Tensor empty_for(const Shape& s, const Tensor& like) {
  return empty(s, TensorOptions(like.dtype()).with_device(like.device()));
}

// cat as one "concat" kernel call when every input is dense in the output's memory format (NCHW
// or channels-last): each input is then [outer, size * inner] in memory order. Returns false
// (the caller copies slice by slice) otherwise.
bool concat_as_blocks(const std::vector<Tensor>& xs, int64_t dim, bool channels_last, Tensor& y) {
  if (y.device().type != DeviceType::cpu || y.numel() == 0) return false;
  const MemoryFormat f = channels_last ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  for (const Tensor& x : xs)
    if (!x.is_contiguous(f)) return false;
  // The dims in memory order, outermost first.
  std::vector<int64_t> order;
  if (channels_last) order = {0, 2, 3, 1};
  else for (int64_t d = 0; d < y.dim(); ++d) order.push_back(d);
  ConcatDesc d;
  d.dtype = y.dtype();
  bool after = false;
  for (int64_t o : order) {
    if (o == dim) after = true;
    else if (after) d.inner *= y.size(o);
    else d.outer *= y.size(o);
  }
  std::vector<const void*> srcs;
  for (const Tensor& x : xs) {
    d.sizes.push_back(x.size(dim));
    srcs.push_back(x.data_ptr());
  }
  dispatch<kernel_op::concat>(DeviceType::cpu, d, srcs.data(), y.data_ptr());
  return true;
}

}  // namespace

namespace ops {

namespace {
Tensor cat_body(const std::vector<Tensor>& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < xs.size(); ++i) KILN_CHECK(xs[i].defined(), "cat: tensor ", i, " is undefined");
  const Tensor& x0 = xs[0];
  KILN_CHECK(x0.dim() > 0, "cat: zero-dimensional tensor 0 cannot be concatenated");
  dim = wrap_dim(dim, x0.dim(), "cat");
  Shape out = x0.sizes();
  out[size_t(dim)] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    KILN_CHECK(x.dtype() == x0.dtype(), "cat: tensor ", i, " is ", x.dtype(), " ", shape_str(x.sizes()),
               " but tensor 0 is ", x0.dtype(), " ", shape_str(x0.sizes()));
    KILN_CHECK(x.device() == x0.device(), "cat: tensor ", i, " is on ", x.device(), " but tensor 0 is on ",
               x0.device());
    bool same = x.dim() == x0.dim();
    for (int64_t d = 0; same && d < x.dim(); ++d) same = d == dim || x.size(d) == x0.size(d);
    KILN_CHECK(same, "cat: tensor ", i, " has shape ", shape_str(x.sizes()), " but tensor 0 has ",
               shape_str(x0.sizes()), "; sizes must match except in dim ", dim);
    out[size_t(dim)] += x.size(dim);
  }
  // Channels-last inputs give a channels-last result (Inception's branches stay NHWC).
  bool cl = out.size() == 4;
  for (const Tensor& x : xs) cl = cl && x.suggest_memory_format() == MemoryFormat::channels_last;
  Tensor y = empty(out, TensorOptions(x0.dtype()).with_device(x0.device()),
                   cl ? MemoryFormat::channels_last : MemoryFormat::contiguous);
  std::vector<int64_t> sizes;
  for (const Tensor& x : xs) sizes.push_back(x.size(dim));
  if (!concat_as_blocks(xs, dim, cl, y)) {
    int64_t off = 0;
    for (const Tensor& x : xs) {
      if (x.size(dim) > 0) y.narrow(dim, off, x.size(dim)).copy_(x.detach());
      off += x.size(dim);
    }
  }
  autograd::record_fn("CatBackward", xs, {&y}, [dim, sizes](std::vector<Tensor>& g) {
    std::vector<Tensor> gx;
    int64_t o = 0;
    for (int64_t s : sizes) {
      gx.push_back(g[0].narrow(dim, o, s));
      o += s;
    }
    return gx;
  });
  return y;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  return graph::call(
      GraphOp::cat, xs, [&] { return std::vector<trace::Attr>{trace::ints("dim", {dim})}; },
      [&](const Tensor*) { return cat_body(xs, dim); });
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < xs.size(); ++i) {
    KILN_CHECK(xs[i].defined(), "stack: tensor ", i, " is undefined");
    KILN_CHECK(xs[i].sizes() == xs[0].sizes(), "stack: tensor ", i, " has shape ", shape_str(xs[i].sizes()),
               " but tensor 0 has ", shape_str(xs[0].sizes()), "; all must be equal");
  }
  dim = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (const Tensor& x : xs) us.push_back(x.unsqueeze(dim));
  return cat(us, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  KILN_CHECK(x.defined(), "split: undefined tensor");
  KILN_CHECK(x.dim() > 0, "split: cannot split a zero-dimensional tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "split: negative size in ", vec_str(sizes), " for ", shape_str(x.sizes()));
    total += s;
  }
  KILN_CHECK(total == x.size(dim), "split: sizes ", vec_str(sizes), " sum to ", total, " but dim ", dim, " of ",
             shape_str(x.sizes()), " has size ", x.size(dim));
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(dim, off, s));
    off += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK(x.defined(), "chunk: undefined tensor");
  KILN_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks, " for ", shape_str(x.sizes()));
  KILN_CHECK(x.dim() > 0, "chunk: cannot chunk a zero-dimensional tensor");
  dim = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.size(dim);
  const int64_t each = (n + chunks - 1) / chunks;
  std::vector<int64_t> sizes;
  if (each == 0) sizes.push_back(0);
  for (int64_t off = 0; off < n; off += each) sizes.push_back(std::min(each, n - off));
  return split(x, sizes, dim);
}

namespace {
Tensor pad_body(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode, double value) {
  KILN_CHECK(x.defined(), "pad: undefined tensor");
  KILN_CHECK(pads.size() == 2 || pads.size() == 4, "pad: expected 2 (left, right) or 4 (left, right, top, bottom) ",
             "pad values, got ", vec_str(pads), " for input ", shape_str(x.sizes()));
  const bool two_d = pads.size() == 4;
  KILN_CHECK(x.dim() >= (two_d ? 2 : 1), "pad: ", pads.size(), " pad values need an input with at least ",
             two_d ? 2 : 1, " dims, got ", shape_str(x.sizes()));
  KILN_CHECK(x.is_floating_point(), "pad: needs a floating-point input, got ", x.dtype(), " ", shape_str(x.sizes()));
  PadDesc d;
  d.mode = mode;
  d.dtype = x.dtype();
  d.value = value;
  d.iw = x.size(-1);
  d.ih = two_d ? x.size(-2) : 1;
  d.left = pads[0];
  d.top = two_d ? pads[2] : 0;
  d.ow = d.iw + pads[0] + pads[1];
  d.oh = two_d ? d.ih + pads[2] + pads[3] : 1;
  d.planes = 1;
  for (int64_t i = 0; i < x.dim() - (two_d ? 2 : 1); ++i) d.planes *= x.size(i);
  const std::string where =
      std::string(" (") + pad_mode_name(mode) + " pad " + vec_str(pads) + " of input " + shape_str(x.sizes()) + ")";
  KILN_CHECK(d.ow >= 0 && d.oh >= 0, "pad: negative output size ", d.oh, "x", d.ow, where);
  if (mode != PadMode::constant) {
    KILN_CHECK(d.iw > 0 && d.ih > 0, "pad: padded dims must be non-empty", where);
    for (size_t i = 0; i < pads.size(); ++i) {
      const int64_t in = i < 2 ? d.iw : d.ih;
      if (mode == PadMode::reflect)
        KILN_CHECK(pads[i] < in, "pad: reflect padding ", pads[i], " must be less than the input size ", in, where);
      if (mode == PadMode::circular) {
        // Wraps within the input left after cropping, at most once.
        const int64_t other = pads[i ^ 1];
        const int64_t kept = in - std::max<int64_t>(-pads[i], 0) - std::max<int64_t>(-other, 0);
        KILN_CHECK(kept > 0 && pads[i] <= kept, "pad: circular padding ", pads[i],
                   " must be at most the (cropped) input size ", kept, where);
      }
    }
  }
  Shape out = x.sizes();
  out.back() = d.ow;
  if (two_d) out[out.size() - 2] = d.oh;
  Tensor xc = x.detach().contiguous();
  Tensor y = empty_for(out, x);
  dispatch<kernel_op::pad_fwd>(x.device().type, d, xc.data_ptr(), y.data_ptr());
  autograd::record_fn("PadBackward", {x}, {&y}, [d, xs = x.sizes()](std::vector<Tensor>& g) {
    Tensor gc = g[0].contiguous();
    Tensor gx = empty(xs, TensorOptions(d.dtype).with_device(gc.device()));
    dispatch<kernel_op::pad_bwd>(gc.device().type, d, gc.data_ptr(), gx.data_ptr());
    return std::vector<Tensor>{gx};
  });
  return y;
}
}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode, double value) {
  return graph::call(
      GraphOp::pad, {x},
      [&] {
        return std::vector<trace::Attr>{trace::ints("pads", pads), trace::ints("mode", {int64_t(mode)}),
                                        trace::real("value", value)};
      },
      [&](const Tensor* in) { return pad_body(in[0], pads, mode, value); });
}

}  // namespace ops

namespace {

Tensor upsample(const Tensor& x, UpsampleMode mode, std::array<int64_t, 2> size, double sh, double sw,
                bool align_corners) {
  const char* op = mode == UpsampleMode::nearest ? "upsample_nearest2d" : "upsample_bilinear2d";
  KILN_CHECK(x.defined(), op, ": undefined tensor");
  KILN_CHECK(x.dim() == 4, op, ": expected a 4-d (N, C, H, W) input, got ", shape_str(x.sizes()));
  KILN_CHECK(x.is_floating_point(), op, ": needs a floating-point input, got ", x.dtype(), " ", shape_str(x.sizes()));
  KILN_CHECK(x.size(2) > 0 && x.size(3) > 0, op, ": input ", shape_str(x.sizes()), " has an empty spatial dim");
  UpsampleDesc d;
  d.mode = mode;
  d.dtype = x.dtype();
  d.n = x.size(0), d.c = x.size(1), d.ih = x.size(2), d.iw = x.size(3);
  d.align_corners = align_corners;
  if (sh > 0 || sw > 0) {
    KILN_CHECK(sh > 0 && sw > 0 && std::isfinite(sh) && std::isfinite(sw), op, ": scale factors ", sh, "x", sw,
               " must be positive (input ", shape_str(x.sizes()), ")");
    d.oh = int64_t(std::floor(double(d.ih) * sh));
    d.ow = int64_t(std::floor(double(d.iw) * sw));
    d.scale_h = sh;
    d.scale_w = sw;
  } else {
    d.oh = size[0];
    d.ow = size[1];
  }
  KILN_CHECK(d.oh > 0 && d.ow > 0, op, ": output size ", d.oh, "x", d.ow, " must be positive (input ",
             shape_str(x.sizes()), ")");
  // PyTorch's CPU bilinear kernel copies when no spatial size changes, whatever the scale factor.
  if (mode == UpsampleMode::bilinear && d.oh == d.ih && d.ow == d.iw) d.scale_h = d.scale_w = 0;
  Tensor xc = x.detach().contiguous();
  Tensor y = empty({d.n, d.c, d.oh, d.ow}, TensorOptions(d.dtype).with_device(x.device()));
  dispatch<kernel_op::upsample_fwd>(x.device().type, d, xc.data_ptr(), y.data_ptr());
  autograd::record_fn(mode == UpsampleMode::nearest ? "UpsampleNearest2dBackward" : "UpsampleBilinear2dBackward", {x},
                      {&y}, [d](std::vector<Tensor>& g) {
                        Tensor gc = g[0].contiguous();
                        Tensor gx = empty({d.n, d.c, d.ih, d.iw}, TensorOptions(d.dtype).with_device(gc.device()));
                        dispatch<kernel_op::upsample_bwd>(gc.device().type, d,
                                                                                       gc.data_ptr(), gx.data_ptr());
                        return std::vector<Tensor>{gx};
                      });
  return y;
}

}  // namespace

namespace ops {

// The four entries of the two upsampling graph ops: by output size or by scale factors.
Tensor upsample_nearest2d(const Tensor& x, std::array<int64_t, 2> size) {
  return graph::call(
      GraphOp::upsample_nearest2d, {x}, [&] { return std::vector<trace::Attr>{trace::ints("size", {size[0], size[1]})}; },
      [&](const Tensor* in) { return upsample(in[0], UpsampleMode::nearest, size, 0, 0, false); });
}
Tensor upsample_nearest2d(const Tensor& x, double scale_h, double scale_w) {
  KILN_CHECK(scale_h > 0 && scale_w > 0, "upsample_nearest2d: scale factors ", scale_h, "x", scale_w,
             " must be positive");
  return graph::call(
      GraphOp::upsample_nearest2d, {x},
      [&] { return std::vector<trace::Attr>{trace::real("scale_h", scale_h), trace::real("scale_w", scale_w)}; },
      [&](const Tensor* in) { return upsample(in[0], UpsampleMode::nearest, {0, 0}, scale_h, scale_w, false); });
}
Tensor upsample_bilinear2d(const Tensor& x, std::array<int64_t, 2> size, bool align_corners) {
  return graph::call(
      GraphOp::upsample_bilinear2d, {x},
      [&] {
        return std::vector<trace::Attr>{trace::ints("size", {size[0], size[1]}),
                                        trace::ints("align_corners", {align_corners})};
      },
      [&](const Tensor* in) { return upsample(in[0], UpsampleMode::bilinear, size, 0, 0, align_corners); });
}
Tensor upsample_bilinear2d(const Tensor& x, double scale_h, double scale_w, bool align_corners) {
  KILN_CHECK(scale_h > 0 && scale_w > 0, "upsample_bilinear2d: scale factors ", scale_h, "x", scale_w,
             " must be positive");
  return graph::call(
      GraphOp::upsample_bilinear2d, {x},
      [&] {
        return std::vector<trace::Attr>{trace::real("scale_h", scale_h), trace::real("scale_w", scale_w),
                                        trace::ints("align_corners", {align_corners})};
      },
      [&](const Tensor* in) {
        return upsample(in[0], UpsampleMode::bilinear, {0, 0}, scale_h, scale_w, align_corners);
      });
}

}  // namespace ops

}  // namespace kiln
