// Problems of the recurrent layer (engine/ops/rnn.cpp): each mode (rnn tanh and relu, lstm, gru),
// a single step and a short sequence, forward and reverse, with and without per-sequence lengths
// (drawn in [1, T], so some sequences end early), without biases, lstm with a projection; half of
// them with h0 / c0 and the gradients of hn / cn absent (null: zeros); in float32 and float64,
// and in bfloat16 (oneDNN where the CPU has AVX512_BF16) and float16 (cuDNN), those with one
// more, wider shape (oneDNN's vectorised bfloat16 gate passes over full registers). The
// bfloat16 problems reach oneDNN only on a CPU with AVX512_BF16: "oracle rnn: ..." below says
// whether they did, and why not. Backward kernels get a
// fresh payload and recompute the forward: a payload the oracle's own forward filled would hold
// another draw's state (tests/kernels/test_rnn.cpp checks the saved path on the same inputs).
#include "tests/oracle/problems.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>

#ifdef KILN_HAVE_ONEDNN
#include "kernels/cpu/onednn/rnn.h"
#endif

namespace kiln::oracle {
namespace {

constexpr int kNullState = 1;  // h0, c0, diff_hn, diff_cn null

std::vector<Problem<RnnDesc>> problems() {
  const std::vector<std::array<int64_t, 4>> shapes = {{5, 3, 4, 6}, {1, 2, 3, 4}}, wide = {{6, 4, 16, 24}};  // T, N, I, H
  struct Flags {
    bool reverse, lengths, bias;
    int64_t P;
  };
  const Flags flags[] = {{false, false, true, 0}, {true, false, true, 0}, {false, true, true, 0},
                         {true, true, false, 0},  {false, true, true, 2}, {true, true, true, 3}};
  std::vector<Problem<RnnDesc>> v;
  for (DType t : storage_dtypes())
    for (RnnMode m : {RnnMode::rnn_tanh, RnnMode::rnn_relu, RnnMode::lstm, RnnMode::gru}) {
      std::vector<std::array<int64_t, 4>> all = shapes;
      if (is_half(t)) all.insert(all.end(), wide.begin(), wide.end());
      for (const auto& s : all)
        for (size_t f = 0; f < std::size(flags); ++f) {
          if (flags[f].P > 0 && (m != RnnMode::lstm || flags[f].P >= s[3])) continue;
          RnnDesc d;
          d.dtype = t;
          d.mode = m;
          d.T = s[0], d.N = s[1], d.I = s[2], d.H = s[3];
          d.P = flags[f].P;
          d.reverse = flags[f].reverse;
          d.has_lengths = flags[f].lengths;
          d.has_bias = flags[f].bias;
          const int variant = f % 2 ? kNullState : 0;
          v.push_back({d, variant, variant ? "no h0/c0" : ""});
        }
    }
  return v;
}

// The forward's inputs, in the kernels' order. The weights' bound shrinks as 1/sqrt(H) past
// H = 6 (PyTorch's initialisation scales so too): the wide shape's recurrence then grows no
// faster than the small ones' (an amplifying one, relu's, would multiply every rounding of a
// half-type state step after step: the error of the problem, not of the kernel).
std::vector<Arg> inputs(const RnnDesc& d, int variant) {
  const bool lstm = d.mode == RnnMode::lstm, null_state = variant & kNullState;
  const double w = 0.6 * std::sqrt(6.0 / double(std::max<int64_t>(d.H, 6)));
  return {in("src", d.dtype, d.src_elems()),
          null_state ? none("h0") : in("h0", d.dtype, d.state_elems()),
          null_state || !lstm ? none("c0") : in("c0", d.dtype, d.cell_elems()),
          in("w_ih", d.dtype, d.w_ih_elems(), uniform(-w, w)),
          in("w_hh", d.dtype, d.w_hh_elems(), uniform(-w, w)),
          d.has_bias ? in("b_ih", d.dtype, d.bias_elems()) : none("b_ih"),
          d.has_bias ? in("b_hh", d.dtype, d.bias_elems()) : none("b_hh"),
          d.P > 0 ? in("w_hr", d.dtype, d.w_hr_elems()) : none("w_hr"),
          d.has_lengths ? in("lengths", DType::int64, d.N, integers(1, d.T)) : none("lengths")};
}

}  // namespace

void add_rnn(CaseMap& m) {
  Case<kernel_op::rnn_fwd> fwd;
  fwd.problems = problems();
  fwd.args = [](const RnnDesc& d, int variant) {
    std::vector<Arg> a = inputs(d, variant);
    a.push_back(out("dst", d.dtype, d.dst_elems()));
    a.push_back(out("hn", d.dtype, d.state_elems()));
    a.push_back(d.mode == RnnMode::lstm ? out("cn", d.dtype, d.cell_elems()) : none("cn"));
    return a;
  };
  add(m, fwd);
  Case<kernel_op::rnn_bwd> bwd;
  // relu's gradient has a step at 0: in a half type a pre-activation within a rounding of zero
  // takes the other side in some draws, and the gradients then differ by whole terms (up to 2 on
  // values of 1 in 1 draw of 3), which no tolerance of the arithmetic covers. Its half-type
  // forward (continuous) stays in the table; its backward only in float32 and float64.
  for (const Problem<RnnDesc>& p : problems())
    if (!(is_half(p.desc.dtype) && p.desc.mode == RnnMode::rnn_relu)) bwd.problems.push_back(p);
  bwd.args = [](const RnnDesc& d, int variant) {
    const bool lstm = d.mode == RnnMode::lstm, null_state = variant & kNullState;
    std::vector<Arg> a = inputs(d, variant);
    a.push_back(in("diff_dst", d.dtype, d.dst_elems()));
    a.push_back(null_state ? none("diff_hn") : in("diff_hn", d.dtype, d.state_elems()));
    a.push_back(null_state || !lstm ? none("diff_cn") : in("diff_cn", d.dtype, d.cell_elems()));
    a.push_back(out("diff_src", d.dtype, d.src_elems()));
    a.push_back(out("diff_h0", d.dtype, d.state_elems()));
    a.push_back(lstm ? out("diff_c0", d.dtype, d.cell_elems()) : none("diff_c0"));
    a.push_back(out("diff_w_ih", d.dtype, d.w_ih_elems()));
    a.push_back(out("diff_w_hh", d.dtype, d.w_hh_elems()));
    a.push_back(d.has_bias ? out("diff_b_ih", d.dtype, d.bias_elems()) : none("diff_b_ih"));
    a.push_back(d.has_bias ? out("diff_b_hh", d.dtype, d.bias_elems()) : none("diff_b_hh"));
    a.push_back(d.P > 0 ? out("diff_w_hr", d.dtype, d.w_hr_elems()) : none("diff_w_hr"));
    return a;
  };
  add(m, bwd);
}

}  // namespace kiln::oracle

