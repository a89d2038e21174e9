// Multi-tensor optimizer updates on the CPU (engine/ops/optim.h, engine/optim.h): the list ops
// against the single-tensor ops, and optimizers stepping by groups against the same optimizers
// stepping one parameter at a time, BIT FOR BIT (the CPU list kernels loop over the single-tensor
// kernels), over tensors of 1, 7, 1000 and 4097 elements (and big ones that the native kernels
// split across threads), for SGD (plain, momentum, Nesterov), Adam, AdamW and LARS, with undefined
// gradients and LARS's 1-d exclusions; plus how many calls a step makes, and clip_grad_norm.
//   ctest --test-dir build -R engine.test_multi_tensor
#include "tests/support/testing.h"

#include <cstring>
#include <functional>

#include "engine/dispatch.h"
#include "engine/ops/optim.h"
#include "engine/optim.h"
#include "kernels/common/parallel.h"

using namespace kiln;
using kiln::test::make_input;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel()) * element_size(ca.dtype())) == 0;
}

// 8 x {1, 7, 1000, 4097}: enough small tensors that the native list runs them side by side; and
// two the native kernels split across threads.
std::vector<int64_t> list_sizes() {
  std::vector<int64_t> s;
  for (int r = 0; r < 8; ++r)
    for (int64_t n : {1, 7, 1000, 4097}) s.push_back(n);
  s.push_back(20000);
  s.push_back(70001);
  return s;
}

struct Lists {
  std::vector<Tensor> p, g, s0, s1;
};

Lists make_lists(const std::vector<int64_t>& sizes, DType dt, uint64_t seed) {
  Lists l;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint64_t k = seed + 10 * i;
    l.p.push_back(make_input({sizes[i]}, k, dt));
    l.g.push_back(make_input({sizes[i]}, k + 1, dt));
    l.s0.push_back(make_input({sizes[i]}, k + 2, dt));
    l.s1.push_back(make_input({sizes[i]}, k + 3, dt, 0, 1));
  }
  return l;
}

Lists clone(const Lists& l) {
  Lists c;
  for (size_t i = 0; i < l.p.size(); ++i) {
    c.p.push_back(l.p[i].clone());
    c.g.push_back(l.g[i].clone());
    c.s0.push_back(l.s0[i].clone());
    c.s1.push_back(l.s1[i].clone());
  }
  return c;
}

void check_lists_equal(const Lists& a, const Lists& b) {
  for (size_t i = 0; i < a.p.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(a.p[i], b.p[i]));
    CHECK(same_bits(a.s0[i], b.s0[i]));
    CHECK(same_bits(a.s1[i], b.s1[i]));
  }
}

double local_lr_of(size_t i) { return 0.25 + 0.05 * double(i % 7); }

// The list op on `a`, the single-tensor op on each tensor of `b`.
void run_both(const MultiTensorDesc& d, Lists& a, Lists& b) {
  std::vector<ops::MultiTensorItem> items;
  for (size_t i = 0; i < a.p.size(); ++i)
    items.push_back({a.p[i], a.g[i], a.s0[i], a.s1[i], local_lr_of(i)});
  const int64_t calls = ops::optim_update_calls();
  ops::multi_tensor_step(items, d);
  CHECK(ops::optim_update_calls() == calls + 1);
  for (size_t i = 0; i < b.p.size(); ++i) {
    switch (d.op) {
      case MultiTensorOp::sgd: ops::sgd_step(b.p[i], b.g[i], b.s0[i], d.sgd); break;
      case MultiTensorOp::adam: ops::adam_step(b.p[i], b.g[i], b.s0[i], b.s1[i], d.adam); break;
      case MultiTensorOp::lars: {
        LarsStepDesc l = d.lars;
        l.local_lr = local_lr_of(i);
        ops::lars_step(b.p[i], b.g[i], b.s0[i], l);
        break;
      }
    }
  }
}

std::vector<MultiTensorDesc> op_cases() {
  std::vector<MultiTensorDesc> out;
  for (int key = 0; key < 16; ++key) {  // SGD: momentum, nesterov, decay, first
    MultiTensorDesc d;
    d.op = MultiTensorOp::sgd;
    d.sgd.lr = 0.05, d.sgd.momentum = key & 1 ? 0.9 : 0, d.sgd.nesterov = (key & 1) && (key & 2);
    d.sgd.weight_decay = key & 4 ? 1e-3 : 0, d.sgd.first = (key & 8) != 0, d.sgd.dampening = d.sgd.nesterov ? 0 : 0.1;
    out.push_back(d);
  }
  for (int key = 0; key < 4; ++key) {  // Adam / AdamW, with and without decay
    MultiTensorDesc d;
    d.op = MultiTensorOp::adam;
    d.adam.step = 1 + 3 * key, d.adam.weight_decay = key & 1 ? 0.01 : 0, d.adam.decoupled = (key & 2) != 0;
    out.push_back(d);
  }
  for (double wd : {0.0, 5e-4}) {
    MultiTensorDesc d;
    d.op = MultiTensorOp::lars;
    d.lars.weight_decay = wd;
    out.push_back(d);
  }
  return out;
}

}  // namespace

