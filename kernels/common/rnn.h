// Recurrent layers: one layer in one direction over a whole sequence, with PyTorch's equations,
// gate order and parameter shapes (nn.RNN, nn.LSTM, nn.GRU). The engine (engine/ops/rnn.cpp)
// stacks layers and directions; a kernel sees one of them.
//
//   rnn_tanh / rnn_relu  h' = act(W_ih x + b_ih + W_hh h + b_hh)
//   lstm (gates i f g o) i = s(.), f = s(.), g = tanh(.), o = s(.) of W_ih x + b_ih + W_hh h + b_hh
//                        c' = f c + i g,  m = o tanh(c'),  h' = m, or W_hr m with a projection (P > 0)
//   gru  (gates r z n)   r = s(W_ir x + b_ir + W_hr h + b_hr), z likewise,
//                        n = tanh(W_in x + b_in + r (W_hn h + b_hn)),  h' = (1 - z) n + z h
//
// Buffers, contiguous and row-major (G gates: 4 lstm, 3 gru, 1 rnn; Hout = P if P > 0, else H):
//   src [T, N, I] time-major, dst [T, N, Hout]; h0, hn [N, Hout]; c0, cn [N, H] (lstm only);
//   w_ih [G*H, I], w_hh [G*H, Hout], b_ih, b_hh [G*H] (null when !has_bias), w_hr [P, H] (P > 0).
//   h0 / c0 may be null (zeros). lengths (has_lengths) [N] int64 in [1, T]: sequence n has
//   lengths[n] valid steps; at steps t >= lengths[n] its state is carried unchanged and dst is
//   zero, so hn is its state after its last valid step (PyTorch's packed sequences). A reverse
//   layer runs t = T-1 .. 0, so each sequence starts at its own last valid step.
// Backward (back-propagation through time) takes the forward's inputs, dst's gradient and the
// gradients of hn / cn (null: zero) and writes the gradients of src, h0, c0 and every weight
// (each output nullable; written, never accumulated). A forward called with a payload leaves its
// saved state there for the backward of the same backend; a backward with an empty payload
// recomputes it from the inputs. A forward of a descriptor with !training is inference: no
// backward follows, and a kernel may keep nothing.
//   ctest --test-dir build -R 'oracle|rnn'
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"
#include "kernels/common/host_device.h"