namespace kiln::oracle {

// The bfloat16 problems above must reach oneDNN wherever it can run them: on a CPU with
// AVX512_BF16 it takes every one without lengths or a projection (the oracle then checks it
// against ref); elsewhere the message says why none ran.
TEST_CASE("oracle rnn: oneDNN takes the bfloat16 problems where the CPU has AVX512_BF16") {
#ifndef KILN_HAVE_ONEDNN
  MESSAGE("oracle rnn bfloat16: not checked: kiln was built without oneDNN");
#else
  if (!out_of_scope("onednn", DeviceType::cpu).empty()) return;  // the emulator build, KILN_ORACLE_DEVICES=cuda
  int taken = 0, eligible = 0;
  for (const Problem<RnnDesc>& p : problems()) {
    if (p.desc.dtype != DType::bfloat16) continue;
    const bool fits = !p.desc.has_lengths && p.desc.P == 0;
    eligible += fits;
    for (bool training : {true, false}) {
      RnnDesc d = p.desc;
      d.training = training;
      const bool takes = onednn::supports_rnn(d);
      taken += takes && training;
      if (!onednn::rnn_bf16_unavailable()) CHECK_MESSAGE(takes == fits, d.str());
    }
  }
  if (const char* why = onednn::rnn_bf16_unavailable()) {
    MESSAGE("oracle rnn bfloat16 on oneDNN: skipped, " << why);
    CHECK(taken == 0);
  } else {
    CHECK(eligible > 0);
    CHECK(taken == eligible);
  }
#endif
}

}  // namespace kiln::oracle
