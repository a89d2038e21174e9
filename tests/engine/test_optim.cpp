// Optimizers: torch.optim 1.13 values on a fixed problem, native against ref kernels, training a
// tiny linear model to near-zero loss, checkpoint state save/load continuing bit for bit, LARS
// against its formula, clip_grad_norm, and errors.
//   ctest --test-dir build -R engine.test_optim
#include "tests/support/testing.h"

#include <cmath>
#include <cstring>

#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/loss.h"
#include "engine/ops/optim.h"
#include "engine/ops/shape.h"
#include "engine/optim.h"
#include "kernels/common/parallel.h"

using namespace kiln;
using optim::Optimizer;

namespace {

// The fixed problem of the generating script below (values exact in binary).
//
// --- /usr/bin/python3 (Debian's torch 1.13), run once; its output is hard-coded below ---
// import torch
// torch.set_num_threads(1)
// def p0(n): return [((i*3) % 7 - 3)/4 + 0.125 for i in range(n)]
// def g(n, t, off): return [(((i*7 + t*3 + off) % 11) - 5)/8 for i in range(n)]
// def run(make, steps=4):
//     w = torch.tensor(p0(6), dtype=torch.float32).reshape(2,3).requires_grad_()
//     b = torch.tensor(p0(3)[::-1], dtype=torch.float32).requires_grad_()
//     opt = make([w, b])
//     for t in range(steps):
//         w.grad = torch.tensor(g(6, t, 0), dtype=torch.float32).reshape(2,3)
//         b.grad = None if t == 1 else torch.tensor(g(3, t, 5), dtype=torch.float32)
//         opt.step()
//     return [float(x) for x in w.detach().flatten()] + [float(x) for x in b.detach()]
// cfgs = {
//  'sgd_momentum': lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
//  'sgd_nesterov': lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True),
//  'sgd_plain': lambda p: torch.optim.SGD(p, lr=0.1),
//  'adam': lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1),
//  'adamw': lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
// }
// for k, f in cfgs.items():
//     print(k, ', '.join('%.9g' % v for v in run(f)))
// w = torch.zeros(2,3, requires_grad=True); b = torch.zeros(3, requires_grad=True)
// w.grad = torch.tensor(g(6,0,0)).reshape(2,3); b.grad = torch.tensor(g(3,0,5))
// n = torch.nn.utils.clip_grad_norm_([w,b], 0.5)
// print('clip', '%.9g' % float(n), ', '.join('%.9g' % float(v) for v in list(w.grad.flatten()) + list(b.grad)))
// --- end of script
std::vector<double> p0(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(((i * 3) % 7 - 3) / 4.0 + 0.125);
  return v;
}
std::vector<double> g(int n, int t, int off) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back((((i * 7 + t * 3 + off) % 11) - 5) / 8.0);
  return v;
}

NamedTensors fixed_params() {
  std::vector<double> b = p0(3);
  std::reverse(b.begin(), b.end());
  return {{"w", from_vector(p0(6), {2, 3}, DType::float32).requires_grad_()},
          {"b", from_vector(b, {3}, DType::float32).requires_grad_()}};
}

std::vector<double> run_fixed(Optimizer& opt, int steps = 4) {
  const NamedTensors& ps = opt.params();
  for (int t = 0; t < steps; ++t) {
    Tensor w = ps[0].second, b = ps[1].second;
    w.set_grad(from_vector(g(6, t, 0), {2, 3}, DType::float32));
    b.set_grad(t == 1 ? Tensor() : from_vector(g(3, t, 5), {3}, DType::float32));
    opt.step();
  }
  std::vector<double> out = ps[0].second.to_vector(), b = ps[1].second.to_vector();
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

void check_values(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    // On this machine Adam, AdamW and plain SGD agree bit for bit; momentum SGD differs by 1 ulp
    // in a few elements, because torch's AVX2 kernels contract `a + alpha * b` into an FMA and
    // kiln rounds the product (its kernels build without -mfma). Allow a few ulps.
    CHECK(std::abs(got[i] - want[i]) <= 2e-7 + 1e-6 * std::abs(want[i]));
  }
}

}  // namespace

