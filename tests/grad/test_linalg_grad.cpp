// matmul and linear: native float32 against ref float64 (outputs and gradients of every operand)
// and finite-difference gradients, on odd shapes, batch 1, transposed and sliced (non-contiguous)
// operands, 3-d @ 2-d, leading dims of linear, and with and without bias.
//   ctest --test-dir build -R grad.test_linalg_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include "engine/dispatch.h"
#include "engine/ops/linalg.h"
#include "engine/ops/reduce.h"

#include <array>

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;

namespace {

// A view with a leading dim larger than its rows (every other column of a wider matrix).
Tensor strided_cols(const Tensor& t) {
  NoGradGuard ng;
  Shape big = t.sizes();
  big.back() = big.back() * 2 + 1;
  Tensor buf = zeros(big, TensorOptions(t.dtype()));
  Tensor v = buf.narrow(-1, 1, t.size(-1));
  v.copy_(t);
  return v;
}

const test::Fn kMatmul = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
const test::Fn kLinear = [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); };
const test::Fn kLinearNoBias = [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1]); };
}  // namespace

TEST_CASE("matmul 2-d: against ref and gradcheck") {
  for (const auto& dims : std::vector<std::array<int64_t, 3>>{{3, 5, 4}, {1, 7, 1}, {4, 1, 3}, {1, 1, 1}, {6, 2, 5}}) {
    const int64_t m = dims[0], k = dims[1], n = dims[2];
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    Tensor a = req(make_input({m, k}, 1)), b = req(make_input({k, n}, 2));
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{a, b}));
    CHECK_GRAD(kMatmul, (std::vector<Tensor>{a, b}));
    // Transposed views (column-major to the GEMM) and padded leading dims.
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{req(non_contiguous(a.detach())), b}));
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{a, req(non_contiguous(b.detach()))}));
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{req(strided_cols(a.detach())), req(strided_cols(b.detach()))}));
    // Only one operand needs a gradient.
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{a.detach(), b}));
  }
  // Gradcheck through transposed and sliced views (the views themselves are differentiable).
  Tensor a = req(make_input({4, 3}, 3)), b = req(make_input({5, 4}, 4));
  CHECK_GRAD([](const std::vector<Tensor>& in) { return ops::matmul(in[0].t(), in[1].t()); },
             (std::vector<Tensor>{a, b}));
  Tensor w = req(make_input({3, 8}, 5));
  CHECK_GRAD([](const std::vector<Tensor>& in) { return ops::matmul(in[0].slice(1, 0, 8, 2), in[1]); },
             (std::vector<Tensor>{w, req(make_input({4, 2}, 6))}));
}

TEST_CASE("matmul on sizes that cross the GEMM blocks, against ref") {
  Tensor a = req(make_input({70, 300}, 7)), b = req(make_input({300, 45}, 8));
  test::RefCompareOptions opt;
  opt.rtol = 1e-4;
  opt.atol = 1e-4;
  CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{a, b}), opt);
  CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{req(non_contiguous(a.detach())), req(non_contiguous(b.detach()))}), opt);
}

TEST_CASE("batched matmul: 3-d @ 3-d and 3-d @ 2-d") {
  for (const auto& dims : std::vector<std::array<int64_t, 4>>{{2, 3, 4, 5}, {1, 3, 4, 2}, {3, 1, 2, 1}}) {
    const int64_t bt = dims[0], m = dims[1], k = dims[2], n = dims[3];
    CAPTURE(bt);
    Tensor a = req(make_input({bt, m, k}, 9)), b = req(make_input({bt, k, n}, 10)), b2 = req(make_input({k, n}, 11));
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{a, b}));
    CHECK_GRAD(kMatmul, (std::vector<Tensor>{a, b}));
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{req(non_contiguous(a.detach())), req(non_contiguous(b.detach()))}));
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{a, b2}));
    CHECK_GRAD(kMatmul, (std::vector<Tensor>{a, b2}));
    // A does not flatten to [B*m, k] when its last two dims are transposed: copied first.
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{req(non_contiguous(a.detach())), b2}));
    CHECK_AGAINST_REF(kMatmul, (std::vector<Tensor>{a, req(non_contiguous(b2.detach()))}));
  }
  // A batch dim that is a broadcast (stride 0) and a batch slice.
  Tensor a = req(make_input({1, 3, 4}, 12));
  CHECK_GRAD([](const std::vector<Tensor>& in) { return ops::matmul(in[0].expand({3, 3, 4}), in[1]); },
             (std::vector<Tensor>{a, req(make_input({3, 4, 2}, 13))}));
  Tensor big = req(make_input({4, 3, 5}, 14));
  CHECK_AGAINST_REF([](const std::vector<Tensor>& in) { return ops::matmul(in[0].slice(0, 0, 4, 2), in[1]); },
                    (std::vector<Tensor>{big, req(make_input({2, 5, 3}, 15))}));
}

