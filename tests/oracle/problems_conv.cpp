// Problems of 2-d convolution (engine/ops/conv.cpp), as benchdnn problem strings
// (parse_conv_problem: dh/dw are the dilation, 1 = dense): odd sizes, batch 1, 1x1, non-square
// kernels, strides, dilation, groups, depthwise with and without a channel multiplier, enough
// channels for oneDNN's blocked layouts; each NCHW and channels-last (nhwc), with and without
// bias, the forward also with the fused ReLU; float32, float64 and bfloat16 (oneDNN takes it; the
// bias and its gradient stay float32). The forward also with the residual post-op (sum: dst read
// as the residual, then overwritten), alone and before the ReLU, in every dtype (bfloat16 with
// its bias only, as above). Backward kernels that take a payload (oneDNN's) run once
// with a fresh payload and once with their own forward's.
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

const char* const kProblems[] = {
    "mb2ic3ih9iw11oc5kh3kw3ph1pw1",   // odd sizes, same padding
    "mb1ic4ih7oc6kh1",                // batch 1, 1x1
    "mb2ic3ih9iw11oc5kh5kw3sh2sw2ph2pw1",  // non-square kernel, stride 2
    "mb2ic4ih10oc6kh3sh2ph1",         // even input, stride 2
    "mb2ic3ih11oc5kh3ph2dh2",         // dilation 2
    "g3mb2ic6ih9oc6kh3ph1",           // groups
    "g4mb2ic4ih9oc4kh3ph1",           // depthwise
    "g4mb2ic4ih9oc8kh3sh2ph1",        // depthwise, channel multiplier 2
    "mb1ic16ih5oc16kh3ph1",           // 16 channels: oneDNN's blocked kernels
};

std::vector<ConvDesc> conv_problems(bool fwd) {
  std::vector<ConvDesc> v;
  for (DType t : {DType::float32, DType::float64, DType::bfloat16})
    for (const char* s : kProblems)
      for (bool nhwc : {false, true})
        for (bool bias : {true, false}) {
          if (t != DType::float32 && !bias) continue;
          ConvDesc d = parse_conv_problem(s, t, bias);
          d.nhwc = nhwc;
          v.push_back(d);
          if (fwd && bias && t == DType::float32) {
            d.relu = true;
            v.push_back(d);
            d.relu = false;
          }
          if (fwd && (t != DType::bfloat16 || bias)) {
            d.sum = true;
            v.push_back(d);
            d.relu = true;
            v.push_back(d);
          }
        }
  return v;
}

std::vector<Arg> fwd_args(const ConvDesc& d) {
  return {in("src", d.dtype, d.src_elems()), in("wei", d.dtype, d.wei_elems()),
          d.has_bias ? in("bias", side_dtype(d.dtype), d.K) : none("bias"),
          d.sum ? inout("dst", d.dtype, d.dst_elems()) : out("dst", d.dtype, d.dst_elems())};
}

Case<kernel_op::conv2d_fwd> fwd_case() {
  Case<kernel_op::conv2d_fwd> c;
  for (const ConvDesc& d : conv_problems(true)) c.problems.push_back({d});
  c.args = [](const ConvDesc& d, int) { return fwd_args(d); };
  return c;
}

template <class Op>
Case<Op> bwd_case(std::function<std::vector<Arg>(const ConvDesc&)> args) {
  Case<Op> c;
  for (const ConvDesc& d : conv_problems(false)) c.problems.push_back({d});
  c.args = [args](const ConvDesc& d, int) { return args(d); };
  auto fwd = std::make_shared<Case<kernel_op::conv2d_fwd>>(fwd_case());
  c.forward = [fwd](int backend, DeviceType dev, const ConvDesc& d, KernelPayload& p) {
    return detail::run_forward<kernel_op::conv2d_fwd>(*fwd, backend, dev, d, p);
  };
  return c;
}

}  // namespace

void add_conv(CaseMap& m) {
  add(m, fwd_case());
  add(m, bwd_case<kernel_op::conv2d_bwd_data>([](const ConvDesc& d) {
    return std::vector<Arg>{in("diff_dst", d.dtype, d.dst_elems()), in("wei", d.dtype, d.wei_elems()),
                            out("diff_src", d.dtype, d.src_elems())};
  }));
  add(m, bwd_case<kernel_op::conv2d_bwd_weights>([](const ConvDesc& d) {
    return std::vector<Arg>{in("src", d.dtype, d.src_elems()), in("diff_dst", d.dtype, d.dst_elems()),
                            out("diff_wei", d.dtype, d.wei_elems()),
                            d.has_bias ? out("diff_bias", side_dtype(d.dtype), d.K) : none("diff_bias")};
  }));
}

}  // namespace kiln::oracle