TEST_CASE("optimizers equal torch.optim 1.13 on a fixed problem (float32, a parameter without grad)") {
  {
    auto o = optim::sgd(fixed_params(), {0.1, 0.9, 0.1, 0.01, false});
    check_values(run_fixed(*o), {-0.410739452, -0.0499819592, 0.882446885, -0.280773222, 0.551729918, -0.251008213,
                                 0.999673128, 0.160684824, -0.691694736});
    CHECK(o->steps() == 4);
    CHECK(o->name() == "sgd");
  }
  {
    auto o = optim::sgd(fixed_params(), {0.1, 0.9, 0.0, 0.01, true});
    check_values(run_fixed(*o), {-0.405873716, -0.0911863148, 0.883093536, -0.320829481, 0.554131508, -0.200396553,
                                 1.08461869, 0.109021299, -0.704644918});
  }
  {
    auto o = optim::sgd(fixed_params(), {0.1});
    check_values(run_fixed(*o),
                 {-0.600000024, 0.075000003, 0.887499988, -0.1875, 0.625, -0.3125, 0.962499976, 0.0874999911, -0.650000036});
    CHECK(o->state_tensors().empty());
  }
  {
    optim::AdamOptions a;
    a.lr = 0.01;
    a.weight_decay = 0.1;
    auto o = optim::adam(fixed_params(), a);
    check_values(run_fixed(*o), {-0.597605526, 0.0992070585, 0.875422418, -0.141291901, 0.602899313, -0.352650106,
                                 0.877744019, 0.133719102, -0.634923041});
    auto w = optim::adamw(fixed_params(), a);
    check_values(run_fixed(*w), {-0.597596943, 0.0992714167, 0.880566239, -0.141600162, 0.603881419, -0.353724748,
                                 0.887525499, 0.133874595, -0.637335718});
    CHECK(w->name() == "adamw");
  }
}

TEST_CASE("native optimizer kernels agree with ref (double oracle, float32 native)") {
  const Shape s{37, 53};  // odd sizes: vector tails
  Tensor p = test::make_input(s, 1), gr = test::make_input(s, 2), m = test::make_input(s, 3),
         v = test::make_input(s, 4, DType::float64, 0, 1);
  const std::vector<Tensor> three{p, gr, m}, four{p, gr, m, v};
  test::RefCompareOptions opt;
  opt.grads = false;
  for (int variant = 0; variant < 6; ++variant) {
    CAPTURE(variant);
    SGDStepDesc d;
    d.lr = 0.05;
    d.momentum = variant == 0 ? 0 : 0.9;
    d.dampening = variant == 2 ? 0.25 : 0;
    d.weight_decay = variant >= 3 ? 1e-2 : 0;
    d.nesterov = variant == 4 || variant == 5;
    d.first = variant == 5;
    test::Fn f = [d](const std::vector<Tensor>& in) {
      Tensor pp = in[0].clone(), bb = in[2].clone();
      ops::sgd_step(pp, in[1], bb, d);
      return ops::cat({pp.flatten(), bb.flatten()});
    };
    CHECK_AGAINST_REF(f, three, opt);
  }
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    AdamStepDesc d;
    d.lr = 0.01;
    d.weight_decay = variant == 0 ? 0 : 0.1;
    d.decoupled = variant == 2;
    d.step = 3;
    test::Fn f = [d](const std::vector<Tensor>& in) {
      Tensor pp = in[0].clone(), mm = in[2].clone(), vv = in[3].clone();
      ops::adam_step(pp, in[1], mm, vv, d);
      return ops::cat({pp.flatten(), mm.flatten(), vv.flatten()});
    };
    CHECK_AGAINST_REF(f, four, opt);
  }
  LarsStepDesc ld;
  ld.lr = 0.5;
  ld.local_lr = 0.02;
  ld.weight_decay = 1e-4;
  test::Fn lars = [ld](const std::vector<Tensor>& in) {
    Tensor pp = in[0].clone(), bb = in[2].clone();
    ops::lars_step(pp, in[1], bb, ld);
    return ops::cat({pp.flatten(), bb.flatten()});
  };
  CHECK_AGAINST_REF(lars, three, opt);
  test::Fn helpers = [](const std::vector<Tensor>& in) {
    Tensor pp = in[0].clone();
    ops::scale_(pp, 0.3);
    return ops::cat({pp.flatten(), scalar_tensor(ops::sum_squares(in[1]), pp.dtype()).reshape({1})});
  };
  CHECK_AGAINST_REF(helpers, three, opt);
}

