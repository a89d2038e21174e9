// Reference recurrent layer (kernels/common/rnn.h): one sequence at a time, every product a plain
// loop accumulating in T, the equations written out again rather than shared with kiln's own
// kernels, so that the oracle (T = double) checks those independently. The backward recomputes
// the forward of each sequence, keeping every step, and runs back through time.
//   ctest --test-dir build -R 'oracle|rnn'
#pragma once

#include <cmath>
#include <vector>

#include "kernels/common/rnn.h"

namespace kiln::ref {
namespace rnn_detail {

template <class T>
T sig(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// One sequence's steps in processing order: inputs to each step and what it produced.
template <class T>
struct Step {
  int64_t t;
  std::vector<T> h_prev, c_prev;  // state before
  std::vector<T> gates;           // activated, G*H
  std::vector<T> hn;              // gru: W_hn h + b_hn
  std::vector<T> c, m, h;         // after (lstm c and m = o tanh c; h the new state)
};

template <class T>
struct Weights {
  const RnnDesc& d;
  const T *w_ih, *w_hh, *b_ih, *b_hh, *w_hr;
};

// The steps of sequence n, starting from h0 / c0 (may be null).
template <class T>
std::vector<Step<T>> run_sequence(const Weights<T>& w, int64_t n, const T* src, const T* h0, const T* c0,
                                  const int64_t* lengths) {
  const RnnDesc& d = w.d;
  const int64_t H = d.H, Ho = d.hout(), G = d.G(), I = d.I;
  const int64_t len = d.has_lengths ? lengths[n] : d.T;
  std::vector<T> h(size_t(Ho), T(0)), c(size_t(H), T(0));
  for (int64_t j = 0; j < Ho; ++j) h[j] = h0 ? h0[n * Ho + j] : T(0);
  if (d.mode == RnnMode::lstm)
    for (int64_t j = 0; j < H; ++j) c[j] = c0 ? c0[n * H + j] : T(0);
  std::vector<Step<T>> steps;
  for (int64_t k = 0; k < len; ++k) {
    Step<T> s;
    s.t = d.reverse ? len - 1 - k : k;
    s.h_prev = h;
    s.c_prev = c;
    const T* x = src + (s.t * d.N + n) * I;
    std::vector<T> ax(size_t(G * H)), ah(size_t(G * H));
    for (int64_t r = 0; r < G * H; ++r) {
      T vx = d.has_bias ? w.b_ih[r] : T(0), vh = d.has_bias ? w.b_hh[r] : T(0);
      for (int64_t i = 0; i < I; ++i) vx += w.w_ih[r * I + i] * x[i];
      for (int64_t i = 0; i < Ho; ++i) vh += w.w_hh[r * Ho + i] * h[i];
      ax[r] = vx;
      ah[r] = vh;
    }
    s.gates.assign(size_t(G * H), T(0));
    std::vector<T> hn(static_cast<size_t>(Ho));
    if (d.mode == RnnMode::lstm) {
      s.c.resize(H);
      s.m.resize(H);
      for (int64_t j = 0; j < H; ++j) {
        const T ig = sig(ax[j] + ah[j]), fg = sig(ax[H + j] + ah[H + j]);
        const T gg = std::tanh(ax[2 * H + j] + ah[2 * H + j]), og = sig(ax[3 * H + j] + ah[3 * H + j]);
        s.gates[j] = ig;
        s.gates[H + j] = fg;
        s.gates[2 * H + j] = gg;
        s.gates[3 * H + j] = og;
        s.c[j] = fg * c[j] + ig * gg;
        s.m[j] = og * std::tanh(s.c[j]);
      }
      if (d.P > 0) {
        for (int64_t p = 0; p < d.P; ++p) {
          T v = T(0);
          for (int64_t j = 0; j < H; ++j) v += w.w_hr[p * H + j] * s.m[j];
          hn[p] = v;
        }
      } else {
        hn = s.m;
      }
      c = s.c;
    } else if (d.mode == RnnMode::gru) {
      s.hn.resize(H);
      for (int64_t j = 0; j < H; ++j) {
        const T r = sig(ax[j] + ah[j]), z = sig(ax[H + j] + ah[H + j]);
        s.hn[j] = ah[2 * H + j];
        const T nv = std::tanh(ax[2 * H + j] + r * s.hn[j]);
        s.gates[j] = r;
        s.gates[H + j] = z;
        s.gates[2 * H + j] = nv;
        hn[j] = (T(1) - z) * nv + z * h[j];
      }
    } else {
      for (int64_t j = 0; j < H; ++j) {
        const T v = ax[j] + ah[j];
        hn[j] = d.mode == RnnMode::rnn_tanh ? std::tanh(v) : (v > T(0) ? v : T(0));
        s.gates[j] = hn[j];
      }
    }
    s.h = hn;
    h = hn;
    steps.push_back(std::move(s));
  }
  return steps;
}

}  // namespace rnn_detail

template <class T>
void rnn_fwd(const RnnDesc& d, const T* src, const T* h0, const T* c0, const T* w_ih, const T* w_hh, const T* b_ih,
             const T* b_hh, const T* w_hr, const int64_t* lengths, T* dst, T* hn, T* cn) {
  using namespace rnn_detail;
  const Weights<T> w{d, w_ih, w_hh, b_ih, b_hh, w_hr};
  const int64_t Ho = d.hout(), H = d.H;
  for (int64_t i = 0; i < d.dst_elems(); ++i) dst[i] = T(0);
  for (int64_t n = 0; n < d.N; ++n) {
    const std::vector<Step<T>> steps = run_sequence(w, n, src, h0, c0, lengths);
    for (const Step<T>& s : steps)
      for (int64_t j = 0; j < Ho; ++j) dst[(s.t * d.N + n) * Ho + j] = s.h[j];
    for (int64_t j = 0; j < Ho; ++j) hn[n * Ho + j] = steps.empty() ? (h0 ? h0[n * Ho + j] : T(0)) : steps.back().h[j];
    if (d.mode == RnnMode::lstm)
      for (int64_t j = 0; j < H; ++j) cn[n * H + j] = steps.empty() ? (c0 ? c0[n * H + j] : T(0)) : steps.back().c[j];
  }
}

template <class T>
void rnn_bwd(const RnnDesc& d, const T* src, const T* h0, const T* c0, const T* w_ih, const T* w_hh, const T* b_ih,
             const T* b_hh, const T* w_hr, const int64_t* lengths, const T* diff_dst, const T* diff_hn,
             const T* diff_cn, T* diff_src, T* diff_h0, T* diff_c0, T* diff_w_ih, T* diff_w_hh, T* diff_b_ih,
             T* diff_b_hh, T* diff_w_hr) {
  using namespace rnn_detail;
  const Weights<T> w{d, w_ih, w_hh, b_ih, b_hh, w_hr};
  const int64_t H = d.H, Ho = d.hout(), G = d.G(), I = d.I, P = d.P;
  // Accumulated over sequences; zeroed first (the outputs are written, not added to).
  std::vector<T> gwih(size_t(d.w_ih_elems())), gwhh(size_t(d.w_hh_elems())), gbih(size_t(G * H)),
      gbhh(size_t(G * H)), gwhr(size_t(d.w_hr_elems()));
  std::vector<T> gsrc(size_t(d.src_elems()), T(0));
  for (int64_t n = 0; n < d.N; ++n) {
    const std::vector<Step<T>> steps = run_sequence(w, n, src, h0, c0, lengths);
    std::vector<T> dh(static_cast<size_t>(Ho)), dc(static_cast<size_t>(H), T(0));
    for (int64_t j = 0; j < Ho; ++j) dh[j] = diff_hn ? diff_hn[n * Ho + j] : T(0);
    if (d.mode == RnnMode::lstm)
      for (int64_t j = 0; j < H; ++j) dc[j] = diff_cn ? diff_cn[n * H + j] : T(0);
    for (size_t k = steps.size(); k-- > 0;) {
      const Step<T>& s = steps[k];
      for (int64_t j = 0; j < Ho; ++j) dh[j] += diff_dst ? diff_dst[(s.t * d.N + n) * Ho + j] : T(0);
      std::vector<T> dax(size_t(G * H)), dah(size_t(G * H));  // pre-activation gradients
      std::vector<T> dh_prev(size_t(Ho), T(0));
      if (d.mode == RnnMode::lstm) {
        std::vector<T> dm(static_cast<size_t>(H));
        if (P > 0) {
          for (int64_t j = 0; j < H; ++j) {
            T v = T(0);
            for (int64_t p = 0; p < P; ++p) v += dh[p] * w_hr[p * H + j];
            dm[j] = v;
          }
          for (int64_t p = 0; p < P; ++p)
            for (int64_t j = 0; j < H; ++j) gwhr[p * H + j] += dh[p] * s.m[j];
        } else {
          dm = dh;
        }
        for (int64_t j = 0; j < H; ++j) {
          const T ig = s.gates[j], fg = s.gates[H + j], gg = s.gates[2 * H + j], og = s.gates[3 * H + j];
          const T tc = std::tanh(s.c[j]);
          const T dct = dc[j] + dm[j] * og * (T(1) - tc * tc);
          dax[j] = dct * gg * ig * (T(1) - ig);
          dax[H + j] = dct * s.c_prev[j] * fg * (T(1) - fg);
          dax[2 * H + j] = dct * ig * (T(1) - gg * gg);
          dax[3 * H + j] = dm[j] * tc * og * (T(1) - og);
          dc[j] = dct * fg;
        }
        dah = dax;
      } else if (d.mode == RnnMode::gru) {
        for (int64_t j = 0; j < H; ++j) {
          const T r = s.gates[j], z = s.gates[H + j], nv = s.gates[2 * H + j];
          const T dn = dh[j] * (T(1) - z) * (T(1) - nv * nv);
          dax[j] = dah[j] = dn * s.hn[j] * r * (T(1) - r);
          dax[H + j] = dah[H + j] = dh[j] * (s.h_prev[j] - nv) * z * (T(1) - z);
          dax[2 * H + j] = dn;
          dah[2 * H + j] = dn * r;
          dh_prev[j] = dh[j] * z;
        }
      } else {
        for (int64_t j = 0; j < H; ++j) {
          const T h = s.h[j];
          dax[j] = d.mode == RnnMode::rnn_tanh ? dh[j] * (T(1) - h * h) : (h > T(0) ? dh[j] : T(0));
        }
        dah = dax;
      }
      const T* x = src + (s.t * d.N + n) * I;
      for (int64_t r = 0; r < G * H; ++r) {
        for (int64_t i = 0; i < I; ++i) {
          gwih[r * I + i] += dax[r] * x[i];
          gsrc[(s.t * d.N + n) * I + i] += dax[r] * w_ih[r * I + i];
        }
        for (int64_t i = 0; i < Ho; ++i) {
          gwhh[r * Ho + i] += dah[r] * s.h_prev[i];
          dh_prev[i] += dah[r] * w_hh[r * Ho + i];
        }
        gbih[r] += dax[r];
        gbhh[r] += dah[r];
      }
      dh = dh_prev;
    }
    if (diff_h0)
      for (int64_t j = 0; j < Ho; ++j) diff_h0[n * Ho + j] = dh[j];
    if (diff_c0 && d.mode == RnnMode::lstm)
      for (int64_t j = 0; j < H; ++j) diff_c0[n * H + j] = dc[j];
  }
  auto put = [](T* out, const std::vector<T>& v) {
    if (out)
      for (size_t i = 0; i < v.size(); ++i) out[i] = v[i];
  };
  put(diff_src, gsrc);
  put(diff_w_ih, gwih);
  put(diff_w_hh, gwhh);
  if (d.has_bias) {
    put(diff_b_ih, gbih);
    put(diff_b_hh, gbhh);
  }
  if (P > 0) put(diff_w_hr, gwhr);
}

}  // namespace kiln::ref
