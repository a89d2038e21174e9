#include "engine/random.h"

#include "engine/dispatch.h"
#include "engine/ops/iter.h"
#include "kernels/common/elementwise.h"

namespace kiln {

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

static Tensor& fill_random(Tensor& t, RandomKind kind, double a, double b, Generator* gen) {
  KILN_CHECK(t.defined(), "random fill of an undefined tensor");
  Generator& g = gen ? *gen : default_generator();
  RandomDesc d;
  d.kind = kind;
  d.dtype = t.dtype();
  d.a = a;
  d.b = b;
  d.seed = g.seed();
  d.loop = make_loop(t, {});
  const uint64_t n = uint64_t(t.numel());
  d.offset = g.advance(kind == RandomKind::normal ? 2 * n : n);
  t.bump_version();
  dispatch<kernel_op::random>(t.device().type, d, t.data_ptr());
  return t;
}

Tensor& uniform_(Tensor& t, double lo, double hi, Generator* gen) { return fill_random(t, RandomKind::uniform, lo, hi, gen); }
Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) { return fill_random(t, RandomKind::normal, mean, std, gen); }
Tensor& bernoulli_(Tensor& t, double p, Generator* gen) { return fill_random(t, RandomKind::bernoulli, p, 0, gen); }

Tensor rand(const Shape& shape, TensorOptions opts, Generator* gen) {
  bool rg = opts.requires_grad;
  opts.requires_grad = false;
  Tensor t = empty(shape, opts);
  uniform_(t, 0, 1, gen);
  return t.requires_grad_(rg);
}

Tensor randn(const Shape& shape, TensorOptions opts, Generator* gen) {
  bool rg = opts.requires_grad;
  opts.requires_grad = false;
  Tensor t = empty(shape, opts);
  normal_(t, 0, 1, gen);
  return t.requires_grad_(rg);
}

}  // namespace kiln
