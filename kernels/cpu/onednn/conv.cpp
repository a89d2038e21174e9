// oneDNN convolutions on kiln's ConvDesc. See conv.h.
//   Test: ctest --test-dir build -R test_onednn
#include "kernels/cpu/onednn/conv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernels/common/env.h"
#include "kernels/cpu/onednn/dnnl_compat.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

bool plain_layout() {
  static const bool plain = env_choice("KILN_ONEDNN_CONV_LAYOUT", {"plain", "auto"}) == "plain";
  return plain;
}

// kiln gives the top/left padding and the output size; oneDNN wants the bottom/right padding
// too, with (in - extent + pad_l + pad_r) / stride + 1 == out. Any pad_r in [exact, exact +
// stride - 1] gives the same windows; prefer one >= 0 (oneDNN rejects pad_r <= -stride).
int64_t right_pad(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad_l, int64_t dil) {
  const int64_t exact = (out - 1) * stride + (k - 1) * dil + 1 - in - pad_l;
  return exact >= 0 ? exact : std::min<int64_t>(0, exact + stride - 1);
}

struct Geom {
  compat::ConvShape shape;
  memory::desc src, wei, bias, dst;           // kiln's plain layouts
  memory::desc src_any, wei_any, dst_any;     // what the primitive may choose from
};

Geom geom(const ConvDesc& d) {
  Geom g;
  g.shape.strides = {d.stride_h, d.stride_w};
  g.shape.dilates = {d.dilation_h - 1, d.dilation_w - 1};  // oneDNN counts the holes: 0 = dense
  g.shape.pad_l = {d.pad_h, d.pad_w};
  g.shape.pad_r = {right_pad(d.H, d.P, d.R, d.stride_h, d.pad_h, d.dilation_h),
                   right_pad(d.W, d.Q, d.S, d.stride_w, d.pad_w, d.dilation_w)};
  const memory::dims src{d.N, d.C, d.H, d.W}, dst{d.N, d.K, d.P, d.Q};
  const memory::dims wei = d.groups > 1 ? memory::dims{d.groups, d.K / d.groups, d.C / d.groups, d.R, d.S}
                                        : memory::dims{d.K, d.C, d.R, d.S};
  const tag wtag = d.groups > 1 ? tag::goihw : tag::oihw;
  const tag act = d.nhwc ? tag::nhwc : tag::nchw;
  // bfloat16 problems (AVX512_BF16 / AMX) keep activations and weights in bfloat16 and the bias in
  // float32 (ConvDesc's contract), accumulating in float32 inside oneDNN.
  const dt t = d.dtype == DType::bfloat16 ? dt::bf16 : dt::f32;
  g.src = memory::desc(src, t, act);
  g.dst = memory::desc(dst, t, act);
  g.wei = memory::desc(wei, t, wtag);
  g.bias = memory::desc({d.K}, dt::f32, tag::x);
  // Channels-last activations are taken as they are (oneDNN's brgconv kernels run NHWC at the
  // speed of its blocked ones, without the reorders in and out); NCHW ones are reordered to the
  // blocked layout the primitive prefers, unless KILN_ONEDNN_CONV_LAYOUT=plain.
  const bool plain = plain_layout();
  g.src_any = plain || d.nhwc ? g.src : memory::desc(src, t, tag::any);
  g.dst_any = plain || d.nhwc ? g.dst : memory::desc(dst, t, tag::any);
  g.wei_any = plain ? g.wei : memory::desc(wei, t, tag::any);
  return g;
}

bool basic_ok(const ConvDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::bfloat16) && d.N > 0 && d.C > 0 && d.K > 0 && d.H > 0 && d.W > 0 && d.P > 0 && d.Q > 0 &&
         d.R > 0 && d.S > 0 && d.groups > 0 && d.C % d.groups == 0 && d.K % d.groups == 0 && d.stride_h > 0 &&
         d.stride_w > 0 && d.dilation_h > 0 && d.dilation_w > 0 && d.pad_h >= 0 && d.pad_w >= 0;
}

