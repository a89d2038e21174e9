// oneDNN 2.6 and 3.x behind one set of calls: the only place the backend looks at oneDNN's
// version. 2.x builds a primitive descriptor from an operation descriptor (`fwd::desc`, then
// `fwd::primitive_desc(desc, attr, engine)`); 3.x dropped the operation descriptors and takes
// the engine and the memory descriptors directly. 3.x also renamed pooling_v2/softmax_v2 to
// pooling/softmax, gave post_ops::append_eltwise no scale argument and made LRN, eltwise and
// pooling forward take a destination descriptor. One function per primitive kind, each with
// its two branches side by side; kernel files never test DNNL_VERSION_MAJOR themselves.
//   Test: ctest --test-dir build -R test_onednn (built against Debian 12's oneDNN 2.6 and Debian
//   13's 3.7 by ../shared/tools/fresh-debian)
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/onednn/dnnl_common.h"

#if DNNL_VERSION_MAJOR < 2 || (DNNL_VERSION_MAJOR == 2 && DNNL_VERSION_MINOR < 6)
#error "kiln's oneDNN backend needs oneDNN 2.6 or newer (cmake/KilnDependencies.cmake checks this)"
#endif

#define KILN_DNNL_V3 (DNNL_VERSION_MAJOR >= 3)

