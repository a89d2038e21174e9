// oneDNN inner product on kiln's LinearDesc. See linear.h.
//   Test: ctest --test-dir build -R test_onednn_linear
#include "kernels/cpu/onednn/linear.h"

#include <algorithm>

#include "kernels/cpu/onednn/dnnl_compat.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Mds {
  memory::desc src, wei, bias, dst;
};

Mds mds(const LinearDesc& d) {
  return {memory::desc({d.n, d.ic}, dt::f32, tag::nc), memory::desc({d.oc, d.ic}, dt::f32, tag::oi),
          memory::desc({d.oc}, dt::f32, tag::x), memory::desc({d.n, d.oc}, dt::f32, tag::nc)};
}

bool basic_ok(const LinearDesc& d) { return d.dtype == DType::float32 && d.n > 0 && d.ic > 0 && d.oc > 0; }

struct FwdEntry : Made {
  Mds m;
  dnnl::inner_product_forward::primitive_desc pd;
  dnnl::inner_product_forward prim;
};

// Makes e.pd with make_pd() and, when `plain(e.pd)` holds, e.prim: plain layouts asked for, plain
// layouts required (a primitive that would want others is declined rather than fed reorders).
// e.why says why not.
template <class E, class MakePd, class Plain>
void build(E& e, MakePd make_pd, Plain plain) {
  try {
    e.pd = make_pd();
    if (!plain(e.pd)) {
      e.why = "oneDNN chose a non-plain layout";
      return;
    }
    e.prim = decltype(e.prim)(e.pd);
    e.ok = true;
  } catch (const dnnl::error& err) {
    e.why = err.what();
  }
}

// Forward training with or without bias (the bias-less one is also the backward hint).
std::shared_ptr<const FwdEntry> fwd_entry(const LinearDesc& d) {
  return cached<FwdEntry>(cache_key("ip_fwd", d.str()), [&] {
    FwdEntry e;
    using fwd = dnnl::inner_product_forward;
    build(
        e,
        [&] {
          e.m = mds(d);
          return compat::ip_fwd(dnnl::prop_kind::forward_training, e.m.src, e.m.wei, d.has_bias ? &e.m.bias : nullptr,
                                e.m.dst);
        },
        [&](const fwd::primitive_desc& pd) {
          return pd.src_desc() == e.m.src && pd.weights_desc() == e.m.wei && pd.dst_desc() == e.m.dst;
        });
    return e;
  });
}

struct BwdDataEntry : Made {
  Mds m;
  dnnl::inner_product_backward_data::primitive_desc pd;
  dnnl::inner_product_backward_data prim;
};

LinearDesc no_bias(LinearDesc d) {
  d.has_bias = false;
  return d;
}

std::shared_ptr<const BwdDataEntry> bwd_data_entry(const LinearDesc& d) {
  return cached<BwdDataEntry>(cache_key("ip_bwd_data", no_bias(d).str()), [&] {
    BwdDataEntry e;
    auto hint = fwd_entry(no_bias(d));
    if (!hint->ok) {
      e.why = hint->why;
      return e;
    }
    e.m = hint->m;
    using bwd = dnnl::inner_product_backward_data;
    build(
        e, [&] { return compat::ip_bwd_data(e.m.src, e.m.wei, e.m.dst, hint->pd); },
        [&](const bwd::primitive_desc& pd) {
          return pd.diff_src_desc() == e.m.src && pd.weights_desc() == e.m.wei && pd.diff_dst_desc() == e.m.dst;
        });
    return e;
  });
}

struct BwdWeightsEntry : Made {
  Mds m;
  bool bias = false;
  dnnl::inner_product_backward_weights::primitive_desc pd;
  dnnl::inner_product_backward_weights prim;
};

