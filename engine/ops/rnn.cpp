// Recurrent networks: argument checks, the stacking of layers and directions, and the autograd
// node of one layer in one direction (kernel_op::rnn_fwd / rnn_bwd, whose forward leaves its
// gates and states in a payload for the backward).
//   ctest --test-dir build -R rnn
#include "engine/ops/rnn.h"

#include <memory>
#include <string>
#include <utility>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/graph_op.h"
#include "engine/ops/dropout.h"
#include "engine/ops/shape.h"

namespace kiln::ops {
namespace {

const char* backward_name(RnnMode m) {
  switch (m) {
    case RnnMode::lstm: return "LstmBackward";
    case RnnMode::gru: return "GruBackward";
    case RnnMode::rnn_relu: return "RnnReluBackward";
    case RnnMode::rnn_tanh: break;
  }
  return "RnnTanhBackward";
}

const void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* out_ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
Tensor plain(const Tensor& t) { return t.defined() ? t.contiguous().detach() : Tensor(); }

// One layer in one direction: x [T, N, I]; h0 [N, Hout], c0 [N, H] or undefined; lengths int64
// on x's device or undefined. Returns {y [T, N, Hout], hn, cn (lstm)}.
std::vector<Tensor> layer(RnnDesc d, const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                          const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& w_hr,
                          const Tensor& lengths) {
  const Device dev = x.device();
  const TensorOptions opts = TensorOptions(x.dtype()).with_device(dev);
  const bool lstm = d.mode == RnnMode::lstm;
  const Tensor xc = plain(x), h0c = plain(h0), c0c = plain(c0), wih = plain(w_ih), whh = plain(w_hh),
               bih = plain(b_ih), bhh = plain(b_hh), whr = plain(w_hr);
  const int64_t* len = lengths.defined() ? lengths.data<int64_t>() : nullptr;
  Tensor y = empty({d.T, d.N, d.hout()}, opts), hn = empty({d.N, d.hout()}, opts);
  Tensor cn = lstm ? empty({d.N, d.H}, opts) : Tensor();
  const std::vector<Tensor> inputs = {x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr};
  const bool grad = autograd::needs_grad(inputs);
  d.training = grad;
  auto payload = std::make_shared<KernelPayload>();
  dispatch_with<kernel_op::rnn_fwd>(dev.type, d, *payload, xc.data_ptr(), ptr(h0c), ptr(c0c), wih.data_ptr(),
                                    whh.data_ptr(), ptr(bih), ptr(bhh), ptr(whr), len, y.data_ptr(), hn.data_ptr(),
                                    out_ptr(cn));
  if (!grad) return {y, hn, cn};
  std::vector<Tensor*> outs = {&y, &hn};
  if (lstm) outs.push_back(&cn);
  std::vector<bool> need;
  for (const Tensor& t : inputs) need.push_back(t.defined() && t.requires_grad());
  autograd::record_fn(
      backward_name(d.mode), inputs, outs,
      [d, dev, opts, xc, h0c, c0c, wih, whh, bih, bhh, whr, lengths, payload, need](std::vector<Tensor>& g) {
        // The kernels read the gradients in the layer's dtype (a half layer's arrive in it).
        const Tensor gy = g[0].to(d.dtype).contiguous(), ghn = g[1].to(d.dtype).contiguous();
        const Tensor gcn = d.mode == RnnMode::lstm ? g[2].to(d.dtype).contiguous() : Tensor();
        auto grad_of = [&](size_t i, const Tensor& like) {
          return need[i] ? empty(like.sizes(), opts) : Tensor();
        };
        Tensor gx = grad_of(0, xc), gh0 = grad_of(1, h0c), gc0 = grad_of(2, c0c), gwih = grad_of(3, wih),
               gwhh = grad_of(4, whh), gbih = grad_of(5, bih), gbhh = grad_of(6, bhh), gwhr = grad_of(7, whr);
        const int64_t* len = lengths.defined() ? lengths.data<int64_t>() : nullptr;
        dispatch_with<kernel_op::rnn_bwd>(dev.type, d, *payload, xc.data_ptr(), ptr(h0c), ptr(c0c), wih.data_ptr(),
                                          whh.data_ptr(), ptr(bih), ptr(bhh), ptr(whr), len, gy.data_ptr(),
                                          ghn.data_ptr(), ptr(gcn), out_ptr(gx), out_ptr(gh0), out_ptr(gc0),
                                          out_ptr(gwih), out_ptr(gwhh), out_ptr(gbih), out_ptr(gbhh), out_ptr(gwhr));
        return std::vector<Tensor>{gx, gh0, gc0, gwih, gwhh, gbih, gbhh, gwhr};
      });
  return {y, hn, cn};
}

std::string where(const char* what, int64_t layer, int64_t dir) {
  return std::string(what) + "_l" + std::to_string(layer) + (dir ? "_reverse" : "");
}

void check_param(const char* op, const Tensor& t, const std::string& name, const Shape& want, const Tensor& input) {
  KILN_CHECK(t.defined(), op, ": parameter ", name, " is undefined");
  KILN_CHECK(t.sizes() == want, op, ": parameter ", name, " has shape ", shape_str(t.sizes()), ", expected ",
             shape_str(want));
  KILN_CHECK(t.dtype() == input.dtype(), op, ": parameter ", name, " is ", t.dtype(), ", the input ", input.dtype());
  KILN_CHECK(t.device() == input.device(), op, ": parameter ", name, " is on ", t.device(), ", the input on ",
             input.device());
}

void check_state(const char* op, const char* name, const Tensor& t, const Shape& want, const Tensor& input) {
  if (!t.defined()) return;
  KILN_CHECK(t.sizes() == want, op, ": ", name, " has shape ", shape_str(t.sizes()), ", expected ", shape_str(want));
  KILN_CHECK(t.dtype() == input.dtype(), op, ": ", name, " is ", t.dtype(), ", the input ", input.dtype());
  KILN_CHECK(t.device() == input.device(), op, ": ", name, " is on ", t.device(), ", the input on ", input.device());
}

// The lengths on the input's device, checked: int64 (or int32), [N], each in [1, L].
Tensor checked_lengths(const char* op, const Tensor& lengths, int64_t N, int64_t L, Device dev) {
  if (!lengths.defined()) return Tensor();
  KILN_CHECK(lengths.dtype() == DType::int64 || lengths.dtype() == DType::int32, op,
             ": lengths must be int64 (or int32), got ", lengths.dtype());
  KILN_CHECK(lengths.dim() == 1 && lengths.size(0) == N, op, ": lengths has shape ", shape_str(lengths.sizes()),
             ", expected [", N, "] (one per sequence of the batch)");
  const std::vector<int64_t> v = lengths.to(Device()).to(DType::int64).to_vector_of<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    KILN_CHECK(v[i] >= 1 && v[i] <= L, op, ": lengths[", i, "] = ", v[i], " is outside [1, ", L,
               "] (the sequence length)");
  return lengths.to(DType::int64).to(dev).contiguous();
}

// The descriptor of layer l, direction dir (input width in_size).
RnnDesc layer_desc(const RnnOptions& o, DType t, int64_t L, int64_t N, int64_t in_size, int64_t H, int64_t dir,
                   bool has_lengths) {
  RnnDesc d;
  d.dtype = t;
  d.mode = o.mode;
  d.T = L, d.N = N, d.I = in_size, d.H = H, d.P = o.proj_size;
  d.reverse = dir == 1 || o.reverse;
  d.has_bias = o.bias;
  d.has_lengths = has_lengths;
  return d;
}

// Whether a half-type call runs as it is: every state and parameter in the input's dtype (a call
// mixing them, half data with float32 weights, runs in float32 as it always did) and, for every
// layer and direction, a forward kernel taking its descriptor (and a backward one where autograd
// will ask for it) on the input's device. Malformed arguments say yes: rnn_layers() then names
// what is wrong.
bool half_kernels_take(const Tensor& input, const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& params,
                       const RnnOptions& o, const Tensor& lengths) {
  if (!input.defined() || (input.dim() != 2 && input.dim() != 3) || o.num_layers < 1 || params.empty()) return true;
  const DType t = input.dtype();
  for (const Tensor* s : {&h0, &c0})
    if (s->defined() && s->dtype() != t) return false;
  for (const Tensor& p : params)
    if (p.defined() && p.dtype() != t) return false;
  // [L, I] unbatched, [N, L, I] batch_first, else [L, N, I].
  const bool unbatched = input.dim() == 2, bf = !unbatched && o.batch_first;
  const int64_t L = input.size(bf ? 1 : 0), N = unbatched ? 1 : input.size(bf ? 0 : 1);
  const int64_t I = input.size(input.dim() - 1), D = o.bidirectional ? 2 : 1;
  const int64_t per = 2 + (o.bias ? 2 : 0) + (o.proj_size > 0 ? 1 : 0);
  const int64_t G = rnn_gate_count(o.mode);
  if (int64_t(params.size()) != o.num_layers * D * per || !params[0].defined() || params[0].dim() != 2 ||
      params[0].size(0) % G != 0)
    return true;
  const int64_t H = params[0].size(0) / G, Ho = o.proj_size > 0 ? o.proj_size : H;
  const DeviceType dev = input.device().type;
  // A layer trains (its forward keeps state for a backward) when anything before it needs a
  // gradient: the input, the initial states, its own or an earlier layer's parameters.
  std::vector<Tensor> upstream = {input, h0, c0};
  for (int64_t l = 0; l < o.num_layers; ++l) {
    upstream.insert(upstream.end(), params.begin() + l * D * per, params.begin() + (l + 1) * D * per);
    const bool grad = autograd::needs_grad(upstream);
    for (int64_t dir = 0; dir < D; ++dir) {
      RnnDesc d = layer_desc(o, t, L, N, l == 0 ? I : D * Ho, H, dir, lengths.defined());
      d.training = grad;
      if (!find_kernel<kernel_op::rnn_fwd>(dev, d) || (grad && !find_kernel<kernel_op::rnn_bwd>(dev, d))) return false;
    }
  }
  return true;
}

RnnOutput rnn_layers(const Tensor& input, const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& params,
                     const RnnOptions& o, const Tensor& lengths) {
  const char* op = rnn_mode_name(o.mode);
  KILN_CHECK(input.defined(), op, ": undefined input");
  KILN_CHECK(input.is_floating_point(), op, ": needs a floating-point input, got ", input.dtype());
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, op, ": input ", shape_str(input.sizes()),
             " must be [L, N, I], [N, L, I] (batch_first) or [L, I] (unbatched)");
  KILN_CHECK(o.num_layers >= 1, op, ": num_layers ", o.num_layers, " must be at least 1");
  KILN_CHECK(o.dropout >= 0 && o.dropout <= 1, op, ": dropout ", o.dropout, " outside [0, 1]");
  KILN_CHECK(o.proj_size >= 0, op, ": negative proj_size ", o.proj_size);
  KILN_CHECK(o.proj_size == 0 || o.mode == RnnMode::lstm, op, ": proj_size exists for lstm only");
  KILN_CHECK(!(o.reverse && o.bidirectional), op, ": reverse is one direction; bidirectional runs both");
  const bool unbatched = input.dim() == 2;
  const Tensor x3 = unbatched ? input.unsqueeze(1) : (o.batch_first ? input.transpose(0, 1) : input);
  const int64_t L = x3.size(0), N = x3.size(1), I = x3.size(2), D = o.bidirectional ? 2 : 1;
  KILN_CHECK(L >= 1 && N >= 1 && I >= 1, op, ": empty input ", shape_str(input.sizes()));
  const int64_t per = 2 + (o.bias ? 2 : 0) + (o.proj_size > 0 ? 1 : 0);
  KILN_CHECK(int64_t(params.size()) == o.num_layers * D * per, op, ": ", params.size(), " parameters, expected ",
             o.num_layers * D * per, " (", o.num_layers, " layers x ", D, " directions x ", per, ")");
  const int64_t G = rnn_gate_count(o.mode);
  KILN_CHECK(params[0].defined() && params[0].dim() == 2 && params[0].size(0) % G == 0 && params[0].size(0) > 0, op,
             ": weight_ih_l0 has shape ", params[0].defined() ? shape_str(params[0].sizes()) : "(undefined)",
             ", expected [", G, " * hidden_size, input_size]");
  const int64_t H = params[0].size(0) / G, P = o.proj_size, Ho = P > 0 ? P : H;
  KILN_CHECK(P < H, op, ": proj_size ", P, " must be smaller than hidden_size ", H);
  Tensor h0s = h0, c0s = c0;
  if (unbatched) {
    if (h0s.defined()) {
      KILN_CHECK(h0s.dim() == 2, op, ": h0 of an unbatched input must be [D * num_layers, H_out], got ",
                 shape_str(h0s.sizes()));
      h0s = h0s.unsqueeze(1);
    }
    if (c0s.defined()) {
      KILN_CHECK(c0s.dim() == 2, op, ": c0 of an unbatched input must be [D * num_layers, H], got ",
                 shape_str(c0s.sizes()));
      c0s = c0s.unsqueeze(1);
    }
  }
  check_state(op, "h0", h0s, {D * o.num_layers, N, Ho}, input);
  KILN_CHECK(o.mode == RnnMode::lstm || !c0s.defined(), op, ": c0 exists for lstm only");
  check_state(op, "c0", c0s, {D * o.num_layers, N, H}, input);
  const Tensor len = checked_lengths(op, lengths, N, L, input.device());