namespace kiln::onednn::compat {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::primitive_attr;
using dnnl::prop_kind;

#if KILN_DNNL_V3
using pooling_forward = dnnl::pooling_forward;
using pooling_backward = dnnl::pooling_backward;
using softmax_forward = dnnl::softmax_forward;
using softmax_backward = dnnl::softmax_backward;
#else
using pooling_forward = dnnl::pooling_v2_forward;
using pooling_backward = dnnl::pooling_v2_backward;
using softmax_forward = dnnl::softmax_v2_forward;
using softmax_backward = dnnl::softmax_v2_backward;
#endif

// An eltwise post-op dst = alg(dst; alpha, beta) at scale 1.
inline void append_eltwise(dnnl::post_ops& po, algorithm alg, float alpha, float beta) {
#if KILN_DNNL_V3
  po.append_eltwise(alg, alpha, beta);
#else
  po.append_eltwise(1.f, alg, alpha, beta);
#endif
}

// --- convolution (direct); `bias` null for none. dilates count the holes (0 = dense).
struct ConvShape {
  memory::dims strides, dilates, pad_l, pad_r;
};

inline dnnl::convolution_forward::primitive_desc conv_fwd(prop_kind prop, const memory::desc& src,
                                                          const memory::desc& wei, const memory::desc* bias,
                                                          const memory::desc& dst, const ConvShape& s,
                                                          const primitive_attr& attr) {
  using fwd = dnnl::convolution_forward;
  const auto alg = algorithm::convolution_direct;
#if KILN_DNNL_V3
  return bias ? fwd::primitive_desc(engine(), prop, alg, src, wei, *bias, dst, s.strides, s.dilates, s.pad_l,
                                    s.pad_r, attr)
              : fwd::primitive_desc(engine(), prop, alg, src, wei, dst, s.strides, s.dilates, s.pad_l, s.pad_r, attr);
#else
  return fwd::primitive_desc(bias ? fwd::desc(prop, alg, src, wei, *bias, dst, s.strides, s.dilates, s.pad_l, s.pad_r)
                                  : fwd::desc(prop, alg, src, wei, dst, s.strides, s.dilates, s.pad_l, s.pad_r),
                             attr, engine());
#endif
}

inline dnnl::convolution_backward_data::primitive_desc conv_bwd_data(
    const memory::desc& diff_src, const memory::desc& wei, const memory::desc& diff_dst, const ConvShape& s,
    const dnnl::convolution_forward::primitive_desc& hint) {
  using bwd = dnnl::convolution_backward_data;
  const auto alg = algorithm::convolution_direct;
#if KILN_DNNL_V3
  return bwd::primitive_desc(engine(), alg, diff_src, wei, diff_dst, s.strides, s.dilates, s.pad_l, s.pad_r, hint);
#else
  return bwd::primitive_desc(bwd::desc(alg, diff_src, wei, diff_dst, s.strides, s.dilates, s.pad_l, s.pad_r),
                             engine(), hint);
#endif
}

inline dnnl::convolution_backward_weights::primitive_desc conv_bwd_weights(
    const memory::desc& src, const memory::desc& diff_wei, const memory::desc* diff_bias,
    const memory::desc& diff_dst, const ConvShape& s, const dnnl::convolution_forward::primitive_desc& hint) {
  using bwd = dnnl::convolution_backward_weights;
  const auto alg = algorithm::convolution_direct;
#if KILN_DNNL_V3
  return diff_bias ? bwd::primitive_desc(engine(), alg, src, diff_wei, *diff_bias, diff_dst, s.strides, s.dilates,
                                         s.pad_l, s.pad_r, hint)
                   : bwd::primitive_desc(engine(), alg, src, diff_wei, diff_dst, s.strides, s.dilates, s.pad_l,
                                         s.pad_r, hint);
#else
  return bwd::primitive_desc(
      diff_bias ? bwd::desc(alg, src, diff_wei, *diff_bias, diff_dst, s.strides, s.dilates, s.pad_l, s.pad_r)
                : bwd::desc(alg, src, diff_wei, diff_dst, s.strides, s.dilates, s.pad_l, s.pad_r),
      engine(), hint);
#endif
}

// --- inner product; `bias` null for none.
inline dnnl::inner_product_forward::primitive_desc ip_fwd(prop_kind prop, const memory::desc& src,
                                                          const memory::desc& wei, const memory::desc* bias,
                                                          const memory::desc& dst) {
  using fwd = dnnl::inner_product_forward;
#if KILN_DNNL_V3
  return bias ? fwd::primitive_desc(engine(), prop, src, wei, *bias, dst)
              : fwd::primitive_desc(engine(), prop, src, wei, dst);
#else
  return fwd::primitive_desc(bias ? fwd::desc(prop, src, wei, *bias, dst) : fwd::desc(prop, src, wei, dst), engine());
#endif
}

inline dnnl::inner_product_backward_data::primitive_desc ip_bwd_data(
    const memory::desc& diff_src, const memory::desc& wei, const memory::desc& diff_dst,
    const dnnl::inner_product_forward::primitive_desc& hint) {
  using bwd = dnnl::inner_product_backward_data;
#if KILN_DNNL_V3
  return bwd::primitive_desc(engine(), diff_src, wei, diff_dst, hint);
#else
  return bwd::primitive_desc(bwd::desc(diff_src, wei, diff_dst), engine(), hint);
#endif
}

inline dnnl::inner_product_backward_weights::primitive_desc ip_bwd_weights(
    const memory::desc& src, const memory::desc& diff_wei, const memory::desc* diff_bias,
    const memory::desc& diff_dst, const dnnl::inner_product_forward::primitive_desc& hint) {
  using bwd = dnnl::inner_product_backward_weights;
#if KILN_DNNL_V3
  return diff_bias ? bwd::primitive_desc(engine(), src, diff_wei, *diff_bias, diff_dst, hint)
                   : bwd::primitive_desc(engine(), src, diff_wei, diff_dst, hint);
#else
  return bwd::primitive_desc(
      diff_bias ? bwd::desc(src, diff_wei, *diff_bias, diff_dst) : bwd::desc(src, diff_wei, diff_dst), engine(), hint);
#endif
}

// --- matmul
inline dnnl::matmul::primitive_desc matmul(const memory::desc& a, const memory::desc& b, const memory::desc& c,
                                           const primitive_attr& attr) {
#if KILN_DNNL_V3
  return dnnl::matmul::primitive_desc(engine(), a, b, c, attr);
#else
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine());
#endif
}

// --- eltwise, in place on one layout (`data` is src, dst and both diffs).
inline dnnl::eltwise_forward::primitive_desc eltwise_fwd(prop_kind prop, algorithm alg, const memory::desc& data,
                                                         float alpha, float beta) {
  using fwd = dnnl::eltwise_forward;
#if KILN_DNNL_V3
  return fwd::primitive_desc(engine(), prop, alg, data, data, alpha, beta);
#else
  return fwd::primitive_desc(fwd::desc(prop, alg, data, alpha, beta), engine());
#endif
}

