// oneDNN recurrent layers. See rnn.h.
//   Test: ctest --test-dir build -R 'oracle|test_onednn'
#include "kernels/cpu/onednn/rnn.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/onednn/dnnl_compat.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;
using Floats = std::vector<float>;

compat::RnnCell cell_of(RnnMode m) {
  switch (m) {
    case RnnMode::lstm: return compat::RnnCell::lstm;
    case RnnMode::gru: return compat::RnnCell::lbr_gru;
    case RnnMode::rnn_relu: return compat::RnnCell::vanilla_relu;
    case RnnMode::rnn_tanh: break;
  }
  return compat::RnnCell::vanilla_tanh;
}

// oneDNN's bias has one vector per gate, plus b_hn for the LBR GRU.
int64_t bias_gates(const RnnDesc& d) { return d.mode == RnnMode::gru ? 4 : d.G(); }

// PyTorch's gate block of oneDNN's gate g: the GRU's oneDNN order u r o is PyTorch's z r n.
int64_t torch_gate(const RnnDesc& d, int64_t g) { return d.mode == RnnMode::gru && g < 2 ? 1 - g : g; }

struct RnnEntry : Made {
  compat::RnnMds md;
  memory::desc user_wl, user_wi;  // ldgoi: PyTorch's [G*H, in] in oneDNN's gate order
  compat::RnnPrims prims;
  Reorder wl_fwd, wi_fwd, wl_bwd, wi_bwd, dwl, dwi;
};

