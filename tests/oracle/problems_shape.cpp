// Problems of the shape family (engine/ops/concat.cpp, shape.cpp): concat along NCHW channels
// and channels-last (inner 1), a single input, an empty input, 16-channel blocks, in float32, float64,
// bfloat16 and int64; the n-ary sum of 1, 2, 5 and 11 inputs; every PadMode with positive pads,
// crops (negative pads) where the mode allows them, and 1-d pads; nearest and bilinear
// upsampling by 2, by odd ratios down and up, identity, with align_corners and with a user
// scale factor.
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

Case<kernel_op::concat> concat_case() {
  Case<kernel_op::concat> c;
  struct S {
    int64_t outer, inner;
    std::vector<int64_t> sizes;
  };
  const std::vector<S> specs = {{2, 12, {3, 5, 1}}, {1, 1, {4, 4}}, {6, 1, {16, 8, 3}}, {3, 7, {2}}, {2, 3, {4, 0, 2}}};
  for (DType t : {DType::float32, DType::float64, DType::bfloat16, DType::int64})
    for (const S& s : specs) {
      ConcatDesc d;
      d.dtype = t;
      d.outer = s.outer, d.inner = s.inner, d.sizes = s.sizes;
      c.problems.push_back({d});
    }
  c.args = [](const ConcatDesc& d, int) {
    std::vector<Arg> a;
    for (size_t i = 0; i < d.sizes.size(); ++i)
      a.push_back(in("src" + std::to_string(i), d.dtype, d.outer * d.sizes[i] * d.inner,
                     is_floating(d.dtype) ? uniform(-1, 1) : integers(-1000, 1000)));
    a.push_back(out("dst", d.dtype, d.outer * d.total() * d.inner));
    return a;
  };
  c.kernel_args = [](const ConcatDesc& d, int, const std::vector<void*>& bufs, Scratch& s) {
    s.ptrs.assign(bufs.begin(), bufs.begin() + int64_t(d.sizes.size()));
    return std::vector<void*>{static_cast<void*>(s.ptrs.data()), bufs.back()};
  };
  return c;
}

Case<kernel_op::sum> sum_case() {
  Case<kernel_op::sum> c;
  for (DType t : float_dtypes())
    for (int64_t n : {37, 1, 1000, 4097})
      for (int64_t inputs : {1, 2, 5, 11}) {  // 11: more than one launch of 8 on CUDA
        SumDesc d;
        d.dtype = t;
        d.n = n;
        d.inputs = inputs;
        c.problems.push_back({d});
      }
  c.args = [](const SumDesc& d, int) {
    std::vector<Arg> a;
    for (int64_t i = 0; i < d.inputs; ++i) a.push_back(in("src" + std::to_string(i), d.dtype, d.n));
    a.push_back(out("dst", d.dtype, d.n));
    return a;
  };
  c.kernel_args = [](const SumDesc& d, int, const std::vector<void*>& bufs, Scratch& s) {
    s.ptrs.assign(bufs.begin(), bufs.begin() + d.inputs);
    return std::vector<void*>{static_cast<void*>(s.ptrs.data()), bufs.back()};
  };
  return c;
}

std::vector<PadDesc> pad_problems() {
  struct S {
    int64_t planes, ih, iw, top, left, bottom, right;
  };
  // 2-d pads, a crop (negative pads), 1-d pads (ih = oh = 1).
  const S grow = {2, 5, 6, 2, 1, 1, 3}, crop = {2, 5, 6, -1, -2, 1, 0}, line = {3, 1, 9, 0, 2, 0, 3};
  std::vector<PadDesc> v;
  for (DType t : float_dtypes())
    for (PadMode m : {PadMode::constant, PadMode::reflect, PadMode::replicate, PadMode::circular})
      for (const S& s : {grow, crop, line}) {
        PadDesc d;
        d.mode = m;
        d.dtype = t;
        d.planes = s.planes, d.ih = s.ih, d.iw = s.iw;
        d.top = s.top, d.left = s.left;
        d.oh = s.ih + s.top + s.bottom;
        d.ow = s.iw + s.left + s.right;
        d.value = m == PadMode::constant ? 0.5 : 0;
        v.push_back(d);
      }
  return v;
}

std::vector<UpsampleDesc> upsample_problems() {
  struct S {
    int64_t ih, iw, oh, ow;
    double scale;  // the user's scale factor (0: none); oh/ow follow it
  };
  const S specs[] = {{4, 5, 8, 10, 0}, {5, 7, 9, 4, 0}, {3, 3, 3, 3, 0}, {5, 4, 8, 6, 1.7}};
  std::vector<UpsampleDesc> v;
  for (DType t : float_dtypes())
    for (UpsampleMode m : {UpsampleMode::nearest, UpsampleMode::bilinear})
      for (const S& s : specs)
        for (bool align : {false, true}) {
          if (align && m == UpsampleMode::nearest) continue;
          UpsampleDesc d;
          d.mode = m;
          d.dtype = t;
          d.n = 2, d.c = 3, d.ih = s.ih, d.iw = s.iw, d.oh = s.oh, d.ow = s.ow;
          d.align_corners = align;
          d.scale_h = d.scale_w = align ? 0 : s.scale;
          v.push_back(d);
        }
  return v;
}

}  // namespace

void add_shape(CaseMap& m) {
  add(m, concat_case());
  add(m, sum_case());
  add(m, case_over<kernel_op::pad_fwd>(pad_problems(), [](const PadDesc& d) {
    return std::vector<Arg>{in("src", d.dtype, d.planes * d.ih * d.iw), out("dst", d.dtype, d.planes * d.oh * d.ow)};
  }));
  add(m, case_over<kernel_op::pad_bwd>(pad_problems(), [](const PadDesc& d) {
    return std::vector<Arg>{in("diff_dst", d.dtype, d.planes * d.oh * d.ow), out("diff_src", d.dtype, d.planes * d.ih * d.iw)};
  }));
  add(m, case_over<kernel_op::upsample_fwd>(upsample_problems(), [](const UpsampleDesc& d) {
    return std::vector<Arg>{in("src", d.dtype, d.planes() * d.ih * d.iw), out("dst", d.dtype, d.planes() * d.oh * d.ow)};
  }));
  add(m, case_over<kernel_op::upsample_bwd>(upsample_problems(), [](const UpsampleDesc& d) {
    return std::vector<Arg>{in("diff_dst", d.dtype, d.planes() * d.oh * d.ow),
                            out("diff_src", d.dtype, d.planes() * d.ih * d.iw)};
  }));
}

}  // namespace kiln::oracle