inline dnnl::eltwise_backward::primitive_desc eltwise_bwd(algorithm alg, const memory::desc& data, float alpha,
                                                          float beta, const dnnl::eltwise_forward::primitive_desc& hint) {
  using bwd = dnnl::eltwise_backward;
#if KILN_DNNL_V3
  return bwd::primitive_desc(engine(), alg, data, data, data, alpha, beta, hint);
#else
  return bwd::primitive_desc(bwd::desc(alg, data, data, alpha, beta), engine(), hint);
#endif
}

// --- batch normalization over one data layout.
inline dnnl::batch_normalization_forward::primitive_desc bnorm_fwd(prop_kind prop, const memory::desc& data,
                                                                   float eps, dnnl::normalization_flags flags) {
  using fwd = dnnl::batch_normalization_forward;
#if KILN_DNNL_V3
  return fwd::primitive_desc(engine(), prop, data, data, eps, flags);
#else
  return fwd::primitive_desc(fwd::desc(prop, data, eps, flags), engine());
#endif
}

inline dnnl::batch_normalization_backward::primitive_desc bnorm_bwd(
    const memory::desc& data, float eps, dnnl::normalization_flags flags,
    const dnnl::batch_normalization_forward::primitive_desc& hint) {
  using bwd = dnnl::batch_normalization_backward;
#if KILN_DNNL_V3
  return bwd::primitive_desc(engine(), prop_kind::backward, data, data, data, eps, flags, hint);
#else
  return bwd::primitive_desc(bwd::desc(prop_kind::backward, data, data, eps, flags), engine(), hint);
#endif
}

// 2.x's backward wants the shift operand although no formula reads it; 3.x counts the inputs
// and refuses one it does not expect.
constexpr bool kBnormBwdTakesShift = !KILN_DNNL_V3;

// --- softmax (softmax_accurate or softmax_log) along `axis` of one layout.
inline softmax_forward::primitive_desc softmax_fwd(prop_kind prop, algorithm alg, const memory::desc& data, int axis) {
#if KILN_DNNL_V3
  return softmax_forward::primitive_desc(engine(), prop, alg, data, data, axis);
#else
  return softmax_forward::primitive_desc(softmax_forward::desc(prop, alg, data, data, axis), engine());
#endif
}

inline softmax_backward::primitive_desc softmax_bwd(algorithm alg, const memory::desc& data, int axis,
                                                    const softmax_forward::primitive_desc& hint) {
#if KILN_DNNL_V3
  return softmax_backward::primitive_desc(engine(), alg, data, data, data, axis, hint);
#else
  return softmax_backward::primitive_desc(softmax_backward::desc(alg, data, data, data, axis), engine(), hint);
#endif
}

// --- pooling with dilation (0 = dense).
struct PoolShape {
  memory::dims strides, kernel, dilation, pad_l, pad_r;
};

inline pooling_forward::primitive_desc pool_fwd(prop_kind prop, algorithm alg, const memory::desc& src,
                                                const memory::desc& dst, const PoolShape& s) {
#if KILN_DNNL_V3
  return pooling_forward::primitive_desc(engine(), prop, alg, src, dst, s.strides, s.kernel, s.dilation, s.pad_l,
                                         s.pad_r);
#else
  return pooling_forward::primitive_desc(
      pooling_forward::desc(prop, alg, src, dst, s.strides, s.kernel, s.dilation, s.pad_l, s.pad_r), engine());
#endif
}

inline pooling_backward::primitive_desc pool_bwd(algorithm alg, const memory::desc& diff_src,
                                                 const memory::desc& diff_dst, const PoolShape& s,
                                                 const pooling_forward::primitive_desc& hint) {
#if KILN_DNNL_V3
  return pooling_backward::primitive_desc(engine(), alg, diff_src, diff_dst, s.strides, s.kernel, s.dilation,
                                          s.pad_l, s.pad_r, hint);
#else
  return pooling_backward::primitive_desc(
      pooling_backward::desc(alg, diff_src, diff_dst, s.strides, s.kernel, s.dilation, s.pad_l, s.pad_r), engine(),
      hint);
#endif
}