std::shared_ptr<const RnnEntry> rnn_entry(const RnnDesc& d) {
  return cached<RnnEntry>(cache_key("rnn", d.str()), [&] {
    RnnEntry e;
    try {
      const int64_t T = d.T, N = d.N, I = d.I, H = d.H, G = d.G();
      const bool lstm = d.mode == RnnMode::lstm;
      e.md.src_layer = memory::desc({T, N, I}, dt::f32, tag::tnc);
      e.md.src_iter = memory::desc({1, 1, N, H}, dt::f32, tag::ldnc);
      e.md.src_iter_c = lstm ? e.md.src_iter : memory::desc();
      e.md.wei_layer = memory::desc({1, 1, I, G, H}, dt::f32, tag::any);
      e.md.wei_iter = memory::desc({1, 1, H, G, H}, dt::f32, tag::any);
      e.md.bias = memory::desc({1, 1, bias_gates(d), H}, dt::f32, tag::ldgo);
      e.md.dst_layer = memory::desc({T, N, H}, dt::f32, tag::tnc);
      e.md.dst_iter = e.md.src_iter;
      e.md.dst_iter_c = e.md.src_iter_c;
      e.user_wl = memory::desc({1, 1, I, G, H}, dt::f32, tag::ldgoi);
      e.user_wi = memory::desc({1, 1, H, G, H}, dt::f32, tag::ldgoi);
      const auto prop = d.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
      const auto dir = d.reverse ? dnnl::rnn_direction::unidirectional_right2left
                                 : dnnl::rnn_direction::unidirectional_left2right;
      e.prims = compat::rnn_prims(cell_of(d.mode), prop, dir, e.md, d.training);
      e.wl_fwd = Reorder(e.user_wl, e.prims.fwd_pd.weights_layer_desc(), true);
      e.wi_fwd = Reorder(e.user_wi, e.prims.fwd_pd.weights_iter_desc(), true);
      if (d.training) {
        e.wl_bwd = Reorder(e.user_wl, e.prims.bwd_pd.weights_layer_desc(), true);
        e.wi_bwd = Reorder(e.user_wi, e.prims.bwd_pd.weights_iter_desc(), true);
        e.dwl = Reorder(e.prims.bwd_pd.diff_weights_layer_desc(), e.user_wl, true);
        e.dwi = Reorder(e.prims.bwd_pd.diff_weights_iter_desc(), e.user_wi, true);
      }
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

const RnnEntry& rnn_require(const RnnDesc& d, const char* op) {
  KILN_CHECK(supports_rnn(d), op, " (onednn): ", d.str(), " is not supported");
  auto e = rnn_entry(d);
  KILN_CHECK(e->ok, op, ": oneDNN has no RNN primitive for ", d.str(), ": ", e->why);
  return *e;
}

Floats floats(size_t n) { return Floats(std::max<size_t>(n, 1), 0.0f); }

// One of kiln's weight matrices [G*H, in] in oneDNN's gate order (a copy for the GRU, whose
// first two gates swap places; the caller's buffer otherwise).
const float* gates_in_dnnl_order(const RnnDesc& d, const void* w, int64_t in, Floats& copy) {
  const float* src = static_cast<const float*>(w);
  if (d.mode != RnnMode::gru) return src;
  const int64_t block = d.H * in;
  copy = floats(size_t(d.G() * block));
  for (int64_t g = 0; g < d.G(); ++g)
    std::memcpy(copy.data() + g * block, src + torch_gate(d, g) * block, size_t(block) * sizeof(float));
  return copy.data();
}

// The gradient of a weight matrix back in PyTorch's gate order (`from`: oneDNN's order).
void gates_to_torch_order(const RnnDesc& d, const float* from, int64_t in, void* to) {
  const int64_t block = d.H * in;
  float* dst = static_cast<float*>(to);
  for (int64_t g = 0; g < d.G(); ++g)
    std::memcpy(dst + torch_gate(d, g) * block, from + g * block, size_t(block) * sizeof(float));
}

// oneDNN's bias from kiln's two: b_ih + b_hh per gate; the LBR GRU's candidate keeps b_in and
// b_hn apart (its fourth gate).
Floats combined_bias(const RnnDesc& d, const void* b_ih, const void* b_hh) {
  const int64_t H = d.H;
  Floats b = floats(size_t(bias_gates(d) * H));
  if (!d.has_bias) return b;
  const float* bi = static_cast<const float*>(b_ih);
  const float* bh = static_cast<const float*>(b_hh);
  for (int64_t g = 0; g < d.G(); ++g) {
    const int64_t t = torch_gate(d, g);
    for (int64_t j = 0; j < H; ++j)
      b[size_t(g * H + j)] = bi[t * H + j] + (d.mode == RnnMode::gru && g == 2 ? 0.0f : bh[t * H + j]);
  }
  if (d.mode == RnnMode::gru)
    for (int64_t j = 0; j < H; ++j) b[size_t(3 * H + j)] = bh[2 * H + j];
  return b;
}

// What a training forward leaves for the backward.
struct State {
  RnnDesc d;
  std::shared_ptr<const RnnEntry> e;
  Floats dst, hn, cn, workspace;
};

// A weight operand of a primitive: the caller's ldgoi matrix, reordered into `buf` when the
// primitive picked another layout.
memory weight_operand(const Reorder& r, const memory::desc& user, const memory::desc& prim, const float* w,
                      Floats& buf) {
  memory u = user_memory(user, w);
  if (!r.needed) return u;
  buf = floats(prim.get_size() / sizeof(float) + 1);
  memory m(prim, engine(), buf.data());
  r.run(u, m);
  return m;
}

}  // namespace

bool supports_rnn(const RnnDesc& d) {
  return d.dtype == DType::float32 && !d.has_lengths && d.P == 0 && d.T > 0 && d.N > 0 && rnn_entry(d)->ok;
}

void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void*, const int64_t*,
             void* dst, void* hn, void* cn) {
  rnn_require(d, "rnn_fwd");
  const std::shared_ptr<const RnnEntry> e = rnn_entry(d);
  const bool lstm = d.mode == RnnMode::lstm;
  const int64_t NH = d.N * d.H;
  Floats wl_copy, wi_copy, wl_buf, wi_buf;
  const float* wl = gates_in_dnnl_order(d, w_ih, d.I, wl_copy);
  const float* wi = gates_in_dnnl_order(d, w_hh, d.H, wi_copy);
  Floats bias = combined_bias(d, b_ih, b_hh), zeros = floats(size_t(NH));
  auto state = d.training ? std::make_shared<State>() : nullptr;
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC_LAYER, user_memory(e->md.src_layer, src)},
      {DNNL_ARG_SRC_ITER, user_memory(e->md.src_iter, h0 ? h0 : zeros.data())},
      {DNNL_ARG_WEIGHTS_LAYER, weight_operand(e->wl_fwd, e->user_wl, e->prims.fwd_pd.weights_layer_desc(), wl, wl_buf)},
      {DNNL_ARG_WEIGHTS_ITER, weight_operand(e->wi_fwd, e->user_wi, e->prims.fwd_pd.weights_iter_desc(), wi, wi_buf)},
      {DNNL_ARG_BIAS, user_memory(e->md.bias, bias.data())}};
  void* out_dst = dst;
  void* out_hn = hn;
  void* out_cn = cn;
  if (state) {  // the backward reads the forward's outputs: keep copies of its own
    state->d = d;
    state->e = e;
    state->dst = floats(size_t(d.dst_elems()));
    state->hn = floats(size_t(NH));
    state->cn = floats(size_t(lstm ? NH : 0));
    state->workspace = floats(e->prims.fwd_pd.workspace_desc().get_size() / sizeof(float) + 1);
    out_dst = state->dst.data();
    out_hn = state->hn.data();
    out_cn = state->cn.data();
    args[DNNL_ARG_WORKSPACE] = memory(e->prims.fwd_pd.workspace_desc(), engine(), state->workspace.data());
  }
  args[DNNL_ARG_DST_LAYER] = user_memory(e->md.dst_layer, out_dst);
  args[DNNL_ARG_DST_ITER] = user_memory(e->md.dst_iter, out_hn);
  if (lstm) {
    args[DNNL_ARG_SRC_ITER_C] = user_memory(e->md.src_iter_c, c0 ? c0 : zeros.data());
    args[DNNL_ARG_DST_ITER_C] = user_memory(e->md.dst_iter_c, out_cn);
  }
  KILN_DNNL("rnn_fwd", d, execute(e->prims.fwd, args));
  if (!state) return;
  std::memcpy(dst, state->dst.data(), size_t(d.dst_elems()) * sizeof(float));
  std::memcpy(hn, state->hn.data(), size_t(NH) * sizeof(float));
  if (lstm) std::memcpy(cn, state->cn.data(), size_t(NH) * sizeof(float));
  payload.state = std::move(state);
}