TEST_CASE("multi_tensor_step equals the single-tensor ops bit for bit (native and ref, float32 and float64)") {
  const std::vector<int64_t> sizes = list_sizes();
  const int threads = num_threads();
  // native splits the concatenated list into one range per thread: 3 threads cut tensors at odd places.
  for (int nt : {threads, 1, 3})
    for (const char* backend : {"native", "ref"})
      for (DType dt : {DType::float32, DType::float64}) {
        set_num_threads(nt);
        BackendGuard guard(backend, true);
        const Lists base = make_lists(sizes, dt, 7);
        for (const MultiTensorDesc& d : op_cases()) {
          CAPTURE(nt);
          CAPTURE(backend);
          CAPTURE(d.str());
          CAPTURE(d.sgd.str());
          Lists a = clone(base), b = clone(base);
          run_both(d, a, b);
          check_lists_equal(a, b);
        }
      }
  set_num_threads(threads);
}

TEST_CASE("multi_tensor_step: SGD without momentum takes undefined buffers; errors name the item") {
  const std::vector<int64_t> sizes = {1, 7, 1000, 4097};
  Lists a = make_lists(sizes, DType::float32, 3), b = clone(a);
  MultiTensorDesc d;
  d.op = MultiTensorOp::sgd;
  d.sgd.lr = 0.1;
  std::vector<ops::MultiTensorItem> items;
  for (size_t i = 0; i < sizes.size(); ++i) items.push_back({a.p[i], a.g[i], Tensor(), Tensor(), 1});
  ops::multi_tensor_step(items, d);
  for (size_t i = 0; i < sizes.size(); ++i) {
    ops::sgd_step(b.p[i], b.g[i], Tensor(), d.sgd);
    CHECK(same_bits(a.p[i], b.p[i]));
  }
  ops::multi_tensor_step({}, d);  // nothing to do

  items[2].grad = make_input({999}, 1, DType::float32);
  CHECK_THROWS_KILN(ops::multi_tensor_step(items, d), "multi_tensor_step(sgd) item 2: gradient [999]");
  items[2].grad = a.g[2];
  items[1].param = make_input({7}, 1, DType::float64);
  items[1].grad = items[1].param;
  CHECK_THROWS_KILN(ops::multi_tensor_step(items, d), "item 1: parameter");
  d.op = MultiTensorOp::adam;
  items[1] = items[0];
  CHECK_THROWS_KILN(ops::multi_tensor_step(items, d), "multi_tensor_step(adam) item 0: exp_avg is undefined");
}

TEST_CASE("multi_sum_squares equals sum_squares per tensor bit for bit, any layout and dtype") {
  const int threads = num_threads();
  for (int nt : {threads, 3})
    for (const char* backend : {"native", "ref"}) {
      set_num_threads(nt);
      BackendGuard guard(backend, true);
      CAPTURE(nt);
      CAPTURE(backend);
      std::vector<Tensor> xs;
      for (int64_t n : list_sizes()) xs.push_back(make_input({n}, uint64_t(n), DType::float32));
      xs.push_back(make_input({0}, 1, DType::float32));
      xs.push_back(make_input({33, 9}, 2, DType::float64).transpose(0, 1));  // not contiguous
      xs.push_back(make_input({5, 3}, 3, DType::float64).to(DType::float16));
      xs.push_back(make_input({4097}, 4, DType::float64));
      const std::vector<double> got = ops::multi_sum_squares(xs);
      REQUIRE(got.size() == xs.size());
      for (size_t i = 0; i < xs.size(); ++i) {
        CAPTURE(i);
        const double want = ops::sum_squares(xs[i]);
        CHECK(std::memcmp(&got[i], &want, sizeof(double)) == 0);
      }
    }
  set_num_threads(threads);
  CHECK(ops::multi_sum_squares({}).empty());
}