// --- LRN across channels over one layout.
struct LrnParams {
  memory::dim size;
  float alpha, beta, k;
};

inline dnnl::lrn_forward::primitive_desc lrn_fwd(prop_kind prop, const memory::desc& data, const LrnParams& p) {
  using fwd = dnnl::lrn_forward;
  const auto alg = algorithm::lrn_across_channels;
#if KILN_DNNL_V3
  return fwd::primitive_desc(engine(), prop, alg, data, data, p.size, p.alpha, p.beta, p.k);
#else
  return fwd::primitive_desc(fwd::desc(prop, alg, data, p.size, p.alpha, p.beta, p.k), engine());
#endif
}

inline dnnl::lrn_backward::primitive_desc lrn_bwd(const memory::desc& data, const LrnParams& p,
                                                  const dnnl::lrn_forward::primitive_desc& hint) {
  using bwd = dnnl::lrn_backward;
  const auto alg = algorithm::lrn_across_channels;
#if KILN_DNNL_V3
  return bwd::primitive_desc(engine(), alg, data, data, data, p.size, p.alpha, p.beta, p.k, hint);
#else
  return bwd::primitive_desc(bwd::desc(alg, data, data, p.size, p.alpha, p.beta, p.k), engine(), hint);
#endif
}

// --- concat and sum (only the argument order moved).
inline dnnl::concat::primitive_desc concat(const memory::desc& dst, int axis, const std::vector<memory::desc>& srcs) {
#if KILN_DNNL_V3
  return dnnl::concat::primitive_desc(engine(), dst, axis, srcs);
#else
  return dnnl::concat::primitive_desc(dst, axis, srcs, engine());
#endif
}

inline dnnl::sum::primitive_desc sum(const memory::desc& dst, const std::vector<float>& scales,
                                     const std::vector<memory::desc>& srcs) {
#if KILN_DNNL_V3
  return dnnl::sum::primitive_desc(engine(), dst, scales, srcs);
#else
  return dnnl::sum::primitive_desc(dst, scales, srcs, engine());
#endif
}

// --- recurrent layers (one layer, one direction): vanilla RNN, LSTM, and the linear-before-reset
// GRU (PyTorch's). Every operand descriptor is given (weights as format_tag::any); the backward's
// gradients take `diff`'s (the operands' own in float32; all float32 when the data is bfloat16,
// which is what both 2.6 and 3.x accept: their RNN data-type table).
enum class RnnCell { vanilla_tanh, vanilla_relu, lstm, lbr_gru };

struct RnnMds {
  memory::desc src_layer, src_iter, src_iter_c, wei_layer, wei_iter, bias, dst_layer, dst_iter, dst_iter_c;
};

struct RnnPrims {
  dnnl::rnn_primitive_desc_base fwd_pd, bwd_pd;
  dnnl::primitive fwd, bwd;  // bwd empty unless asked for
};