std::shared_ptr<const BwdWeightsEntry> bwd_weights_entry(const LinearDesc& d, bool bias) {
  return cached<BwdWeightsEntry>(cache_key(bias ? "ip_bwd_weights_bias" : "ip_bwd_weights", no_bias(d).str()), [&] {
    BwdWeightsEntry e;
    auto hint = fwd_entry(no_bias(d));
    if (!hint->ok) {
      e.why = hint->why;
      return e;
    }
    e.m = hint->m;
    e.bias = bias;
    using bwd = dnnl::inner_product_backward_weights;
    build(
        e,
        [&] {
          return compat::ip_bwd_weights(e.m.src, e.m.wei, bias ? &e.m.bias : nullptr, e.m.dst, hint->pd);
        },
        [&](const bwd::primitive_desc& pd) {
          return pd.src_desc() == e.m.src && pd.diff_weights_desc() == e.m.wei && pd.diff_dst_desc() == e.m.dst;
        });
    return e;
  });
}

template <class E>
const E& require(const std::shared_ptr<const E>& e, const char* op, const LinearDesc& d) {
  KILN_CHECK(e->ok, op, ": oneDNN has no primitive for ", d.str(), ": ", e->why);
  return *e;
}

}  // namespace

bool supports_linear(const LinearDesc& d) {
  return basic_ok(d) && fwd_entry(d)->ok && bwd_data_entry(d)->ok && bwd_weights_entry(d, d.has_bias)->ok;
}

void linear_fwd(const LinearDesc& d, const void* src, const void* wei, const void* bias, void* dst) {
  KILN_CHECK(basic_ok(d), "linear_fwd (onednn): unsupported ", d.str());
  KILN_CHECK(!d.has_bias || bias, "linear_fwd: ", d.str(), " has a bias but the bias pointer is null");
  const FwdEntry& e = require(fwd_entry(d), "linear_fwd", d);
  KILN_DNNL("linear_fwd", d, [&] {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, user_memory(e.m.src, src)},
                                         {DNNL_ARG_WEIGHTS, user_memory(e.m.wei, wei)},
                                         {DNNL_ARG_DST, user_memory(e.m.dst, dst)}};
    if (d.has_bias) args.emplace(DNNL_ARG_BIAS, user_memory(e.m.bias, bias));
    execute(e.prim, args);
  }());
}

void linear_bwd_data(const LinearDesc& d, const void* diff_dst, const void* wei, void* diff_src) {
  KILN_CHECK(basic_ok(d), "linear_bwd_data (onednn): unsupported ", d.str());
  const BwdDataEntry& e = require(bwd_data_entry(d), "linear_bwd_data", d);
  KILN_DNNL("linear_bwd_data", d,
            execute(e.prim, {{DNNL_ARG_DIFF_DST, user_memory(e.m.dst, diff_dst)},
                             {DNNL_ARG_WEIGHTS, user_memory(e.m.wei, wei)},
                             {DNNL_ARG_DIFF_SRC, user_memory(e.m.src, diff_src)}}));
}

void linear_bwd_weights(const LinearDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias) {
  if (!diff_wei && !diff_bias) return;
  KILN_CHECK(basic_ok(d), "linear_bwd_weights (onednn): unsupported ", d.str());
  if (!diff_wei) {
    // Only the bias gradient: the primitive would need src (which the caller need not keep) and
    // compute a weight gradient to throw away; a column sum is all it takes.
    const auto* dd = static_cast<const float*>(diff_dst);
    auto* db = static_cast<float*>(diff_bias);
    std::fill(db, db + d.oc, 0.f);
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t o = 0; o < d.oc; ++o) db[o] += dd[i * d.oc + o];
    return;
  }
  const BwdWeightsEntry& e = require(bwd_weights_entry(d, diff_bias != nullptr), "linear_bwd_weights", d);
  KILN_DNNL("linear_bwd_weights", d, [&] {
    memory dw = user_memory(e.m.wei, diff_wei);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, user_memory(e.m.src, src)},
                                         {DNNL_ARG_DIFF_DST, user_memory(e.m.dst, diff_dst)},
                                         {DNNL_ARG_DIFF_WEIGHTS, dw}};
    if (e.bias) args.emplace(DNNL_ARG_DIFF_BIAS, user_memory(e.m.bias, diff_bias));
    execute(e.prim, args);
  }());
}

}  // namespace kiln::onednn