  Tensor layer_in = x3;
  std::vector<Tensor> hns, cns;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    const int64_t in_size = l == 0 ? I : D * Ho;
    std::vector<Tensor> ys;
    for (int64_t dir = 0; dir < D; ++dir) {
      const Tensor* p = &params[size_t((l * D + dir) * per)];
      const int64_t named = dir == 1 || o.reverse;
      check_param(op, p[0], where("weight_ih", l, named), {G * H, in_size}, input);
      check_param(op, p[1], where("weight_hh", l, named), {G * H, Ho}, input);
      if (o.bias) {
        check_param(op, p[2], where("bias_ih", l, named), {G * H}, input);
        check_param(op, p[3], where("bias_hh", l, named), {G * H}, input);
      }
      if (P > 0) check_param(op, p[per - 1], where("weight_hr", l, named), {P, H}, input);
      const RnnDesc d = layer_desc(o, input.dtype(), L, N, in_size, H, dir, len.defined());
      const int64_t k = l * D + dir;
      const std::vector<Tensor> r =
          layer(d, layer_in, h0s.defined() ? h0s.select(0, k) : Tensor(), c0s.defined() ? c0s.select(0, k) : Tensor(),
                p[0], p[1], o.bias ? p[2] : Tensor(), o.bias ? p[3] : Tensor(), P > 0 ? p[per - 1] : Tensor(), len);
      ys.push_back(r[0]);
      hns.push_back(r[1]);
      if (o.mode == RnnMode::lstm) cns.push_back(r[2]);
    }
    layer_in = D == 2 ? cat(ys, 2) : ys[0];
    if (o.training && o.dropout > 0 && l + 1 < o.num_layers) layer_in = dropout(layer_in, o.dropout, true);
  }
  RnnOutput out;
  out.output = unbatched ? layer_in.squeeze(1) : (o.batch_first ? layer_in.transpose(0, 1).contiguous() : layer_in);
  out.h_n = stack(hns, 0);
  if (o.mode == RnnMode::lstm) out.c_n = stack(cns, 0);
  if (unbatched) {
    out.h_n = out.h_n.squeeze(1);
    if (out.c_n.defined()) out.c_n = out.c_n.squeeze(1);
  }
  return out;
}

