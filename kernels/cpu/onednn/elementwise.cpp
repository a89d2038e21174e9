// oneDNN eltwise activations. See elementwise.h.
//   Test: ctest --test-dir build -R test_onednn
#include "kernels/cpu/onednn/elementwise.h"

#include <sstream>

#include "kernels/cpu/onednn/dnnl_compat.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using alg = dnnl::algorithm;

bool unary_alg(UnaryOp op, alg& a) {
  switch (op) {
    case UnaryOp::relu:
    case UnaryOp::leaky_relu: a = alg::eltwise_relu; return true;
    case UnaryOp::sigmoid: a = alg::eltwise_logistic; return true;
    case UnaryOp::tanh: a = alg::eltwise_tanh; return true;
    case UnaryOp::gelu: a = alg::eltwise_gelu_erf; return true;
    default: return false;
  }
}

// The backward algorithm and whether it reads the forward output (b = y) instead of the input.
bool binary_alg(BinaryOp op, alg& a) {
  switch (op) {
    case BinaryOp::relu_bwd:
    case BinaryOp::leaky_relu_bwd: a = alg::eltwise_relu; return true;
    case BinaryOp::sigmoid_bwd: a = alg::eltwise_logistic_use_dst_for_bwd; return true;
    case BinaryOp::tanh_bwd: a = alg::eltwise_tanh_use_dst_for_bwd; return true;
    case BinaryOp::gelu_bwd: a = alg::eltwise_gelu_erf; return true;
    default: return false;
  }
}

bool dense(const StridedLoop& L) { return L.contiguous() && L.numel() > 0; }

struct EltEntry : Made {
  memory::desc data;
  dnnl::eltwise_forward::primitive_desc fwd_pd;
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward::primitive_desc bwd_pd;
  dnnl::eltwise_backward bwd;
};

// slope: leaky_relu's alpha (0 for the rest). backward: also build the backward primitive.
std::shared_ptr<const EltEntry> elt_entry(alg a, float slope, int64_t n, bool backward) {
  std::ostringstream key;
  key.precision(9);
  key << int(a) << " n" << n << " slope " << slope << (backward ? " bwd" : " fwd");
  return cached<EltEntry>(cache_key("eltwise", key.str()), [&] {
    EltEntry e;
    try {
      e.data = memory::desc({n}, memory::data_type::f32, memory::format_tag::a);
      e.fwd_pd = compat::eltwise_fwd(dnnl::prop_kind::forward_training, a, e.data, slope, 0.f);
      e.fwd = dnnl::eltwise_forward(e.fwd_pd);
      if (backward) {
        e.bwd_pd = compat::eltwise_bwd(a, e.data, slope, 0.f, e.fwd_pd);
        e.bwd = dnnl::eltwise_backward(e.bwd_pd);
      }
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

float slope_of(bool leaky, double alpha) { return leaky ? float(alpha) : 0.f; }

}  // namespace

bool supports_unary(const UnaryDesc& d) {
  alg a;
  return d.dtype == DType::float32 && unary_alg(d.op, a) && dense(d.loop) &&
         elt_entry(a, slope_of(d.op == UnaryOp::leaky_relu, d.alpha), d.loop.numel(), false)->ok;
}

void unary(const UnaryDesc& d, const void* src, void* dst) {
  alg a;
  KILN_CHECK(d.dtype == DType::float32 && unary_alg(d.op, a) && dense(d.loop), "unary (onednn): ", d.str(),
             " is not supported");
  auto e = elt_entry(a, slope_of(d.op == UnaryOp::leaky_relu, d.alpha), d.loop.numel(), false);
  KILN_CHECK(e->ok, "unary: oneDNN has no eltwise primitive for ", d.str(), ": ", e->why);
  KILN_DNNL("unary", d,
            execute(e->fwd, {{DNNL_ARG_SRC, user_memory(e->data, src)}, {DNNL_ARG_DST, user_memory(e->data, dst)}}));
}

bool supports_binary(const BinaryDesc& d) {
  alg a;
  return d.dtype == DType::float32 && binary_alg(d.op, a) && dense(d.loop) &&
         elt_entry(a, slope_of(d.op == BinaryOp::leaky_relu_bwd, d.alpha), d.loop.numel(), true)->ok;
}

void binary(const BinaryDesc& d, const void* a, const void* b, void* dst) {
  alg al;
  KILN_CHECK(d.dtype == DType::float32 && binary_alg(d.op, al) && dense(d.loop), "binary (onednn): ", d.str(),
             " is not supported");
  auto e = elt_entry(al, slope_of(d.op == BinaryOp::leaky_relu_bwd, d.alpha), d.loop.numel(), true);
  KILN_CHECK(e->ok, "binary: oneDNN has no eltwise backward primitive for ", d.str(), ": ", e->why);
  // a = upstream gradient; b = the saved input (relu, leaky_relu, gelu) or output (sigmoid, tanh).
  const bool from_dst = al == alg::eltwise_logistic_use_dst_for_bwd || al == alg::eltwise_tanh_use_dst_for_bwd;
  KILN_DNNL("binary", d,
            execute(e->bwd, {{from_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, user_memory(e->data, b)},
                             {DNNL_ARG_DIFF_DST, user_memory(e->data, a)},
                             {DNNL_ARG_DIFF_SRC, user_memory(e->data, dst)}}));
}

}  // namespace kiln::onednn