namespace {

// Parameters of odd sizes (1-d ones for LARS's exclusions), float32 plus one float64 group.
NamedTensors make_params(uint64_t seed) {
  const std::vector<Shape> shapes = {{1}, {7}, {10, 100}, {4097}, {3, 5, 7, 9}, {1000}, {64, 33}, {7, 1}};
  NamedTensors ps;
  for (size_t i = 0; i < shapes.size(); ++i)
    ps.emplace_back("p" + std::to_string(i), make_input(shapes[i], seed + i, DType::float32).requires_grad_());
  ps.emplace_back("d0", make_input({17, 3}, seed + 50, DType::float64).requires_grad_());
  ps.emplace_back("d1", make_input({5}, seed + 51, DType::float64).requires_grad_());
  return ps;
}

NamedTensors clone_params(const NamedTensors& ps) {
  NamedTensors out;
  for (auto& [n, p] : ps) out.emplace_back(n, p.detach().clone().requires_grad_());
  return out;
}

// The gradients of step t: some undefined (never for parameter 0 at t == 0; p2 skips step 1, p5
// skips steps 0 and 2, d1 skips step 3), so update counts differ across parameters.
void set_grads(const NamedTensors& ps, int t) {
  for (size_t i = 0; i < ps.size(); ++i) {
    Tensor p = ps[i].second;
    const bool skip = (i == 2 && t == 1) || (i == 5 && (t == 0 || t == 2)) || (i == ps.size() - 1 && t == 3);
    p.set_grad(skip ? Tensor() : make_input(p.sizes(), uint64_t(1000 + 37 * t + int(i)), p.dtype()));
  }
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(NamedTensors)>;

// Steps a grouped and a per-parameter optimizer side by side; returns the calls of the grouped one.
std::vector<int64_t> compare_optimizers(const MakeOpt& make, bool clip = false) {
  const NamedTensors base = make_params(11);
  NamedTensors pa = clone_params(base), pb = clone_params(base);
  auto a = make(pa), b = make(pb);
  a->set_multi_tensor(true);
  b->set_multi_tensor(false);
  std::vector<int64_t> calls;
  for (int t = 0; t < 5; ++t) {
    CAPTURE(t);
    set_grads(pa, t);
    set_grads(pb, t);
    if (clip) {
      const double na = optim::clip_grad_norm(pa, 0.5), nb = optim::clip_grad_norm(pb, 0.5);
      CHECK(std::memcmp(&na, &nb, sizeof(double)) == 0);
    }
    const int64_t c0 = ops::optim_update_calls();
    a->step();
    calls.push_back(ops::optim_update_calls() - c0);
    b->step();
    a->set_lr(a->lr() * 0.9);
    b->set_lr(b->lr() * 0.9);
  }
  for (size_t i = 0; i < pa.size(); ++i) {
    CAPTURE(pa[i].first);
    CHECK(same_bits(pa[i].second, pb[i].second));
  }
  CHECK(a->state_json() == b->state_json());
  const NamedTensors sa = a->state_tensors(), sb = b->state_tensors();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    CAPTURE(sa[i].first);
    CHECK(sa[i].first == sb[i].first);
    CHECK(same_bits(sa[i].second, sb[i].second));
  }
  return calls;
}

}  // namespace

TEST_CASE("optimizers stepping by groups equal one call per parameter, bit for bit (params and state)") {
  using V = std::vector<int64_t>;
  SUBCASE("sgd plain") {
    // One group per dtype; d1 alone at step 3 runs the per-tensor op (also one call).
    CHECK(compare_optimizers([](NamedTensors p) { return optim::sgd(std::move(p), {0.1}); }) == V{2, 2, 2, 2, 2});
  }
  SUBCASE("sgd momentum, dampening, decay (first steps split the group)") {
    const V calls = compare_optimizers([](NamedTensors p) { return optim::sgd(std::move(p), {0.1, 0.9, 0.1, 0.01}); });
    CHECK(calls == V{2, 3, 2, 2, 2});  // step 1: p5's first update is a group of its own
  }
  SUBCASE("sgd nesterov with clipping") {
    compare_optimizers([](NamedTensors p) { return optim::sgd(std::move(p), {0.1, 0.9, 0, 0.01, true}); }, true);
  }
  SUBCASE("adam (groups of equal update counts)") {
    compare_optimizers([](NamedTensors p) { return optim::adam(std::move(p), {0.01, 0.9, 0.999, 1e-8, 0.1}); });
  }
  SUBCASE("adamw") {
    compare_optimizers([](NamedTensors p) { return optim::adamw(std::move(p), {0.01, 0.9, 0.999, 1e-8, 0.1}); });
  }
  SUBCASE("lars with 1-d exclusions") {
    optim::LARSOptions o;
    o.weight_decay = 5e-4;
    // float32: included {p2, p4, p6, p7}, excluded {p0, p1, p3, p5}; float64: d0 alone, d1 alone.
    CHECK(compare_optimizers([o](NamedTensors p) { return optim::lars(std::move(p), o); })[0] == 4);
  }
  SUBCASE("lars without exclusions, clipped") {
    optim::LARSOptions o;
    o.weight_decay = 5e-4, o.exclude_1d = false;
    compare_optimizers([o](NamedTensors p) { return optim::lars(std::move(p), o); }, true);
  }
}

TEST_CASE("a grouped step through the ref backend equals the native one's bits (elementwise updates)") {
  const NamedTensors base = make_params(5);
  NamedTensors pa = clone_params(base), pb = clone_params(base);
  auto a = optim::adam(pa, {}), b = optim::adam(pb, {});
  set_grads(pa, 0);
  set_grads(pb, 0);
  {
    BackendGuard g("ref", true);
    a->step();
  }
  {
    BackendGuard g("native", true);
    b->step();
  }
  for (size_t i = 0; i < pa.size(); ++i) CHECK(same_bits(pa[i].second, pb[i].second));
}