namespace kiln {

enum class RnnMode : uint8_t { rnn_tanh, rnn_relu, lstm, gru };

const char* rnn_mode_name(RnnMode m);  // "rnn_tanh", "rnn_relu", "lstm", "gru"

KILN_HOST_DEVICE inline int64_t rnn_gate_count(RnnMode m) {
  return m == RnnMode::lstm ? 4 : m == RnnMode::gru ? 3 : 1;
}

struct RnnDesc {
  DType dtype = DType::float32;
  RnnMode mode = RnnMode::lstm;
  int64_t T = 1, N = 1, I = 1, H = 1;
  int64_t P = 0;  // lstm projection size (proj_size), 0: none
  bool reverse = false;
  bool has_bias = true;
  bool has_lengths = false;
  bool training = true;  // a backward may follow: a forward keeps its state for it
  int64_t G() const { return rnn_gate_count(mode); }
  int64_t hout() const { return P > 0 ? P : H; }
  int64_t src_elems() const { return T * N * I; }
  int64_t dst_elems() const { return T * N * hout(); }
  int64_t state_elems() const { return N * hout(); }
  int64_t cell_elems() const { return mode == RnnMode::lstm ? N * H : 0; }
  int64_t w_ih_elems() const { return G() * H * I; }
  int64_t w_hh_elems() const { return G() * H * hout(); }
  int64_t bias_elems() const { return has_bias ? G() * H : 0; }
  int64_t w_hr_elems() const { return P * H; }
  // Multiply-adds of a forward pass (the GEMMs: input, recurrent, projection).
  double fwd_flops() const;
  std::string str() const;  // "lstm float32 t6n4i3h5p2 reverse lengths"
};

// The same problem (field by field: descriptors are compared by value, never by their bytes).
inline bool same_problem(const RnnDesc& a, const RnnDesc& b) {
  return a.dtype == b.dtype && a.mode == b.mode && a.T == b.T && a.N == b.N && a.I == b.I && a.H == b.H &&
         a.P == b.P && a.reverse == b.reverse && a.has_bias == b.has_bias && a.has_lengths == b.has_lengths &&
         a.training == b.training;
}

// Checks a descriptor the engine or a test built: sizes positive, P only with lstm and below H.
// Throws kiln::Error naming the field.
void check_rnn_desc(const RnnDesc& d);

namespace rnn {

template <class T>
KILN_HOST_DEVICE inline T sigmoid(T x) {
  using std::exp;
  return T(1) / (T(1) + exp(-x));
}

// The per-element passes of one time step, shared by kiln's CPU and CUDA kernels
// (kernels/common/rnn_driver.h runs them; ref keeps its own loops as the oracle): apply(args, i)
// for each element i of a pass over [N, width], row n = i / width, column j = i % width.

// Gate pass of the forward, over [N, H]. gx = W_ih x (no bias), gh = W_hh h (no bias).
template <class T>
struct StepFwd {
  RnnMode mode;
  int64_t N, H, hout;
  int64_t t;                // the time step
  const int64_t* lengths;   // null: every row active
  const T *gx, *gh, *b_ih, *b_hh;  // [N, G*H] rows; biases [G*H] or null
  const T *h_prev, *c_prev;        // [N, hout], [N, H] (lstm)
  T* gates;                 // [N, G*H] activated (rnn: h' itself)
  T* extra;                 // gru: W_hn h + b_hn [N, H]
  T* c_new;                 // lstm: c' before masking [N, H]
  T* m;                     // lstm with projection: o tanh(c') [N, H]
  T *h_next, *c_next;       // the carried state after the step (masked rows keep h_prev, c_prev)
  T* y;                     // dst row block of this step [N, hout] (masked rows zero); null with projection
};

template <class T>
KILN_HOST_DEVICE inline void apply(const StepFwd<T>& a, int64_t i) {
  using std::tanh;
  const int64_t n = i / a.H, j = i % a.H, GH = rnn_gate_count(a.mode) * a.H;
  const bool active = !a.lengths || a.t < a.lengths[n];
  const T* gx = a.gx + n * GH;
  const T* gh = a.gh + n * GH;
  T* gates = a.gates + n * GH;
  auto pre = [&](int64_t k) {
    const int64_t c = k * a.H + j;
    T v = gx[c] + gh[c];
    if (a.b_ih) v += a.b_ih[c] + a.b_hh[c];
    return v;
  };
  if (a.mode == RnnMode::lstm) {
    const T ig = sigmoid(pre(0)), fg = sigmoid(pre(1)), gg = tanh(pre(2)), og = sigmoid(pre(3));
    gates[j] = ig;
    gates[a.H + j] = fg;
    gates[2 * a.H + j] = gg;
    gates[3 * a.H + j] = og;
    const T cp = a.c_prev[n * a.H + j];
    const T c = fg * cp + ig * gg;
    const T mv = og * tanh(c);
    a.c_new[n * a.H + j] = c;
    a.c_next[n * a.H + j] = active ? c : cp;
    if (a.m) {
      a.m[n * a.H + j] = mv;  // the projection pass writes h_next and y
    } else {
      a.h_next[n * a.H + j] = active ? mv : a.h_prev[n * a.H + j];
      a.y[n * a.H + j] = active ? mv : T(0);
    }
    return;
  }
  T h;
  if (a.mode == RnnMode::gru) {
    const T r = sigmoid(pre(0)), z = sigmoid(pre(1));
    T hn = gh[2 * a.H + j];
    if (a.b_hh) hn += a.b_hh[2 * a.H + j];
    T xn = gx[2 * a.H + j];
    if (a.b_ih) xn += a.b_ih[2 * a.H + j];
    const T nv = tanh(xn + r * hn);
    gates[j] = r;
    gates[a.H + j] = z;
    gates[2 * a.H + j] = nv;
    a.extra[n * a.H + j] = hn;
    h = (T(1) - z) * nv + z * a.h_prev[n * a.H + j];
  } else {
    const T v = pre(0);
    h = a.mode == RnnMode::rnn_tanh ? tanh(v) : (v > T(0) ? v : T(0));
    gates[j] = h;
  }
  a.h_next[n * a.H + j] = active ? h : a.h_prev[n * a.H + j];
  a.y[n * a.H + j] = active ? h : T(0);
}

// Projection pass of the forward (lstm with P > 0), over [N, P]: proj = m W_hr^T.
template <class T>
struct ProjFwd {
  int64_t P, t;
  const int64_t* lengths;
  const T *proj, *h_prev;
  T *h_next, *y;
};

template <class T>
KILN_HOST_DEVICE inline void apply(const ProjFwd<T>& a, int64_t i) {
  const int64_t n = i / a.P;
  const bool active = !a.lengths || a.t < a.lengths[n];
  a.h_next[i] = active ? a.proj[i] : a.h_prev[i];
  a.y[i] = active ? a.proj[i] : T(0);
}

// First pass of a backward step, over [N, hout]: the gradient reaching h' of active rows
// (the carried dh plus dst's), zero on masked rows, whose dh passes the step unchanged.
template <class T>
struct OutBwd {
  int64_t hout, t;
  const int64_t* lengths;
  const T *dh, *dy;  // dy: dst's gradient at this step, or null
  T* dht;            // [N, hout]
};

template <class T>
KILN_HOST_DEVICE inline void apply(const OutBwd<T>& a, int64_t i) {
  const int64_t n = i / a.hout;
  const bool active = !a.lengths || a.t < a.lengths[n];
  a.dht[i] = active ? a.dh[i] + (a.dy ? a.dy[i] : T(0)) : T(0);
}

// Gate pass of the backward, over [N, H]. dout: the gradient of m (lstm with projection) or of
// h' (= dht). Writes the gradients of the pre-activations: dgx (input side, [N, G*H]) and dgh
// (recurrent side; the same buffer as dgx except for gru, whose n gate is r (W_hn h + b_hn)).
// dc is updated in place to c_prev's gradient (lstm). dh_next receives what reaches h_prev
// outside the W_hh product: gru's z h term on active rows, the carried dh on masked rows, else
// zero; the recurrent GEMM then adds dgh W_hh into it.
template <class T>
struct StepBwd {
  RnnMode mode;
  int64_t N, H, hout, t;
  const int64_t* lengths;
  const T* dout;
  const T *gates, *extra, *c_prev, *c_new, *h_prev;
  const T* dh;  // the carried gradient of h (masked rows pass it on)
  T* dc;        // lstm: in c', out c_prev
  T *dgx, *dgh;
  T* dh_next;
};

template <class T>
KILN_HOST_DEVICE inline void apply(const StepBwd<T>& a, int64_t i) {
  using std::tanh;
  const int64_t n = i / a.H, j = i % a.H, G = rnn_gate_count(a.mode), GH = G * a.H;
  const bool active = !a.lengths || a.t < a.lengths[n];
  T* dgx = a.dgx + n * GH;
  T* dgh = a.dgh + n * GH;
  const int64_t ij = n * a.H + j;
  if (!active) {
    for (int64_t k = 0; k < G; ++k) dgx[k * a.H + j] = dgh[k * a.H + j] = T(0);
    if (a.mode != RnnMode::lstm || a.hout == a.H) a.dh_next[n * a.hout + j] = a.dh[n * a.hout + j];
    return;  // dc passes unchanged
  }
  const T* g = a.gates + n * GH;
  const T d = a.dout[ij];
  if (a.mode == RnnMode::lstm) {
    const T ig = g[j], fg = g[a.H + j], gg = g[2 * a.H + j], og = g[3 * a.H + j];
    const T tc = tanh(a.c_new[ij]);
    const T dct = a.dc[ij] + d * og * (T(1) - tc * tc);
    const T di = dct * gg, df = dct * a.c_prev[ij], dg = dct * ig, dov = d * tc;
    dgx[j] = di * ig * (T(1) - ig);
    dgx[a.H + j] = df * fg * (T(1) - fg);
    dgx[2 * a.H + j] = dg * (T(1) - gg * gg);
    dgx[3 * a.H + j] = dov * og * (T(1) - og);
    a.dc[ij] = dct * fg;
    if (a.hout == a.H) a.dh_next[ij] = T(0);
    return;
  }
  if (a.mode == RnnMode::gru) {
    const T r = g[j], z = g[a.H + j], nv = g[2 * a.H + j];
    const T hp = a.h_prev[ij];
    const T dn = d * (T(1) - z) * (T(1) - nv * nv);
    const T dz = d * (hp - nv) * z * (T(1) - z);
    const T dr = dn * a.extra[ij] * r * (T(1) - r);
    dgx[j] = dgh[j] = dr;
    dgx[a.H + j] = dgh[a.H + j] = dz;
    dgx[2 * a.H + j] = dn;
    dgh[2 * a.H + j] = dn * r;
    a.dh_next[ij] = d * z;
    return;
  }
  const T h = g[j];
  dgx[j] = a.mode == RnnMode::rnn_tanh ? d * (T(1) - h * h) : (h > T(0) ? d : T(0));
  a.dh_next[ij] = T(0);
}

// lstm with a projection: dh_next over [N, P] (the gate pass covers [N, H]): the carried dh on
// masked rows, zero on active ones.
template <class T>
struct ProjBwd {
  int64_t P, t;
  const int64_t* lengths;
  const T* dh;
  T* dh_next;
};

template <class T>
KILN_HOST_DEVICE inline void apply(const ProjBwd<T>& a, int64_t i) {
  const int64_t n = i / a.P;
  const bool active = !a.lengths || a.t < a.lengths[n];
  a.dh_next[i] = active ? T(0) : a.dh[i];
}

}  // namespace rnn
}  // namespace kiln