TEST_CASE("native and ref float32 Adam updates are bit-identical and thread-count independent") {
  Tensor p = test::make_input({100003}, 5, DType::float32), gr = test::make_input({100003}, 6, DType::float32);
  auto run = [&](const char* backend, int threads) {
    BackendGuard guard(backend, true);
    const int before = num_threads();
    set_num_threads(threads);
    Tensor pp = p.clone(), m = zeros(p.sizes()), v = zeros(p.sizes());
    AdamStepDesc d;
    for (int64_t t = 1; t <= 3; ++t) {
      d.step = t;
      ops::adam_step(pp, gr, m, v, d);
    }
    set_num_threads(before);
    return pp;
  };
  Tensor a = run("ref", 1), b = run("native", 1), c = run("native", 2);
  CHECK(std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.numel()) * 4) == 0);
  CHECK(std::memcmp(b.data_ptr(), c.data_ptr(), size_t(a.numel()) * 4) == 0);
}

namespace {

// A tiny problem: 3-class classification of 64 points in 4-d by a linear model whose labels a
// fixed linear map gives (separable), and a linear regression.
struct Tiny {
  Tensor x, y, target, w, b;
  explicit Tiny(uint64_t seed) {
    x = test::make_input({64, 4}, seed, DType::float32);
    Tensor true_w = test::make_input({4, 3}, seed + 1, DType::float32, -2, 2);
    Tensor logits = ops::matmul(x, true_w);
    std::vector<double> l = logits.to_vector(), t;
    for (int n = 0; n < 64; ++n)
      t.push_back(double(std::max_element(l.begin() + 3 * n, l.begin() + 3 * n + 3) - (l.begin() + 3 * n)));
    target = from_vector(t, {64}, DType::int64);
    y = logits;  // regression target
    w = zeros({4, 3}).requires_grad_();
    b = zeros({3}).requires_grad_();
  }
  NamedTensors params() const { return {{"fc.weight", w}, {"fc.bias", b}}; }
  Tensor classify_loss() const { return ops::cross_entropy(ops::matmul(x, w) + b, target); }
  Tensor regress_loss() const { return ops::mse_loss(ops::matmul(x, w) + b, y); }
};

double train(Optimizer& opt, const std::function<Tensor()>& loss_fn, int steps) {
  double loss = 0;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor l = loss_fn();
    loss = l.item();
    l.backward();
    opt.step();
  }
  return loss;
}

}  // namespace

TEST_CASE("SGD with momentum and Adam fit a tiny linear model") {
  {
    Tiny t(10);
    auto o = optim::sgd(t.params(), {0.1, 0.9});
    const double first = t.regress_loss().item();
    CHECK(train(*o, [&] { return t.regress_loss(); }, 200) < 1e-6 * first);
  }
  {
    Tiny t(20);
    auto o = optim::adam(t.params(), {0.05});
    const double first = t.regress_loss().item();
    CHECK(train(*o, [&] { return t.regress_loss(); }, 400) < 1e-4 * first);
  }
  for (std::string name : {"nesterov", "adam", "adamw", "lars"}) {
    CAPTURE(name);
    Tiny t(30);
    optim::OptimizerConfig c;
    c.name = name;
    c.lr = name == "lars" ? 5.0 : name == "nesterov" ? 0.5 : 0.05;
    auto o = optim::make_optimizer(c, t.params());
    CHECK(t.classify_loss().item() == doctest::Approx(std::log(3.0)));
    CHECK(train(*o, [&] { return t.classify_loss(); }, 300) < 0.1);
  }
}