void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void*) {
  KILN_CHECK(d.training, "rnn_bwd (onednn): ", d.str(), " is an inference descriptor");
  const RnnEntry& e = rnn_require(d, "rnn_bwd");
  auto state = std::static_pointer_cast<const State>(payload.state);
  if (!state || !same_problem(state->d, d)) {
    // No forward state of this problem: run the training forward (its outputs into scratch).
    KernelPayload own;
    Floats out = floats(size_t(d.dst_elems() + 2 * d.N * d.H));
    rnn_fwd(d, own, src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, out.data(), out.data() + d.dst_elems(),
            out.data() + d.dst_elems() + d.N * d.H);
    state = std::static_pointer_cast<const State>(own.state);
  }
  const bool lstm = d.mode == RnnMode::lstm;
  const int64_t NH = d.N * d.H, G = d.G(), H = d.H, I = d.I;
  Floats wl_copy, wi_copy, wl_buf, wi_buf;
  const float* wl = gates_in_dnnl_order(d, w_ih, I, wl_copy);
  const float* wi = gates_in_dnnl_order(d, w_hh, H, wi_copy);
  Floats bias = combined_bias(d, b_ih, b_hh), zeros = floats(size_t(std::max(NH, d.dst_elems())));
  const auto& pd = e.prims.bwd_pd;
  // Unwanted gradients still have to be computed: into scratch.
  Floats s_src = floats(diff_src ? 0 : size_t(d.src_elems())), s_h0 = floats(diff_h0 ? 0 : size_t(NH)),
         s_c0 = floats(diff_c0 || !lstm ? 0 : size_t(NH));
  // oneDNN adds the weight and bias gradients into these: zeroed.
  Floats dwl = floats(pd.diff_weights_layer_desc().get_size() / sizeof(float) + 1),
         dwi = floats(pd.diff_weights_iter_desc().get_size() / sizeof(float) + 1),
         dbias = floats(size_t(bias_gates(d) * H));
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC_LAYER, user_memory(e.md.src_layer, src)},
      {DNNL_ARG_SRC_ITER, user_memory(e.md.src_iter, h0 ? h0 : zeros.data())},
      {DNNL_ARG_WEIGHTS_LAYER, weight_operand(e.wl_bwd, e.user_wl, pd.weights_layer_desc(), wl, wl_buf)},
      {DNNL_ARG_WEIGHTS_ITER, weight_operand(e.wi_bwd, e.user_wi, pd.weights_iter_desc(), wi, wi_buf)},
      {DNNL_ARG_BIAS, user_memory(e.md.bias, bias.data())},
      {DNNL_ARG_DST_LAYER, user_memory(e.md.dst_layer, state->dst.data())},
      {DNNL_ARG_DST_ITER, user_memory(e.md.dst_iter, state->hn.data())},
      {DNNL_ARG_WORKSPACE, user_memory(e.prims.fwd_pd.workspace_desc(), state->workspace.data())},
      {DNNL_ARG_DIFF_DST_LAYER, user_memory(e.md.dst_layer, diff_dst ? diff_dst : zeros.data())},
      {DNNL_ARG_DIFF_DST_ITER, user_memory(e.md.dst_iter, diff_hn ? diff_hn : zeros.data())},
      {DNNL_ARG_DIFF_SRC_LAYER, user_memory(e.md.src_layer, diff_src ? diff_src : s_src.data())},
      {DNNL_ARG_DIFF_SRC_ITER, user_memory(e.md.src_iter, diff_h0 ? diff_h0 : s_h0.data())},
      {DNNL_ARG_DIFF_WEIGHTS_LAYER, memory(pd.diff_weights_layer_desc(), engine(), dwl.data())},
      {DNNL_ARG_DIFF_WEIGHTS_ITER, memory(pd.diff_weights_iter_desc(), engine(), dwi.data())},
      {DNNL_ARG_DIFF_BIAS, user_memory(e.md.bias, dbias.data())}};
  if (lstm) {
    args[DNNL_ARG_SRC_ITER_C] = user_memory(e.md.src_iter_c, c0 ? c0 : zeros.data());
    args[DNNL_ARG_DST_ITER_C] = user_memory(e.md.dst_iter_c, state->cn.data());
    args[DNNL_ARG_DIFF_DST_ITER_C] = user_memory(e.md.dst_iter_c, diff_cn ? diff_cn : zeros.data());
    args[DNNL_ARG_DIFF_SRC_ITER_C] = user_memory(e.md.src_iter_c, diff_c0 ? diff_c0 : s_c0.data());
  }
  KILN_DNNL("rnn_bwd", d, execute(e.prims.bwd, args));
  // Weight gradients: into ldgoi (PyTorch's [G*H, in] in oneDNN's gate order), then PyTorch's order.
  auto weights_out = [&](const Reorder& r, const memory::desc& grad_md, const memory::desc& user, Floats& grad,
                         int64_t in, void* out) {
    if (!out) return;
    const float* from = grad.data();
    Floats plain;
    if (r.needed) {
      plain = floats(size_t(G * H * in));
      memory g(grad_md, engine(), grad.data());
      memory u = user_memory(user, plain.data());
      r.run(g, u);
      from = plain.data();
    }
    gates_to_torch_order(d, from, in, out);
  };
  weights_out(e.dwl, pd.diff_weights_layer_desc(), e.user_wl, dwl, I, diff_w_ih);
  weights_out(e.dwi, pd.diff_weights_iter_desc(), e.user_wi, dwi, H, diff_w_hh);
  if (!d.has_bias) return;
  // The bias gradient: shared by b_ih and b_hh, except the GRU candidate's b_in / b_hn.
  auto* gi = static_cast<float*>(diff_b_ih);
  auto* gh = static_cast<float*>(diff_b_hh);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t t = torch_gate(d, g);
    for (int64_t j = 0; j < H; ++j) {
      const float v = dbias[size_t(g * H + j)];
      if (gi) gi[t * H + j] = v;
      if (gh) gh[t * H + j] = d.mode == RnnMode::gru && g == 2 ? dbias[size_t(3 * H + j)] : v;
    }
  }
}

}  // namespace kiln::onednn
