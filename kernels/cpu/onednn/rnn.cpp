// oneDNN recurrent layers. See rnn.h.
//   Test: ctest --test-dir build -R 'oracle|test_onednn|test_rnn_layers'
#include "kernels/cpu/onednn/rnn.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/common/half.h"
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

bool is_bf16(const RnnDesc& d) { return d.dtype == DType::bfloat16; }

struct RnnEntry : Made {
  compat::RnnMds md;    // the operands: float32, or bfloat16 data with float32 bias and cell state
  compat::RnnMds diff;  // the gradients: always float32
  memory::desc user_wl, user_wi;    // ldgoi: PyTorch's [G*H, in] in oneDNN's gate order, the data type
  memory::desc user_dwl, user_dwi;  // the same in float32 (the weight gradients)
  compat::RnnPrims prims;
  Reorder wl_fwd, wi_fwd, wl_bwd, wi_bwd, dwl, dwi;
};

std::shared_ptr<const RnnEntry> rnn_entry(const RnnDesc& d) {
  return cached<RnnEntry>(cache_key("rnn", d.str()), [&] {
    RnnEntry e;
    try {
      const int64_t T = d.T, N = d.N, I = d.I, H = d.H, G = d.G();
      const bool lstm = d.mode == RnnMode::lstm;
      // bfloat16: layer data, hidden state and weights in bfloat16, the bias and the LSTM cell
      // state in float32 (oneDNN accumulates the gates in float32 and keeps c there; it takes no
      // float32 hidden state with bfloat16 layers), every gradient in float32.
      const dt t = is_bf16(d) ? dt::bf16 : dt::f32;
      auto operands = [&](dt data) {
        compat::RnnMds m;
        m.src_layer = memory::desc({T, N, I}, data, tag::tnc);
        m.src_iter = memory::desc({1, 1, N, H}, data, tag::ldnc);
        m.src_iter_c = lstm ? memory::desc({1, 1, N, H}, dt::f32, tag::ldnc) : memory::desc();
        m.wei_layer = memory::desc({1, 1, I, G, H}, data, tag::any);
        m.wei_iter = memory::desc({1, 1, H, G, H}, data, tag::any);
        m.bias = memory::desc({1, 1, bias_gates(d), H}, dt::f32, tag::ldgo);
        m.dst_layer = memory::desc({T, N, H}, data, tag::tnc);
        m.dst_iter = m.src_iter;
        m.dst_iter_c = m.src_iter_c;
        return m;
      };
      e.md = operands(t);
      e.diff = operands(dt::f32);
      e.user_wl = memory::desc({1, 1, I, G, H}, t, tag::ldgoi);
      e.user_wi = memory::desc({1, 1, H, G, H}, t, tag::ldgoi);
      e.user_dwl = memory::desc({1, 1, I, G, H}, dt::f32, tag::ldgoi);
      e.user_dwi = memory::desc({1, 1, H, G, H}, dt::f32, tag::ldgoi);
      const auto prop = d.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
      const auto dir = d.reverse ? dnnl::rnn_direction::unidirectional_right2left
                                 : dnnl::rnn_direction::unidirectional_left2right;
      e.prims = compat::rnn_prims(cell_of(d.mode), prop, dir, e.md, e.diff, d.training);
      e.wl_fwd = Reorder(e.user_wl, e.prims.fwd_pd.weights_layer_desc(), true);
      e.wi_fwd = Reorder(e.user_wi, e.prims.fwd_pd.weights_iter_desc(), true);
      if (d.training) {
        e.wl_bwd = Reorder(e.user_wl, e.prims.bwd_pd.weights_layer_desc(), true);
        e.wi_bwd = Reorder(e.user_wi, e.prims.bwd_pd.weights_iter_desc(), true);
        e.dwl = Reorder(e.prims.bwd_pd.diff_weights_layer_desc(), e.user_dwl, true);
        e.dwi = Reorder(e.prims.bwd_pd.diff_weights_iter_desc(), e.user_dwi, true);
      }
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

const RnnEntry& rnn_require(const RnnDesc& d, const char* op) {
  KILN_CHECK(supports_rnn(d), op, " (onednn): ", d.str(), " is not supported",
             is_bf16(d) && rnn_bf16_unavailable() ? std::string(": ") + rnn_bf16_unavailable() : std::string());
  auto e = rnn_entry(d);
  KILN_CHECK(e->ok, op, ": oneDNN has no RNN primitive for ", d.str(), ": ", e->why);
  return *e;
}

Floats floats(size_t n) { return Floats(std::max<size_t>(n, 1), 0.0f); }
// A zeroed buffer of at least `bytes` (float-aligned; zero bits are zero in bfloat16 too).
Floats bytes_of(size_t bytes) { return floats((bytes + sizeof(float) - 1) / sizeof(float)); }

// Element i of a buffer of kiln's data type (float32 or bfloat16) as a float, and back.
float load(const void* p, DType t, int64_t i) {
  return t == DType::bfloat16 ? float(static_cast<const BFloat16*>(p)[i]) : static_cast<const float*>(p)[i];
}
void store(void* p, DType t, int64_t i, float v) {
  if (t == DType::bfloat16)
    static_cast<BFloat16*>(p)[i] = BFloat16(v);
  else
    static_cast<float*>(p)[i] = v;
}

// A float32 operand from a caller's buffer of d.dtype: the buffer itself in float32, else a
// converted copy in `buf` (null: zeros).
const float* as_f32(const RnnDesc& d, const void* p, int64_t n, Floats& buf) {
  if (p && !is_bf16(d)) return static_cast<const float*>(p);
  buf = floats(size_t(n));
  if (p)
    for (int64_t i = 0; i < n; ++i) buf[size_t(i)] = load(p, d.dtype, i);
  return buf.data();
}

// A float32 result for a caller's buffer of d.dtype: the buffer itself in float32, else `buf`
// (also when the caller wants none: scratch); back_to() then rounds it into the caller's.
float* out_f32(const RnnDesc& d, void* p, int64_t n, Floats& buf) {
  if (p && !is_bf16(d)) return static_cast<float*>(p);
  buf = floats(size_t(n));
  return buf.data();
}
void back_to(const RnnDesc& d, const Floats& buf, void* p, int64_t n) {
  if (!p || !is_bf16(d)) return;
  for (int64_t i = 0; i < n; ++i) store(p, d.dtype, i, buf[size_t(i)]);
}

// One of kiln's weight matrices [G*H, in] in oneDNN's gate order (a copy for the GRU, whose
// first two gates swap places; the caller's buffer otherwise). Elements of d.dtype.
const void* gates_in_dnnl_order(const RnnDesc& d, const void* w, int64_t in, Floats& copy) {
  if (d.mode != RnnMode::gru) return w;
  const size_t es = element_size(d.dtype), block = size_t(d.H * in) * es;
  copy = bytes_of(size_t(d.G()) * block);
  const char* src = static_cast<const char*>(w);
  char* dst = reinterpret_cast<char*>(copy.data());
  for (int64_t g = 0; g < d.G(); ++g) std::memcpy(dst + size_t(g) * block, src + size_t(torch_gate(d, g)) * block, block);
  return copy.data();
}

// The float32 gradient of a weight matrix back in PyTorch's gate order and kiln's data type
// (`from`: oneDNN's order), rounded once.
void gates_to_torch_order(const RnnDesc& d, const float* from, int64_t in, void* to) {
  const int64_t block = d.H * in;
  for (int64_t g = 0; g < d.G(); ++g) {
    const int64_t at = torch_gate(d, g) * block;
    if (!is_bf16(d)) {
      std::memcpy(static_cast<float*>(to) + at, from + g * block, size_t(block) * sizeof(float));
      continue;
    }
    for (int64_t i = 0; i < block; ++i) store(to, d.dtype, at + i, from[g * block + i]);
  }
}

// oneDNN's bias (float32) from kiln's two: b_ih + b_hh per gate; the LBR GRU's candidate keeps
// b_in and b_hn apart (its fourth gate).
Floats combined_bias(const RnnDesc& d, const void* b_ih, const void* b_hh) {
  const int64_t H = d.H;
  Floats b = floats(size_t(bias_gates(d) * H));
  if (!d.has_bias) return b;
  for (int64_t g = 0; g < d.G(); ++g) {
    const int64_t t = torch_gate(d, g);
    for (int64_t j = 0; j < H; ++j)
      b[size_t(g * H + j)] =
          load(b_ih, d.dtype, t * H + j) + (d.mode == RnnMode::gru && g == 2 ? 0.0f : load(b_hh, d.dtype, t * H + j));
  }
  if (d.mode == RnnMode::gru)
    for (int64_t j = 0; j < H; ++j) b[size_t(3 * H + j)] = load(b_hh, d.dtype, 2 * H + j);
  return b;
}

// What a training forward leaves for the backward: dst and hn in d.dtype, cn in float32 (the
// cell state as oneDNN kept it, not rounded to the caller's type), the workspace.
struct State {
  RnnDesc d;
  std::shared_ptr<const RnnEntry> e;
  Floats dst, hn, cn, workspace;
};

// A weight operand of a primitive: the caller's ldgoi matrix, reordered into `buf` when the
// primitive picked another layout.
memory weight_operand(const Reorder& r, const memory::desc& user, const memory::desc& prim, const void* w,
                      Floats& buf) {
  memory u = user_memory(user, w);
  if (!r.needed) return u;
  buf = bytes_of(prim.get_size() + sizeof(float));
  memory m(prim, engine(), buf.data());
  r.run(u, m);
  return m;
}

}  // namespace

const char* rnn_bf16_unavailable() {
  static const char* why = []() -> const char* {
    engine();  // KILN_CPU_ISA's cap applies first
    // cpu_isa values are bit sets in oneDNN 2.x and 3.x: an ISA includes avx512_core_bf16 when
    // it has all of its bits (AMX and AVX10.1 do; AVX2 with its bfloat16 conversions does not).
    const unsigned have = unsigned(dnnl::get_effective_cpu_isa());
    const unsigned need = unsigned(dnnl::cpu_isa::avx512_core_bf16);
    if ((have & need) == need) return nullptr;
    return "the CPU (or the ISA oneDNN is capped to) has no AVX512_BF16: oneDNN would emulate bfloat16, "
           "so bfloat16 layers run in float32";
  }();
  return why;
}

bool supports_rnn(const RnnDesc& d) {
  const bool dtype_ok = d.dtype == DType::float32 || (is_bf16(d) && !rnn_bf16_unavailable());
  return dtype_ok && !d.has_lengths && d.P == 0 && d.T > 0 && d.N > 0 && rnn_entry(d)->ok;
}

void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void*, const int64_t*,
             void* dst, void* hn, void* cn) {
  rnn_require(d, "rnn_fwd");
  const std::shared_ptr<const RnnEntry> e = rnn_entry(d);
  const bool lstm = d.mode == RnnMode::lstm;
  const int64_t NH = d.N * d.H;
  const size_t es = element_size(d.dtype);
  Floats wl_copy, wi_copy, wl_buf, wi_buf, c0_buf, cn_buf;
  const void* wl = gates_in_dnnl_order(d, w_ih, d.I, wl_copy);
  const void* wi = gates_in_dnnl_order(d, w_hh, d.H, wi_copy);
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
  float* out_cn = lstm ? out_f32(d, cn, NH, cn_buf) : nullptr;
  if (state) {  // the backward reads the forward's outputs: keep copies of its own
    state->d = d;
    state->e = e;
    state->dst = bytes_of(size_t(d.dst_elems()) * es);
    state->hn = bytes_of(size_t(NH) * es);
    state->cn = floats(size_t(lstm ? NH : 0));
    state->workspace = bytes_of(e->prims.fwd_pd.workspace_desc().get_size() + sizeof(float));
    out_dst = state->dst.data();
    out_hn = state->hn.data();
    out_cn = state->cn.data();
    args[DNNL_ARG_WORKSPACE] = memory(e->prims.fwd_pd.workspace_desc(), engine(), state->workspace.data());
  }
  args[DNNL_ARG_DST_LAYER] = user_memory(e->md.dst_layer, out_dst);
  args[DNNL_ARG_DST_ITER] = user_memory(e->md.dst_iter, out_hn);
  if (lstm) {
    args[DNNL_ARG_SRC_ITER_C] = user_memory(e->md.src_iter_c, as_f32(d, c0, NH, c0_buf));
    args[DNNL_ARG_DST_ITER_C] = user_memory(e->md.dst_iter_c, out_cn);
  }
  KILN_DNNL("rnn_fwd", d, execute(e->prims.fwd, args));
  if (lstm) {
    // The cell state reaches the caller in its type (rounded once from oneDNN's float32).
    if (state) {
      if (is_bf16(d))
        back_to(d, state->cn, cn, NH);
      else
        std::memcpy(cn, state->cn.data(), size_t(NH) * sizeof(float));
    } else {
      back_to(d, cn_buf, cn, NH);
    }
  }
  if (!state) return;
  std::memcpy(dst, state->dst.data(), size_t(d.dst_elems()) * es);
  std::memcpy(hn, state->hn.data(), size_t(NH) * es);
  payload.state = std::move(state);
}

void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void*) {
  KILN_CHECK(d.training, "rnn_bwd (onednn): ", d.str(), " is an inference descriptor");
  const RnnEntry& e = rnn_require(d, "rnn_bwd");
  const size_t es = element_size(d.dtype);
  auto state = std::static_pointer_cast<const State>(payload.state);
  if (!state || !same_problem(state->d, d)) {
    // No forward state of this problem: run the training forward (its outputs into scratch).
    KernelPayload own;
    Floats dst_s = bytes_of(size_t(d.dst_elems()) * es), hn_s = bytes_of(size_t(d.N * d.H) * es),
           cn_s = bytes_of(size_t(d.N * d.H) * es);
    rnn_fwd(d, own, src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, dst_s.data(), hn_s.data(), cn_s.data());
    state = std::static_pointer_cast<const State>(own.state);
  }
  const bool lstm = d.mode == RnnMode::lstm;
  const int64_t NH = d.N * d.H, G = d.G(), H = d.H, I = d.I;
  Floats wl_copy, wi_copy, wl_buf, wi_buf;
  const void* wl = gates_in_dnnl_order(d, w_ih, I, wl_copy);
  const void* wi = gates_in_dnnl_order(d, w_hh, H, wi_copy);
  Floats bias = combined_bias(d, b_ih, b_hh), zeros = floats(size_t(NH));
  const auto& pd = e.prims.bwd_pd;
  // Every gradient is float32 inside: bfloat16 ones are converted in and rounded out once.
  // Unwanted gradients still have to be computed: into scratch.
  Floats c0_buf, ddst_buf, dhn_buf, dcn_buf, dsrc_buf, dh0_buf, dc0_buf;
  float* dsrc = out_f32(d, diff_src, d.src_elems(), dsrc_buf);
  float* dh0 = out_f32(d, diff_h0, NH, dh0_buf);
  float* dc0 = lstm ? out_f32(d, diff_c0, NH, dc0_buf) : nullptr;
  // oneDNN adds the weight and bias gradients into these: zeroed.
  Floats dwl = bytes_of(pd.diff_weights_layer_desc().get_size() + sizeof(float)),
         dwi = bytes_of(pd.diff_weights_iter_desc().get_size() + sizeof(float)),
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
      {DNNL_ARG_DIFF_DST_LAYER, user_memory(e.diff.dst_layer, as_f32(d, diff_dst, d.dst_elems(), ddst_buf))},
      {DNNL_ARG_DIFF_DST_ITER, user_memory(e.diff.dst_iter, as_f32(d, diff_hn, NH, dhn_buf))},
      {DNNL_ARG_DIFF_SRC_LAYER, user_memory(e.diff.src_layer, dsrc)},
      {DNNL_ARG_DIFF_SRC_ITER, user_memory(e.diff.src_iter, dh0)},
      {DNNL_ARG_DIFF_WEIGHTS_LAYER, memory(pd.diff_weights_layer_desc(), engine(), dwl.data())},
      {DNNL_ARG_DIFF_WEIGHTS_ITER, memory(pd.diff_weights_iter_desc(), engine(), dwi.data())},
      {DNNL_ARG_DIFF_BIAS, user_memory(e.diff.bias, dbias.data())}};
  if (lstm) {
    args[DNNL_ARG_SRC_ITER_C] = user_memory(e.md.src_iter_c, as_f32(d, c0, NH, c0_buf));
    args[DNNL_ARG_DST_ITER_C] = user_memory(e.md.dst_iter_c, state->cn.data());
    args[DNNL_ARG_DIFF_DST_ITER_C] = user_memory(e.diff.dst_iter_c, as_f32(d, diff_cn, NH, dcn_buf));
    args[DNNL_ARG_DIFF_SRC_ITER_C] = user_memory(e.diff.src_iter_c, dc0);
  }
  KILN_DNNL("rnn_bwd", d, execute(e.prims.bwd, args));
  back_to(d, dsrc_buf, diff_src, d.src_elems());
  back_to(d, dh0_buf, diff_h0, NH);
  if (lstm) back_to(d, dc0_buf, diff_c0, NH);
  // Weight gradients: into float32 ldgoi (PyTorch's [G*H, in] in oneDNN's gate order), then
  // PyTorch's order in kiln's type.
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
  weights_out(e.dwl, pd.diff_weights_layer_desc(), e.user_dwl, dwl, I, diff_w_ih);
  weights_out(e.dwi, pd.diff_weights_iter_desc(), e.user_dwi, dwi, H, diff_w_hh);
  if (!d.has_bias) return;
  // The bias gradient: shared by b_ih and b_hh, except the GRU candidate's b_in / b_hn.
  for (int64_t g = 0; g < G; ++g) {
    const int64_t t = torch_gate(d, g);
    for (int64_t j = 0; j < H; ++j) {
      const float v = dbias[size_t(g * H + j)];
      if (diff_b_ih) store(diff_b_ih, d.dtype, t * H + j, v);
      if (diff_b_hh) store(diff_b_hh, d.dtype, t * H + j, d.mode == RnnMode::gru && g == 2 ? dbias[size_t(3 * H + j)] : v);
    }
  }
}

}  // namespace kiln::onednn