TEST_CASE("state save/load continues bit for bit") {
  for (const char* name : {"sgd", "nesterov", "adam", "adamw", "lars"}) {
    CAPTURE(name);
    optim::OptimizerConfig c;
    c.name = name;
    c.lr = std::string(name) == "lars" ? 5.0 : 0.05;
    c.weight_decay = 1e-3;
    auto loss_of = [](const Tiny& t) { return [&t] { return t.classify_loss(); }; };
    // Uninterrupted: 10 steps.
    Tiny a(40);
    auto oa = optim::make_optimizer(c, a.params());
    train(*oa, loss_of(a), 10);
    // Interrupted after 6: state out, a fresh model and optimizer take it in and go on for 4.
    Tiny b(40);
    auto ob = optim::make_optimizer(c, b.params());
    train(*ob, loss_of(b), 6);
    ob->set_lr(0.123);  // a schedule's lr is part of the state
    const std::string js = ob->state_json();
    const NamedTensors st = ob->state_tensors();
    Tiny r(40);
    r.w = b.w.detach().clone().requires_grad_();
    r.b = b.b.detach().clone().requires_grad_();
    auto c2 = c;
    c2.lr = 1.0;
    auto orr = optim::make_optimizer(c2, r.params());
    orr->load_state(js, st);
    CHECK(orr->steps() == 6);
    CHECK(orr->lr() == 0.123);
    orr->set_lr(oa->lr());
    train(*orr, loss_of(r), 4);
    CHECK(std::memcmp(r.w.data_ptr(), a.w.data_ptr(), 12 * 4) == 0);
    CHECK(std::memcmp(r.b.data_ptr(), a.b.data_ptr(), 3 * 4) == 0);
    CHECK(orr->state_json() == oa->state_json());
  }
  Tiny t(1);
  auto o = optim::adam(t.params(), {});
  train(*o, [&] { return t.classify_loss(); }, 1);
  NamedTensors st = o->state_tensors();
  REQUIRE(st.size() == 4);
  CHECK(st[0].first == "fc.weight.exp_avg");
  CHECK(st[3].first == "fc.bias.exp_avg_sq");
}

TEST_CASE("load_state errors name the parameter or slot") {
  Tiny t(2);
  auto o = optim::sgd(t.params(), {0.1, 0.9});
  train(*o, [&] { return t.classify_loss(); }, 2);
  const std::string js = o->state_json();
  const NamedTensors st = o->state_tensors();
  auto a = optim::adam(t.params(), {});
  CHECK_THROWS_KILN(a->load_state(js, st), "the state is of optimizer 'sgd', this optimizer is 'adam'");
  NamedTensors missing = {st[0]};
  CHECK_THROWS_KILN(o->load_state(js, missing), "missing state tensor 'fc.bias.momentum_buffer'");
  NamedTensors extra = st;
  extra.emplace_back("fc.weight.exp_avg", zeros({4, 3}));
  CHECK_THROWS_KILN(o->load_state(js, extra), "unexpected state tensor 'fc.weight.exp_avg'");
  NamedTensors shape = st;
  shape[1].second = zeros({4});
  CHECK_THROWS_KILN(o->load_state(js, shape), "state tensor 'fc.bias.momentum_buffer' is [4], parameter 'fc.bias' is [3]");
  auto other = optim::sgd({{"head.weight", t.w}}, {0.1, 0.9});
  CHECK_THROWS_KILN(other->load_state(js, st), "no entry for parameter 'head.weight'");
  auto fewer = optim::sgd({{"fc.weight", t.w}}, {0.1, 0.9});
  CHECK_THROWS_KILN(fewer->load_state(js, st), "parameter 'fc.bias', which this optimizer does not have");
  CHECK_THROWS_KILN(o->load_state("{not json", st), "does not parse");
  auto nomom = optim::sgd(t.params(), {0.1});
  CHECK_THROWS_KILN(nomom->load_state(js, {}), "the state has momentum 0.9, this sgd has 0");
  // Failed loads change nothing.
  CHECK(o->steps() == 2);
  CHECK(o->state_json() == js);
}