GraphOp graph_op(RnnMode m) {
  switch (m) {
    case RnnMode::lstm: return GraphOp::lstm;
    case RnnMode::gru: return GraphOp::gru;
    case RnnMode::rnn_relu: return GraphOp::rnn_relu;
    case RnnMode::rnn_tanh: break;
  }
  return GraphOp::rnn_tanh;
}

// One step of a cell: x [N, I] or [I], h / c [N, H] or [H].
std::vector<Tensor> cell(RnnMode mode, const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih,
                         const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  const std::string op = std::string(rnn_mode_name(mode)) + "_cell";
  KILN_CHECK(x.defined() && (x.dim() == 1 || x.dim() == 2), op, ": input must be [N, I] or [I], got ",
             x.defined() ? shape_str(x.sizes()) : "(undefined)");
  KILN_CHECK(b_ih.defined() == b_hh.defined(), op, ": give both biases or neither");
  std::vector<Tensor> params = {w_ih, w_hh};
  if (b_ih.defined()) params.insert(params.end(), {b_ih, b_hh});
  const bool unbatched = x.dim() == 1;
  RnnOptions o;
  o.mode = mode;
  o.bias = b_ih.defined();
  const Tensor x3 = (unbatched ? x.unsqueeze(0) : x).unsqueeze(0);  // [1, N, I]
  auto state = [&](const Tensor& s, const char* name) {
    if (!s.defined()) return s;
    KILN_CHECK(s.dim() == x.dim(), op, ": ", name, " ", shape_str(s.sizes()), " must have the input's rank (",
               x.dim(), ")");
    return (unbatched ? s.unsqueeze(0) : s).unsqueeze(0);  // [1, N, H]
  };
  const RnnOutput r = rnn(x3, state(h, "hx"), state(c, "cx"), params, o);
  auto back = [&](const Tensor& s) { return unbatched ? s.select(0, 0).select(0, 0) : s.select(0, 0); };
  std::vector<Tensor> out = {back(r.h_n)};
  if (mode == RnnMode::lstm) out.push_back(back(r.c_n));
  return out;
}

}  // namespace