TEST_CASE("linear: against ref and gradcheck, with and without bias") {
  for (Shape xs : {Shape{5, 3}, Shape{1, 3}, Shape{3}, Shape{2, 3, 3}, Shape{2, 1, 2, 3}}) {
    CAPTURE(shape_str(xs));
    Tensor x = req(make_input(xs, 16)), w = req(make_input({4, 3}, 17)), b = req(make_input({4}, 18));
    CHECK_AGAINST_REF(kLinear, (std::vector<Tensor>{x, w, b}));
    CHECK_GRAD(kLinear, (std::vector<Tensor>{x, w, b}));
    CHECK_AGAINST_REF(kLinearNoBias, (std::vector<Tensor>{x, w}));
    CHECK_GRAD(kLinearNoBias, (std::vector<Tensor>{x, w}));
    if (x.dim() >= 2)
      CHECK_AGAINST_REF(kLinear, (std::vector<Tensor>{req(non_contiguous(x.detach())), req(non_contiguous(w.detach())), b}));
  }
  // Bias only needs a gradient; input without one.
  Tensor x = make_input({6, 5}, 19), w = req(make_input({2, 5}, 20)), b = req(make_input({2}, 21));
  CHECK_AGAINST_REF(kLinear, (std::vector<Tensor>{x, w, b}));
  CHECK_AGAINST_REF(kLinear, (std::vector<Tensor>{x, w.detach(), b}));
  // A larger layer (crosses the register and cache tiles).
  Tensor xl = req(make_input({37, 300}, 22)), wl = req(make_input({70, 300}, 23)), bl = req(make_input({70}, 24));
  test::RefCompareOptions opt;
  opt.rtol = 1e-4;
  opt.atol = 1e-4;
  CHECK_AGAINST_REF(kLinear, (std::vector<Tensor>{xl, wl, bl}), opt);
}

TEST_CASE("matmul gradients by hand") {
  // d sum(a @ b) / da = ones @ b^T (row sums of b); / db = a^T @ ones (row sums of a^T).
  Tensor a = req(from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}));
  Tensor b = req(from_vector(std::vector<double>{1, -1, 2, 0, 0.5, 3}, {3, 2}));
  ops::sum(ops::matmul(a, b)).backward();
  CHECK(a.grad().to_vector() == std::vector<double>{0, 2, 3.5, 0, 2, 3.5});
  CHECK(b.grad().to_vector() == std::vector<double>{5, 5, 7, 7, 9, 9});
}

TEST_CASE("linear and matmul: finite differences through each backend's kernels (ref, native)") {
  // gradcheck runs in float64, pinned (strict) to the backend it names: the ref and native inner
  // products and GEMMs both serve float64.
  for (const char* backend : {"ref", "native"}) {
    CAPTURE(backend);
    test::GradcheckOptions o;
    o.backend = backend;
    Tensor x = req(make_input({4, 2, 5}, 31)), w = req(make_input({3, 5}, 32)), b = req(make_input({3}, 33));
    CHECK_GRAD(kLinear, (std::vector<Tensor>{x, w, b}), o);
    CHECK_GRAD(kLinearNoBias, (std::vector<Tensor>{x, w}), o);
    CHECK_GRAD(kLinear, (std::vector<Tensor>{x.detach(), w, b}), o);
    Tensor a = req(make_input({3, 7}, 34)), m = req(make_input({7, 4}, 35));
    CHECK_GRAD(kMatmul, (std::vector<Tensor>{a, m}), o);
    CHECK_GRAD(kMatmul, (std::vector<Tensor>{req(make_input({2, 3, 7}, 36)), m}), o);
  }
}