std::string layout_key(const ConvDesc& d) { return d.str() + (plain_layout() ? " plain" : " any"); }

struct FwdEntry : Made {
  Geom g;
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  Reorder src_in, wei_in, dst_out;
  Reorder dst_in;  // with the sum post-op: the residual into the primitive's dst layout
};

// Forward training (it is also the hint of both backward passes).
std::shared_ptr<const FwdEntry> fwd_entry(const ConvDesc& d) {
  return cached<FwdEntry>(cache_key("conv_fwd", layout_key(d)), [&] {
    FwdEntry e;
    try {
      e.g = geom(d);
      const Geom& g = e.g;
      dnnl::primitive_attr attr;
      // Post-ops in ConvDesc's order: the residual (sum: dst += what dst held, read in the
      // primitive's dst layout), then the ReLU, both applied while the output tile is in registers.
      if (d.sum || d.relu) {
        dnnl::post_ops po;
        if (d.sum) po.append_sum(1.f);
        if (d.relu) compat::append_eltwise(po, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
        attr.set_post_ops(po);
      }
      e.pd = compat::conv_fwd(dnnl::prop_kind::forward_training, g.src_any, g.wei_any, d.has_bias ? &g.bias : nullptr,
                              g.dst_any, g.shape, attr);
      e.prim = dnnl::convolution_forward(e.pd);
      e.src_in = Reorder(g.src, e.pd.src_desc());
      e.wei_in = Reorder(g.wei, e.pd.weights_desc(), true);
      e.dst_out = Reorder(e.pd.dst_desc(), g.dst);
      if (d.sum) e.dst_in = Reorder(g.dst, e.pd.dst_desc());
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

struct BwdDataEntry : Made {
  Geom g;
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
  Reorder diff_dst_in, wei_in, diff_src_out;
};

ConvDesc without_post_ops(ConvDesc d) {
  d.relu = false;
  d.sum = false;
  return d;
}

std::shared_ptr<const BwdDataEntry> bwd_data_entry(const ConvDesc& d) {
  return cached<BwdDataEntry>(cache_key("conv_bwd_data", layout_key(d)), [&] {
    BwdDataEntry e;
    auto hint = fwd_entry(without_post_ops(d));
    if (!hint->ok) {
      e.why = hint->why;
      return e;
    }
    try {
      e.g = hint->g;
      const Geom& g = e.g;
      e.pd = compat::conv_bwd_data(g.src_any, g.wei_any, g.dst_any, g.shape, hint->pd);
      e.prim = dnnl::convolution_backward_data(e.pd);
      e.diff_dst_in = Reorder(g.dst, e.pd.diff_dst_desc());
      e.wei_in = Reorder(g.wei, e.pd.weights_desc(), true);
      e.diff_src_out = Reorder(e.pd.diff_src_desc(), g.src);
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

struct BwdWeightsEntry : Made {
  Geom g;
  bool bias = false;
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
  Reorder src_in, diff_dst_in, diff_wei_out;
};

std::shared_ptr<const BwdWeightsEntry> bwd_weights_entry(const ConvDesc& d, bool bias) {
  return cached<BwdWeightsEntry>(cache_key(bias ? "conv_bwd_weights_bias" : "conv_bwd_weights", layout_key(d)), [&] {
    BwdWeightsEntry e;
    auto hint = fwd_entry(without_post_ops(d));
    if (!hint->ok) {
      e.why = hint->why;
      return e;
    }
    try {
      e.g = hint->g;
      e.bias = bias;
      const Geom& g = e.g;
      e.pd = compat::conv_bwd_weights(g.src_any, g.wei_any, bias ? &g.bias : nullptr, g.dst_any, g.shape, hint->pd);
      e.prim = dnnl::convolution_backward_weights(e.pd);
      e.src_in = Reorder(g.src, e.pd.src_desc());
      e.diff_dst_in = Reorder(g.dst, e.pd.diff_dst_desc());
      e.diff_wei_out = Reorder(e.pd.diff_weights_desc(), g.wei, true);
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

template <class E>
const E& require(const std::shared_ptr<const E>& e, const char* op, const ConvDesc& d) {
  KILN_CHECK(e->ok, op, ": oneDNN has no primitive for ", d.str(), ": ", e->why);
  return *e;
}

// Scratch slots: 0, 1 inputs; 2 output; 3 an unwanted output.
void run_fwd(const FwdEntry& e, const void* src, const void* wei, const void* bias, void* dst) {
  memory s = operand_in(e.src_in, e.g.src, e.pd.src_desc(), src, 0);
  memory w = operand_in(e.wei_in, e.g.wei, e.pd.weights_desc(), wei, 1);
  // The sum post-op reads dst: a blocked dst starts as the residual's reorder.
  memory o = e.dst_in.needed ? operand_in(e.dst_in, e.g.dst, e.pd.dst_desc(), dst, 2)
                             : operand_out(e.dst_out, e.g.dst, e.pd.dst_desc(), dst, 2);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, o}};
  if (bias) args.emplace(DNNL_ARG_BIAS, user_memory(e.g.bias, bias));
  execute(e.prim, args);
  finish_out(e.dst_out, o, e.g.dst, dst);
}

void run_bwd_data(const BwdDataEntry& e, const void* diff_dst, const void* wei, void* diff_src) {
  memory dd = operand_in(e.diff_dst_in, e.g.dst, e.pd.diff_dst_desc(), diff_dst, 0);
  memory w = operand_in(e.wei_in, e.g.wei, e.pd.weights_desc(), wei, 1);
  memory ds = operand_out(e.diff_src_out, e.g.src, e.pd.diff_src_desc(), diff_src, 2);
  execute(e.prim, {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, ds}});
  finish_out(e.diff_src_out, ds, e.g.src, diff_src);
}

void run_bwd_weights(const BwdWeightsEntry& e, const void* src, const void* diff_dst, void* diff_wei,
                     void* diff_bias) {
  memory s = operand_in(e.src_in, e.g.src, e.pd.src_desc(), src, 0);
  memory dd = operand_in(e.diff_dst_in, e.g.dst, e.pd.diff_dst_desc(), diff_dst, 1);
  // Unwanted weight gradients still have to be computed: into scratch, in oneDNN's layout.
  memory dw = diff_wei ? operand_out(e.diff_wei_out, e.g.wei, e.pd.diff_weights_desc(), diff_wei, 2)
                       : memory(e.pd.diff_weights_desc(), engine(), scratch(3, e.pd.diff_weights_desc().get_size()));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, s}, {DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
  if (e.bias) args.emplace(DNNL_ARG_DIFF_BIAS, user_memory(e.g.bias, diff_bias));
  execute(e.prim, args);
  if (diff_wei) finish_out(e.diff_wei_out, dw, e.g.wei, diff_wei);
}

}  // namespace

bool supports_conv_fwd(const ConvDesc& d) { return basic_ok(d) && fwd_entry(d)->ok; }
bool supports_conv_bwd_data(const ConvDesc& d) { return basic_ok(d) && bwd_data_entry(d)->ok; }
bool supports_conv_bwd_weights(const ConvDesc& d) {
  return basic_ok(d) && bwd_weights_entry(d, d.has_bias)->ok;
}

void conv2d_fwd(const ConvDesc& d, const void* src, const void* wei, const void* bias, void* dst) {
  const FwdEntry& e = require(fwd_entry(d), "conv2d_fwd", d);
  KILN_CHECK(!d.has_bias || bias, "conv2d_fwd: ", d.str(), " has a bias but the bias pointer is null");
  KILN_DNNL("conv2d_fwd", d, run_fwd(e, src, wei, d.has_bias ? bias : nullptr, dst));
}

void conv2d_bwd_data(const ConvDesc& d, const void* diff_dst, const void* wei, void* diff_src) {
  const BwdDataEntry& e = require(bwd_data_entry(d), "conv2d_bwd_data", d);
  KILN_DNNL("conv2d_bwd_data", d, run_bwd_data(e, diff_dst, wei, diff_src));
}

void conv2d_bwd_weights(const ConvDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias) {
  if (!diff_wei && !diff_bias) return;
  const BwdWeightsEntry& e = require(bwd_weights_entry(d, diff_bias != nullptr), "conv2d_bwd_weights", d);
  KILN_DNNL("conv2d_bwd_weights", d, run_bwd_weights(e, src, diff_dst, diff_wei, diff_bias));
}

namespace {

// What a training forward hands its backward: the backward primitives of its problem, found
// once per forward call instead of once per backward call (each lookup formats the descriptor
// and takes the cache's lock).
// Each entry is looked up on first use: a backward pass that runs on another backend (NCHW
// backward-weights runs native) costs nothing here.
struct ConvPlan {
  ConvDesc d;  // the backward problem: the forward's without post-ops
  mutable std::once_flag data_once, weights_once;
  mutable std::shared_ptr<const BwdDataEntry> bwd_data;
  mutable std::shared_ptr<const BwdWeightsEntry> bwd_weights;  // with a bias gradient iff d.has_bias
  const BwdDataEntry& data() const {
    std::call_once(data_once, [&] { bwd_data = bwd_data_entry(d); });
    return *bwd_data;
  }
  const BwdWeightsEntry& weights() const {
    std::call_once(weights_once, [&] { bwd_weights = bwd_weights_entry(d, d.has_bias); });
    return *bwd_weights;
  }
};

bool same_problem(const ConvDesc& a, const ConvDesc& b) {
  return a.dtype == b.dtype && a.N == b.N && a.C == b.C && a.H == b.H && a.W == b.W && a.K == b.K && a.R == b.R &&
         a.S == b.S && a.P == b.P && a.Q == b.Q && a.stride_h == b.stride_h && a.stride_w == b.stride_w &&
         a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.dilation_h == b.dilation_h &&
         a.dilation_w == b.dilation_w && a.groups == b.groups && a.has_bias == b.has_bias && a.nhwc == b.nhwc &&
         a.relu == b.relu && a.sum == b.sum;
}

const ConvPlan* plan_for(const KernelPayload& p, const ConvDesc& d) {
  const auto* plan = static_cast<const ConvPlan*>(p.state.get());
  return plan && same_problem(plan->d, d) ? plan : nullptr;
}

}  // namespace

void conv2d_fwd(const ConvDesc& d, KernelPayload& payload, const void* src, const void* wei, const void* bias,
                void* dst) {
  conv2d_fwd(d, src, wei, bias, dst);
  auto plan = std::make_shared<ConvPlan>();
  plan->d = without_post_ops(d);
  payload.state = std::move(plan);
}

void conv2d_bwd_data(const ConvDesc& d, KernelPayload& payload, const void* diff_dst, const void* wei,
                     void* diff_src) {
  const ConvPlan* plan = plan_for(payload, d);
  if (!plan || !plan->data().ok) return conv2d_bwd_data(d, diff_dst, wei, diff_src);
  KILN_DNNL("conv2d_bwd_data", d, run_bwd_data(plan->data(), diff_dst, wei, diff_src));
}

void conv2d_bwd_weights(const ConvDesc& d, KernelPayload& payload, const void* src, const void* diff_dst,
                        void* diff_wei, void* diff_bias) {
  const ConvPlan* plan = plan_for(payload, d);
  if (!plan || (diff_bias != nullptr) != d.has_bias || !plan->weights().ok)
    return conv2d_bwd_weights(d, src, diff_dst, diff_wei, diff_bias);
  KILN_DNNL("conv2d_bwd_weights", d, run_bwd_weights(plan->weights(), src, diff_dst, diff_wei, diff_bias));
}

}  // namespace kiln::onednn