RnnOutput rnn(const Tensor& input, const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& params,
              const RnnOptions& o, const Tensor& lengths) {
  // One graph op for the whole call (traced with every layer, direction and length), its inputs
  // {input, h0, c0, lengths, params...}. Half types (Half::kernel) run as they are where the
  // kernels of every layer take them (oneDNN bfloat16 and cuDNN float16, each with float32 gate
  // math; oneDNN keeps the LSTM cell state in float32), else on float32 copies with the outputs
  // cast back.
  std::vector<Tensor> in = {input, h0, c0, lengths};
  in.insert(in.end(), params.begin(), params.end());
  const size_t n = in.size();
  const auto attrs = [&] {
    return std::vector<trace::Attr>{
        trace::ints("num_layers", {o.num_layers}), trace::ints("bias", {o.bias}),
        trace::ints("batch_first", {o.batch_first}), trace::ints("bidirectional", {o.bidirectional}),
        trace::ints("reverse", {o.reverse}), trace::ints("proj_size", {o.proj_size}),
        trace::real("dropout", o.dropout), trace::ints("training", {o.training})};
  };
  const std::vector<Tensor> r = graph::call_multi(graph_op(o.mode), in, attrs, [&](const Tensor* t) {
    const std::vector<Tensor> params(t + 4, t + n);
    if (t[0].defined() && is_half(t[0].dtype()) && !half_kernels_take(t[0], t[1], t[2], params, o, t[3]))
      return std::vector<Tensor>{graph::float32_fallback()};
    RnnOutput y = rnn_layers(t[0], t[1], t[2], params, o, t[3]);
    return std::vector<Tensor>{y.output, y.h_n, y.c_n};
  });
  return RnnOutput{r[0], r[1], r[2]};
}

Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  return cell(RnnMode::rnn_tanh, x, h, Tensor(), w_ih, w_hh, b_ih, b_hh)[0];
}

Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  return cell(RnnMode::rnn_relu, x, h, Tensor(), w_ih, w_hh, b_ih, b_hh)[0];
}

std::vector<Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih,
                              const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  return cell(RnnMode::lstm, x, h, c, w_ih, w_hh, b_ih, b_hh);
}

Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                const Tensor& b_hh) {
  return cell(RnnMode::gru, x, h, Tensor(), w_ih, w_hh, b_ih, b_hh)[0];
}

}  // namespace kiln::ops
