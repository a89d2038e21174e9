#include "kernels/common/rnn.h"

#include <sstream>

#include "kernels/common/error.h"

namespace kiln {

const char* rnn_mode_name(RnnMode m) {
  switch (m) {
    case RnnMode::rnn_tanh: return "rnn_tanh";
    case RnnMode::rnn_relu: return "rnn_relu";
    case RnnMode::lstm: return "lstm";
    case RnnMode::gru: return "gru";
  }
  return "?";
}

double RnnDesc::fwd_flops() const {
  const double TN = double(T) * double(N), GH = double(G()) * double(H);
  return 2.0 * TN * GH * (double(I) + double(hout())) + 2.0 * TN * double(P) * double(H);
}

std::string RnnDesc::str() const {
  std::ostringstream os;
  os << rnn_mode_name(mode) << " " << dtype_name(dtype) << " t" << T << "n" << N << "i" << I << "h" << H;
  if (P > 0) os << "p" << P;
  if (!has_bias) os << " nobias";
  if (reverse) os << " reverse";
  if (has_lengths) os << " lengths";
  if (!training) os << " inference";
  return os.str();
}

void check_rnn_desc(const RnnDesc& d) {
  KILN_CHECK(d.T >= 1 && d.N >= 1 && d.I >= 1 && d.H >= 1, "rnn ", d.str(),
             ": sequence length, batch, input and hidden sizes must be positive");
  KILN_CHECK(d.P >= 0, "rnn ", d.str(), ": negative projection size ", d.P);
  KILN_CHECK(d.P == 0 || d.mode == RnnMode::lstm, "rnn ", d.str(), ": a projection (proj_size) exists for lstm only");
  KILN_CHECK(d.P < d.H, "rnn ", d.str(), ": proj_size ", d.P, " must be smaller than hidden_size ", d.H);
}

}  // namespace kiln
