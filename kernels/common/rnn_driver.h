// The time loop of kiln's own recurrent kernels, written once for the CPU (kernels/cpu/native/
// rnn.cpp) and CUDA (kernels/cuda/native/rnn.cu): the input projection of all T steps as one
// GEMM, then per step one GEMM with W_hh and one fused pass over the gates (kernels/common/rnn.h);
// the backward runs the steps in reverse the same way and ends with one GEMM each for the
// gradients of src, W_ih, W_hh, the biases and W_hr over all steps at once.
//
// `Dev` supplies, on its memory: gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc) (row-major,
// C = op(A) op(B) + beta C), pass(args, count) (rnn::apply(args, i) for i in [0, count)),
// copy(dst, src, n), fill(p, n, value) and alloc(elements) -> Buffer<T>.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/common/rnn.h"

namespace kiln::rnn {

// Device memory of `n` elements, freed with the last copy of the handle.
template <class T>
struct Buffer {
  std::shared_ptr<void> keep;
  T* ptr = nullptr;
};

// What a forward keeps for its backward, every array indexed by time (not by processing order):
// the input projection, the activated gates, the state before each step and (lstm) the cell
// after it, gru's W_hn h + b_hn, the projection's input m.
template <class T>
struct Saved {
  Buffer<T> mem;
  T *gx, *gates, *extra, *c_prev, *c_new, *m, *h_prev, *gh, *proj;
};

template <class T, class Dev>
Saved<T> alloc_saved(Dev& dev, const RnnDesc& d) {
  const int64_t TN = d.T * d.N, GH = d.G() * d.H, Ho = d.hout();
  const bool lstm = d.mode == RnnMode::lstm, gru = d.mode == RnnMode::gru;
  const int64_t sizes[] = {TN * GH, TN * GH, gru ? TN * d.H : 0, lstm ? TN * d.H : 0, lstm ? TN * d.H : 0,
                           d.P > 0 ? TN * d.H : 0, TN * Ho, d.N * GH, d.N * d.P};
  int64_t total = 0;
  for (int64_t s : sizes) total += (s + 15) / 16 * 16;  // 64-byte aligned parts
  Saved<T> s;
  s.mem = dev.template alloc<T>(total);
  T* p = s.mem.ptr;
  T** parts[] = {&s.gx, &s.gates, &s.extra, &s.c_prev, &s.c_new, &s.m, &s.h_prev, &s.gh, &s.proj};
  for (int i = 0; i < 9; ++i) {
    *parts[i] = sizes[i] ? p : nullptr;
    p += (sizes[i] + 15) / 16 * 16;
  }
  return s;
}

template <class T>
struct FwdArgs {
  const T *src, *h0, *c0, *w_ih, *w_hh, *b_ih, *b_hh, *w_hr;
  const int64_t* lengths;
  T *dst, *hn, *cn;
};

template <class T, class Dev>
void forward(Dev& dev, const RnnDesc& d, const FwdArgs<T>& a, Saved<T>& s) {
  const int64_t T_ = d.T, N = d.N, H = d.H, P = d.P, Ho = d.hout(), GH = d.G() * H;
  const bool lstm = d.mode == RnnMode::lstm;
  const int64_t* len = d.has_lengths ? a.lengths : nullptr;
  const T* b_ih = d.has_bias ? a.b_ih : nullptr;
  const T* b_hh = d.has_bias ? a.b_hh : nullptr;
  dev.gemm(false, true, T_ * N, GH, d.I, a.src, d.I, a.w_ih, d.I, T(0), s.gx, GH);
  auto time = [&](int64_t step) { return d.reverse ? T_ - 1 - step : step; };
  const int64_t t0 = time(0);
  if (a.h0) dev.copy(s.h_prev + t0 * N * Ho, a.h0, N * Ho);
  else dev.fill(s.h_prev + t0 * N * Ho, N * Ho, T(0));
  if (lstm) {
    if (a.c0) dev.copy(s.c_prev + t0 * N * H, a.c0, N * H);
    else dev.fill(s.c_prev + t0 * N * H, N * H, T(0));
  }
  for (int64_t step = 0; step < T_; ++step) {
    const int64_t t = time(step), tn = step + 1 < T_ ? time(step + 1) : -1;
    const T* h_prev = s.h_prev + t * N * Ho;
    T* h_next = tn >= 0 ? s.h_prev + tn * N * Ho : a.hn;
    dev.gemm(false, true, N, GH, Ho, h_prev, Ho, a.w_hh, Ho, T(0), s.gh, GH);
    StepFwd<T> f;
    f.mode = d.mode;
    f.N = N;
    f.H = H;
    f.hout = Ho;
    f.t = t;
    f.lengths = len;
    f.gx = s.gx + t * N * GH;
    f.gh = s.gh;
    f.b_ih = b_ih;
    f.b_hh = b_hh;
    f.h_prev = h_prev;
    f.c_prev = lstm ? s.c_prev + t * N * H : nullptr;
    f.gates = s.gates + t * N * GH;
    f.extra = s.extra ? s.extra + t * N * H : nullptr;
    f.c_new = lstm ? s.c_new + t * N * H : nullptr;
    f.m = P > 0 ? s.m + t * N * H : nullptr;
    f.h_next = h_next;
    f.c_next = lstm ? (tn >= 0 ? s.c_prev + tn * N * H : a.cn) : nullptr;
    f.y = P > 0 ? nullptr : a.dst + t * N * Ho;
    dev.pass(f, N * H);
    if (P > 0) {
      dev.gemm(false, true, N, P, H, f.m, H, a.w_hr, H, T(0), s.proj, P);
      ProjFwd<T> p{P, t, len, s.proj, h_prev, h_next, a.dst + t * N * Ho};
      dev.pass(p, N * P);
    }
  }
}

template <class T>
struct BwdArgs {
  const T *src, *w_ih, *w_hh, *w_hr;
  const int64_t* lengths;
  const T *diff_dst, *diff_hn, *diff_cn;
  T *diff_src, *diff_h0, *diff_c0, *diff_w_ih, *diff_w_hh, *diff_b_ih, *diff_b_hh, *diff_w_hr;
};

template <class T, class Dev>
void backward(Dev& dev, const RnnDesc& d, const BwdArgs<T>& a, const Saved<T>& s) {
  const int64_t T_ = d.T, N = d.N, H = d.H, P = d.P, Ho = d.hout(), G = d.G(), GH = G * H, TN = T_ * N;
  const bool lstm = d.mode == RnnMode::lstm, gru = d.mode == RnnMode::gru;
  const int64_t* len = d.has_lengths ? a.lengths : nullptr;
  // Scratch: the per-step gradients of h' (dht), of the pre-activations (dgx; gru's recurrent
  // side dgh), the carried dh (two, swapped each step), dc, the projection's dm, a column of ones.
  const int64_t sizes[] = {TN * Ho, TN * GH, gru ? TN * GH : 0, N * Ho, N * Ho, lstm ? N * H : 0, P > 0 ? N * H : 0,
                           TN};
  int64_t total = 0;
  for (int64_t z : sizes) total += (z + 15) / 16 * 16;
  Buffer<T> mem = dev.template alloc<T>(total);
  T* parts[8];
  T* p = mem.ptr;
  for (int i = 0; i < 8; ++i) {
    parts[i] = sizes[i] ? p : nullptr;
    p += (sizes[i] + 15) / 16 * 16;
  }
  T *dht = parts[0], *dgx = parts[1], *dgh = gru ? parts[2] : parts[1], *dh = parts[3], *dh_next = parts[4],
    *dc = parts[5], *dm = parts[6], *ones = parts[7];
  if (a.diff_hn) dev.copy(dh, a.diff_hn, N * Ho);
  else dev.fill(dh, N * Ho, T(0));
  if (lstm) {
    if (a.diff_cn) dev.copy(dc, a.diff_cn, N * H);
    else dev.fill(dc, N * H, T(0));
  }
  for (int64_t step = T_ - 1; step >= 0; --step) {
    const int64_t t = d.reverse ? T_ - 1 - step : step;
    OutBwd<T> o{Ho, t, len, dh, a.diff_dst ? a.diff_dst + t * N * Ho : nullptr, dht + t * N * Ho};
    dev.pass(o, N * Ho);
    if (P > 0) dev.gemm(false, false, N, H, P, o.dht, P, a.w_hr, H, T(0), dm, H);
    StepBwd<T> b;
    b.mode = d.mode;
    b.N = N;
    b.H = H;
    b.hout = Ho;
    b.t = t;
    b.lengths = len;
    b.dout = P > 0 ? dm : o.dht;
    b.gates = s.gates + t * N * GH;
    b.extra = gru ? s.extra + t * N * H : nullptr;
    b.c_prev = lstm ? s.c_prev + t * N * H : nullptr;
    b.c_new = lstm ? s.c_new + t * N * H : nullptr;
    b.h_prev = s.h_prev + t * N * Ho;
    b.dh = dh;
    b.dc = dc;
    b.dgx = dgx + t * N * GH;
    b.dgh = dgh + t * N * GH;
    b.dh_next = dh_next;
    dev.pass(b, N * H);
    if (P > 0) {
      ProjBwd<T> pb{P, t, len, dh, dh_next};
      dev.pass(pb, N * P);
    }
    dev.gemm(false, false, N, Ho, GH, b.dgh, GH, a.w_hh, Ho, T(1), dh_next, Ho);
    T* swap = dh;
    dh = dh_next;
    dh_next = swap;
  }
  if (a.diff_h0) dev.copy(a.diff_h0, dh, N * Ho);
  if (lstm && a.diff_c0) dev.copy(a.diff_c0, dc, N * H);
  if (a.diff_src) dev.gemm(false, false, TN, d.I, GH, dgx, GH, a.w_ih, d.I, T(0), a.diff_src, d.I);
  if (a.diff_w_ih) dev.gemm(true, false, GH, d.I, TN, dgx, GH, a.src, d.I, T(0), a.diff_w_ih, d.I);
  if (a.diff_w_hh) dev.gemm(true, false, GH, Ho, TN, dgh, GH, s.h_prev, Ho, T(0), a.diff_w_hh, Ho);
  if (d.has_bias && (a.diff_b_ih || a.diff_b_hh)) {
    dev.fill(ones, TN, T(1));
    if (a.diff_b_ih) dev.gemm(true, false, GH, 1, TN, dgx, GH, ones, 1, T(0), a.diff_b_ih, 1);
    if (a.diff_b_hh) dev.gemm(true, false, GH, 1, TN, dgh, GH, ones, 1, T(0), a.diff_b_hh, 1);
  }
  if (P > 0 && a.diff_w_hr) dev.gemm(true, false, P, H, TN, dht, P, s.m, H, T(0), a.diff_w_hr, H);
}

}  // namespace kiln::rnn
