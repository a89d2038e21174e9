// Problems of the recurrent layer (engine/ops/rnn.cpp): each mode (rnn tanh and relu, lstm, gru),
// a single step and a short sequence, forward and reverse, with and without per-sequence lengths
// (drawn in [1, T], so some sequences end early), without biases, lstm with a projection; half of
// them with h0 / c0 and the gradients of hn / cn absent (null: zeros). Backward kernels get a
// fresh payload and recompute the forward: a payload the oracle's own forward filled would hold
// another draw's state (tests/kernels/test_rnn.cpp checks the saved path on the same inputs).
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

constexpr int kNullState = 1;  // h0, c0, diff_hn, diff_cn null

std::vector<Problem<RnnDesc>> problems() {
  const int64_t shapes[][4] = {{5, 3, 4, 6}, {1, 2, 3, 4}};  // T, N, I, H
  struct Flags {
    bool reverse, lengths, bias;
    int64_t P;
  };
  const Flags flags[] = {{false, false, true, 0}, {true, false, true, 0}, {false, true, true, 0},
                         {true, true, false, 0},  {false, true, true, 2}, {true, true, true, 3}};
  std::vector<Problem<RnnDesc>> v;
  for (DType t : float_dtypes())
    for (RnnMode m : {RnnMode::rnn_tanh, RnnMode::rnn_relu, RnnMode::lstm, RnnMode::gru})
      for (const auto& s : shapes)
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
  return v;
}

// The forward's inputs, in the kernels' order.
std::vector<Arg> inputs(const RnnDesc& d, int variant) {
  const bool lstm = d.mode == RnnMode::lstm, null_state = variant & kNullState;
  return {in("src", d.dtype, d.src_elems()),
          null_state ? none("h0") : in("h0", d.dtype, d.state_elems()),
          null_state || !lstm ? none("c0") : in("c0", d.dtype, d.cell_elems()),
          in("w_ih", d.dtype, d.w_ih_elems(), uniform(-0.6, 0.6)),
          in("w_hh", d.dtype, d.w_hh_elems(), uniform(-0.6, 0.6)),
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
  bwd.problems = problems();
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