inline RnnPrims rnn_prims(RnnCell cell, prop_kind prop, dnnl::rnn_direction dir, const RnnMds& m, const RnnMds& g,
                          bool with_bwd) {
  RnnPrims p;
  const auto bwd_kind = prop_kind::backward;
  if (cell == RnnCell::lstm) {
    using F = dnnl::lstm_forward;
    using B = dnnl::lstm_backward;
#if KILN_DNNL_V3
    F::primitive_desc f(engine(), prop, dir, m.src_layer, m.src_iter, m.src_iter_c, m.wei_layer, m.wei_iter, m.bias,
                        m.dst_layer, m.dst_iter, m.dst_iter_c);
#else
    F::primitive_desc f(F::desc(prop, dir, m.src_layer, m.src_iter, m.src_iter_c, m.wei_layer, m.wei_iter, m.bias,
                                m.dst_layer, m.dst_iter, m.dst_iter_c),
                        engine());
#endif
    p.fwd_pd = f;
    p.fwd = F(f);
    if (!with_bwd) return p;
#if KILN_DNNL_V3
    B::primitive_desc b(engine(), bwd_kind, dir, m.src_layer, m.src_iter, m.src_iter_c, m.wei_layer, m.wei_iter,
                        m.bias, m.dst_layer, m.dst_iter, m.dst_iter_c, g.src_layer, g.src_iter, g.src_iter_c,
                        g.wei_layer, g.wei_iter, g.bias, g.dst_layer, g.dst_iter, g.dst_iter_c, f);
#else
    B::primitive_desc b(B::desc(bwd_kind, dir, m.src_layer, m.src_iter, m.src_iter_c, m.wei_layer, m.wei_iter, m.bias,
                                m.dst_layer, m.dst_iter, m.dst_iter_c, g.src_layer, g.src_iter, g.src_iter_c,
                                g.wei_layer, g.wei_iter, g.bias, g.dst_layer, g.dst_iter, g.dst_iter_c),
                        engine(), f);
#endif
    p.bwd_pd = b;
    p.bwd = B(b);
  } else if (cell == RnnCell::lbr_gru) {
    using F = dnnl::lbr_gru_forward;
    using B = dnnl::lbr_gru_backward;
#if KILN_DNNL_V3
    F::primitive_desc f(engine(), prop, dir, m.src_layer, m.src_iter, m.wei_layer, m.wei_iter, m.bias, m.dst_layer,
                        m.dst_iter);
#else
    F::primitive_desc f(F::desc(prop, dir, m.src_layer, m.src_iter, m.wei_layer, m.wei_iter, m.bias, m.dst_layer,
                                m.dst_iter),
                        engine());
#endif
    p.fwd_pd = f;
    p.fwd = F(f);
    if (!with_bwd) return p;
#if KILN_DNNL_V3
    B::primitive_desc b(engine(), bwd_kind, dir, m.src_layer, m.src_iter, m.wei_layer, m.wei_iter, m.bias, m.dst_layer,
                        m.dst_iter, g.src_layer, g.src_iter, g.wei_layer, g.wei_iter, g.bias, g.dst_layer, g.dst_iter,
                        f);
#else
    B::primitive_desc b(B::desc(bwd_kind, dir, m.src_layer, m.src_iter, m.wei_layer, m.wei_iter, m.bias, m.dst_layer,
                                m.dst_iter, g.src_layer, g.src_iter, g.wei_layer, g.wei_iter, g.bias, g.dst_layer,
                                g.dst_iter),
                        engine(), f);
#endif
    p.bwd_pd = b;
    p.bwd = B(b);
  } else {
    using F = dnnl::vanilla_rnn_forward;
    using B = dnnl::vanilla_rnn_backward;
    const algorithm act = cell == RnnCell::vanilla_relu ? algorithm::eltwise_relu : algorithm::eltwise_tanh;
#if KILN_DNNL_V3
    F::primitive_desc f(engine(), prop, act, dir, m.src_layer, m.src_iter, m.wei_layer, m.wei_iter, m.bias,
                        m.dst_layer, m.dst_iter);
#else
    F::primitive_desc f(F::desc(prop, act, dir, m.src_layer, m.src_iter, m.wei_layer, m.wei_iter, m.bias, m.dst_layer,
                                m.dst_iter),
                        engine());
#endif
    p.fwd_pd = f;
    p.fwd = F(f);
    if (!with_bwd) return p;
#if KILN_DNNL_V3
    B::primitive_desc b(engine(), bwd_kind, act, dir, m.src_layer, m.src_iter, m.wei_layer, m.wei_iter, m.bias,
                        m.dst_layer, m.dst_iter, g.src_layer, g.src_iter, g.wei_layer, g.wei_iter, g.bias,
                        g.dst_layer, g.dst_iter, f);
#else
    B::primitive_desc b(B::desc(bwd_kind, act, dir, m.src_layer, m.src_iter, m.wei_layer, m.wei_iter, m.bias,
                                m.dst_layer, m.dst_iter, g.src_layer, g.src_iter, g.wei_layer, g.wei_iter, g.bias,
                                g.dst_layer, g.dst_iter),
                        engine(), f);
#endif
    p.bwd_pd = b;
    p.bwd = B(b);
  }
  return p;
}

}  // namespace kiln::onednn::compat