TEST_CASE("make_optimizer names, defaults and option errors") {
  Tiny t(3);
  optim::OptimizerConfig c;
  c.name = "adamw";
  auto w = optim::make_optimizer(c, t.params());
  CHECK(w->state_json().find("\"weight_decay\":0.01") != std::string::npos);
  c.name = "nesterov";
  CHECK(optim::make_optimizer(c, t.params())->state_json().find("\"nesterov\":1.0") != std::string::npos);
  c.name = "rmsprop";
  CHECK_THROWS_KILN(optim::make_optimizer(c, t.params()),
                    "unknown optimizer 'rmsprop' (known: sgd, nesterov, adam, adamw, lars)");
  CHECK_THROWS_KILN(optim::sgd(t.params(), {0.1, 0, 0, 0, true}), "nesterov needs momentum > 0");
  CHECK_THROWS_KILN(optim::adam(t.params(), {1e-3, 1.0}), "beta1 must be in [0, 1)");
  CHECK_THROWS_KILN(optim::sgd(t.params(), {-1.0}), "learning rate must be finite and >= 0");
  CHECK_THROWS_KILN(optim::sgd({{"a", t.w}, {"a", t.b}}, {}), "parameter name 'a' appears twice");
  CHECK_THROWS_KILN(optim::sgd({{"i", zeros({2}, DType::int64)}}, {}), "parameter 'i' is int64");
  Tensor tw = t.w;
  tw.set_grad(zeros({4, 3}));
  auto o = optim::sgd(t.params(), {});
  o->step();
  o->zero_grad();
  CHECK_FALSE(t.w.grad().defined());
}

TEST_CASE("LARS follows You et al.'s local learning rate; 1-d parameters excluded") {
  Tensor w = from_vector(std::vector<double>{3, 4}, {1, 2}, DType::float64).requires_grad_();  // ||w|| = 5
  Tensor b = from_vector(std::vector<double>{1, -1}, {2}, DType::float64).requires_grad_();
  optim::LARSOptions lo;
  lo.lr = 2;
  lo.momentum = 0.5;
  lo.weight_decay = 0.1;
  lo.trust_coefficient = 0.01;
  lo.eps = 0;
  auto o = optim::lars({{"w", w}, {"b", b}}, lo);
  w.set_grad(from_vector(std::vector<double>{0.6, 0.8}, {1, 2}, DType::float64));  // ||g|| = 1
  b.set_grad(from_vector(std::vector<double>{0.5, 0.5}, {2}, DType::float64));
  o->step();
  // local = 0.01 * 5 / (1 + 0.1 * 5) = 1/30; v = 2 * (1/30) * (g + 0.1 w); w -= v
  const double local = 0.01 * 5 / 1.5;
  CHECK(w.at({0, 0}) == doctest::Approx(3 - 2 * local * (0.6 + 0.3)).epsilon(1e-14));
  CHECK(w.at({0, 1}) == doctest::Approx(4 - 2 * local * (0.8 + 0.4)).epsilon(1e-14));
  // bias: plain momentum SGD without decay: v = 2 * 0.5
  CHECK(b.to_vector() == std::vector<double>{0, -2});
  o->step();  // same grads: v = 0.5 v + 2 * g
  CHECK(b.to_vector() == std::vector<double>{1.0 - 1 - 1.5, -2.0 - 1.5});
}

TEST_CASE("clip_grad_norm equals torch.nn.utils.clip_grad_norm_") {
  Tensor w = zeros({2, 3}).requires_grad_(), b = zeros({3}).requires_grad_(), none = zeros({2}).requires_grad_();
  NamedTensors ps{{"w", w}, {"b", b}, {"none", none}};
  w.set_grad(from_vector(g(6, 0, 0), {2, 3}, DType::float32));
  b.set_grad(from_vector(g(3, 0, 5), {3}, DType::float32));
  CHECK(optim::clip_grad_norm(ps, 10.0) == doctest::Approx(1.20545638).epsilon(1e-7));
  CHECK(w.grad().to_vector() == from_vector(g(6, 0, 0), {6}, DType::float32).to_vector());  // below max: untouched
  CHECK(optim::clip_grad_norm(ps, 0.5) == doctest::Approx(1.20545638).epsilon(1e-7));
  std::vector<double> got = w.grad().to_vector(), gb = b.grad().to_vector();
  got.insert(got.end(), gb.begin(), gb.end());
  check_values(got, {-0.259237707, 0.103695087, -0.103695087, 0.259237707, 0.0518475436, -0.155542627, 0, -0.207390174,
                     0.155542627});
  CHECK(std::sqrt(ops::sum_squares(w.grad()) + ops::sum_squares(b.grad())) == doctest::Approx(0.5).epsilon(1e-5));
  CHECK_THROWS_KILN(optim::clip_grad_norm(ps, 0), "max_norm must be finite and > 0");
}
