#include "layers/init.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/autograd.h"
#include "engine/error.h"

namespace kiln::init {

double calculate_gain(Nonlinearity nl, double param) {
  switch (nl) {
    case Nonlinearity::linear: case Nonlinearity::conv: case Nonlinearity::sigmoid: return 1.0;
    case Nonlinearity::tanh: return 5.0 / 3.0;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leaky_relu: return std::sqrt(2.0 / (1.0 + param * param));
    case Nonlinearity::selu: return 3.0 / 4.0;
  }
  return 1.0;
}

std::pair<int64_t, int64_t> fans(const Tensor& t) {
  KILN_CHECK(t.defined() && t.dim() >= 1, "init: fans need a tensor of at least 1 dim, got ",
             t.defined() ? shape_str(t.sizes()) : std::string("an undefined tensor"));
  if (t.dim() == 1) return {t.size(0), t.size(0)};
  int64_t field = 1;
  for (int64_t d = 2; d < t.dim(); ++d) field *= t.size(d);
  return {t.size(1) * field, t.size(0) * field};
}

namespace {
double fan_of(const Tensor& t, FanMode mode, const char* fn) {
  const auto [in, out] = fans(t);
  const int64_t f = mode == FanMode::fan_in ? in : out;
  KILN_CHECK(f > 0, fn, ": the fan of ", shape_str(t.sizes()), " is 0");
  return double(f);
}
}  // namespace

Tensor uniform_(Tensor t, double a, double b, Generator* gen) {
  KILN_CHECK(a <= b, "init::uniform_: a = ", a, " is greater than b = ", b);
  NoGradGuard ng;
  return kiln::uniform_(t, a, b, gen);
}

Tensor normal_(Tensor t, double mean, double std, Generator* gen) {
  KILN_CHECK(std >= 0, "init::normal_: std must be at least 0, got ", std);
  NoGradGuard ng;
  return kiln::normal_(t, mean, std, gen);
}

Tensor trunc_normal_(Tensor t, double mean, double std, double a, double b, Generator* gen) {
  KILN_CHECK(std > 0 && a < b, "init::trunc_normal_: needs std > 0 and a < b, got std = ", std, ", [", a, ", ", b, "]");
  const auto cdf = [&](double x) { return 0.5 * std::erfc(-(x - mean) / (std * std::sqrt(2.0))); };
  KILN_CHECK(cdf(b) - cdf(a) >= 1e-6, "init::trunc_normal_: [", a, ", ", b, "] holds less than 1e-6 of N(", mean, ", ",
             std, ")");
  NoGradGuard ng;
  // Draw in double on the host, redraw the misses in rounds (each round keeps the generator's
  // stream deterministic), then copy into t whatever its device and dtype.
  Tensor host = empty(t.sizes(), kiln::float64);
  kiln::normal_(host, mean, std, gen);
  double* v = host.data<double>();
  std::vector<int64_t> miss;
  for (int64_t i = 0; i < host.numel(); ++i)
    if (!(v[i] >= a && v[i] <= b)) miss.push_back(i);
  while (!miss.empty()) {
    Tensor redraw = empty({int64_t(miss.size())}, kiln::float64);
    kiln::normal_(redraw, mean, std, gen);
    const double* r = redraw.data<double>();
    std::vector<int64_t> still;
    for (size_t j = 0; j < miss.size(); ++j) {
      if (r[j] >= a && r[j] <= b) v[miss[j]] = r[j];
      else still.push_back(miss[j]);
    }
    miss.swap(still);
  }
  t.copy_(host);
  return t;
}

Tensor constant_(Tensor t, double value) {
  NoGradGuard ng;
  return t.fill_(value);
}
Tensor zeros_(Tensor t) { return constant_(t, 0.0); }
Tensor ones_(Tensor t) { return constant_(t, 1.0); }

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  const double bound = calculate_gain(nl, a) * std::sqrt(3.0 / fan_of(t, mode, "kaiming_uniform_"));
  return init::uniform_(t, -bound, bound, gen);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  return init::normal_(t, 0.0, calculate_gain(nl, a) / std::sqrt(fan_of(t, mode, "kaiming_normal_")), gen);
}

Tensor xavier_uniform_(Tensor t, double gain, Generator* gen) {
  const auto [in, out] = fans(t);
  KILN_CHECK(in + out > 0, "xavier_uniform_: the fans of ", shape_str(t.sizes()), " are 0");
  const double bound = gain * std::sqrt(6.0 / double(in + out));
  return init::uniform_(t, -bound, bound, gen);
}

Tensor xavier_normal_(Tensor t, double gain, Generator* gen) {
  const auto [in, out] = fans(t);
  KILN_CHECK(in + out > 0, "xavier_normal_: the fans of ", shape_str(t.sizes()), " are 0");
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / double(in + out)), gen);
}

}  // namespace kiln::init
