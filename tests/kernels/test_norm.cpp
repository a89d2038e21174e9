// Norm and loss families: hand-computed values (both backends: ref in float64, native in
// float32), running-stat updates, dropout statistics and determinism, and error messages.
// Reference numbers below come from a pure-Python (math module) evaluation of PyTorch's
// documented formulas, printed with 10 significant digits: PyTorch itself is not installed on
// this machine. The script is reproduced in comments next to each block.
//   ctest --test-dir build -R kernels.test_norm
#include "tests/support/testing.h"

#include <cmath>

#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "kernels/common/parallel.h"

using namespace kiln;

namespace {

Tensor vec(std::vector<double> v, Shape s, DType dt = DType::float64) { return from_vector(v, s, TensorOptions(dt)); }
Tensor idx(std::vector<double> v, Shape s) { return from_vector(v, s, TensorOptions(DType::int64)); }

struct Backend {
  const char* name;
  DType dtype;
  double tol;
};
const Backend kBackends[] = {{"ref", DType::float64, 1e-9}, {"native", DType::float32, 2e-6}};

}  // namespace

TEST_CASE("batch_norm training values and running-stat update (by hand)") {
  // x [2, 2, 2]; channel 0 holds 1,2,3,4 (mean 2.5, biased var 1.25, unbiased 5/3), channel 1
  // holds 3,5,-1,0 (mean 1.75, var 5.6875, unbiased 7.583333). y = (x - mean) / sqrt(var + 1e-5)
  // * w + b with w = [2, 0.5], b = [0.1, -1]; running stats start at 0 and 1, momentum 0.1:
  // rm = 0.1 * mean, rv = 0.9 + 0.1 * unbiased.
  for (const Backend& be : kBackends) {
    CAPTURE(be.name);
    BackendGuard g(be.name);
    Tensor x = vec({1, 2, 3, 5, 3, 4, -1, 0}, {2, 2, 2}, be.dtype);
    Tensor w = vec({2, 0.5}, {2}, be.dtype), b = vec({0.1, -1}, {2}, be.dtype);
    Tensor rm = zeros({2}, be.dtype), rv = ones({2}, be.dtype);
    Tensor y = ops::batch_norm(x, w, b, rm, rv, /*training=*/true, 0.1, 1e-5);
    CHECK_CLOSE(y, vec({-2.58327084, -0.7944236133, -0.7379290212, -0.3186154551, 0.9944236133, 2.78327084,
                        -1.576556153, -1.36689937}, {2, 2, 2}),
                be.tol * 10, be.tol);
    CHECK_CLOSE(rm, vec({0.25, 0.175}, {2}), be.tol, be.tol);
    CHECK_CLOSE(rv, vec({1.0666666666666667, 1.6583333333333332}, {2}), be.tol, be.tol);

    // Eval with running_mean [0.5, -1], running_var [4, 0.25]: (x - rm) / sqrt(rv + eps) * w + b.
    Tensor rm2 = vec({0.5, -1}, {2}, be.dtype), rv2 = vec({4, 0.25}, {2}, be.dtype);
    Tensor ye = ops::batch_norm(x, w, b, rm2, rv2, /*training=*/false);
    CHECK_CLOSE(ye, vec({0.599999375, 1.599998125, 2.999920002, 4.999880004, 2.599996875, 3.599995625, -1,
                         -1.999940002e-05}, {2, 2, 2}),
                be.tol * 10, be.tol);
    CHECK(rm2.to_vector() == std::vector<double>{0.5, -1});  // eval leaves the stats alone
  }
}

TEST_CASE("batch_norm without affine, and running stats of another dtype or layout") {
  Tensor x = vec({1, 2, 3, 5, 3, 4, -1, 0}, {2, 2, 2}, DType::float32);
  Tensor y = ops::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  // channel 0: (x - 2.5) * 0.894423613312618
  CHECK(y.at({0, 0, 0}) == doctest::Approx(-1.5 * 0.894423613312618).epsilon(1e-6));
  // float64 running stats with a float32 input, and a strided running_mean: updated in place.
  Tensor buf = zeros({4}, DType::float64);
  Tensor rm = buf.slice(0, 0, 4, 2), rv = ones({2}, DType::float64);
  ops::batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.5);
  CHECK(buf.to_vector()[0] == doctest::Approx(1.25));
  CHECK(buf.to_vector()[2] == doctest::Approx(0.875));
  CHECK(buf.to_vector()[1] == 0);
  CHECK(rv.to_vector()[1] == doctest::Approx(0.5 + 0.5 * 7.583333333333333));
}

TEST_CASE("batch_norm is safe for data far from zero") {
  // Values 1000 + U(-1, 1), exactly representable in float32: a naive float32 E[x^2] - E[x]^2
  // loses every digit here; native float32 must still match the float64 oracle.
  Tensor x = (test::make_input({16, 3, 9, 9}, 21) + 1000.0).to(DType::float32).to(DType::float64);
  Tensor yr, yn;
  {
    BackendGuard g("ref");
    yr = ops::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  }
  {
    BackendGuard g("native");
    yn = ops::batch_norm(x.to(DType::float32), Tensor(), Tensor(), Tensor(), Tensor(), true);
  }
  CHECK_CLOSE(yn, yr, 1e-4, 1e-4);
}

TEST_CASE("softmax and log_softmax values (by hand), stable for large inputs") {
  // softmax([1, 2, 3]) = exp(x - 3.40760596) ; log_softmax = x - 3.407605964
  for (const Backend& be : kBackends) {
    CAPTURE(be.name);
    BackendGuard g(be.name);
    for (double shift : {0.0, 1000.0, -1000.0}) {
      Tensor x = vec({1 + shift, 2 + shift, 3 + shift}, {3}, be.dtype);
      CHECK_CLOSE(ops::softmax(x, 0), vec({0.09003057317, 0.2447284711, 0.6652409558}, {3}), 1e-6, 1e-7);
      // float32 x - lse near 1000 rounds to a multiple of 2^-14: the tolerance says so.
      const double atol = be.dtype == DType::float32 && shift != 0 ? 1e-4 : 1e-6;
      CHECK_CLOSE(ops::log_softmax(x, -1), vec({-2.407605964, -1.407605964, -0.4076059644}, {3}), 1e-5, atol);
    }
    // Along dim 0 of [3, 2]: each column is [1, 2, 3] + c.
    Tensor x2 = vec({1, 5, 2, 6, 3, 7}, {3, 2}, be.dtype);
    CHECK_CLOSE(ops::softmax(x2, 0), vec({0.09003057317, 0.09003057317, 0.2447284711, 0.2447284711, 0.6652409558,
                                          0.6652409558}, {3, 2}),
                1e-6, 1e-7);
  }
}

TEST_CASE("cross_entropy values (by hand): reductions, label smoothing, ignore_index") {
  // Python: lse(r) = max + log(sum(exp(r - max))); lp = r - lse;
  //   loss = -(1 - eps) lp[t] - eps / C * sum(lp); mean over non-ignored rows.
  for (const Backend& be : kBackends) {
    CAPTURE(be.name);
    BackendGuard g(be.name);
    const double tol = be.dtype == DType::float64 ? 1e-9 : 1e-6;
    Tensor x = vec({1, 2, 3, 1, -1, 0.5, 0.2, 0.1, -0.3}, {3, 3}, be.dtype);
    Tensor t = idx({2, 0, 1}, {3});
    CHECK_CLOSE(ops::cross_entropy(x, t, Reduction::none), vec({0.4076059644, 0.5549569196, 1.020827656}, {3}),
                tol, tol);
    CHECK(ops::cross_entropy(x, t).item() == doctest::Approx(0.6611301799).epsilon(1e-6));
    CHECK(ops::cross_entropy(x, t, Reduction::sum).item() == doctest::Approx(1.98339054).epsilon(1e-6));
    CHECK_CLOSE(ops::cross_entropy(x, t, Reduction::none, 0.1),
                vec({0.5076059644, 0.638290253, 1.030827656}, {3}), tol, tol);
    CHECK(ops::cross_entropy(x, t, Reduction::mean, 0.1).item() == doctest::Approx(0.7255746243).epsilon(1e-6));

    // Row 1 ignored: loss 0, and the mean divides by 2.
    Tensor ti = idx({2, -100, 1}, {3});
    Tensor xg = x.detach().requires_grad_(true);
    Tensor l = ops::cross_entropy(xg, ti, Reduction::mean, 0.1);
    CHECK(l.item() == doctest::Approx(0.76921681).epsilon(1e-6));
    l.backward();
    // (softmax - 0.9 onehot - 0.1/3) / 2 on kept rows, 0 on the ignored one.
    CHECK_CLOSE(xg.grad(), vec({0.02834861992, 0.1056975689, -0.1340461888, 0, 0, 0, 0.1824280039, -0.286518359,
                                0.1040903552}, {3, 3}),
                tol, tol);
    // ignore_index may name a real class.
    CHECK_CLOSE(ops::cross_entropy(x, t, Reduction::none, 0.0, 0), vec({0.4076059644, 0, 1.020827656}, {3}), tol,
                tol);
    // All ignored: mean is 0/0 = NaN, as in PyTorch.
    CHECK(std::isnan(ops::cross_entropy(x, idx({-100, -100, -100}, {3})).item()));
    // nll_loss of log_softmax is the same loss.
    CHECK_CLOSE(ops::nll_loss(ops::log_softmax(x, 1), t, Reduction::none),
                vec({0.4076059644, 0.5549569196, 1.020827656}, {3}), tol, tol);
  }
}

TEST_CASE("cross_entropy on segmentation-shaped input equals the per-pixel [N*H*W, C] loss") {
  Tensor x = test::make_input({2, 4, 3, 5}, 31, DType::float64, -3, 3);
  std::vector<double> tv;
  for (int i = 0; i < 30; ++i) tv.push_back(i % 7 == 3 ? -100 : (i * 5) % 4);
  Tensor t = idx(tv, {2, 3, 5});
  Tensor flat = x.permute({0, 2, 3, 1}).reshape({30, 4});
  for (const Backend& be : kBackends) {
    CAPTURE(be.name);
    BackendGuard g(be.name);
    Tensor a = ops::cross_entropy(x.to(be.dtype), t, Reduction::none, 0.2);
    Tensor b = ops::cross_entropy(flat.to(be.dtype), t.reshape({30}), Reduction::none, 0.2);
    CHECK(a.sizes() == Shape{2, 3, 5});
    CHECK_CLOSE(a.reshape({30}), b, 1e-6, 1e-6);
  }
}

TEST_CASE("binary_cross_entropy_with_logits and mse_loss values (by hand)") {
  // x = [-2, 0.5, 3, -0.1], t = [0, 1, 0.3, 1], pw = [1, 2, 0.5, 3]
  // loss = (1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0)), which equals
  // -[pw t log s(x) + (1 - t) log(1 - s(x))] (checked in the same script).
  for (const Backend& be : kBackends) {
    CAPTURE(be.name);
    BackendGuard g(be.name);
    const double tol = be.dtype == DType::float64 ? 1e-9 : 1e-6;
    Tensor x = vec({-2, 0.5, 3, -0.1}, {4}, be.dtype).requires_grad_(true);
    Tensor t = vec({0, 1, 0.3, 1}, {4}, be.dtype).requires_grad_(true);
    Tensor pw = vec({1, 2, 0.5, 3}, {4}, be.dtype);
    CHECK_CLOSE(ops::binary_cross_entropy_with_logits(x, t, Reduction::none),
                vec({0.126928011, 0.4740769842, 2.148587352, 0.7443966601}, {4}), tol, tol);
    CHECK(ops::binary_cross_entropy_with_logits(x, t).item() == doctest::Approx(0.8734972517).epsilon(1e-6));
    Tensor l = ops::binary_cross_entropy_with_logits(x, t, Reduction::sum, pw);
    CHECK(l.item() == doctest::Approx(5.449571208).epsilon(1e-6));
    l.backward();
    CHECK_CLOSE(x.grad(), vec({0.119202922, -0.7550813376, 0.6596880078, -1.574937562}, {4}), tol, tol);
    CHECK_CLOSE(t.grad(), vec({2, -0.02592301582, -3.024293676, 1.58879332}, {4}), tol, tol);
    // Stable at extreme logits: no inf/NaN.
    Tensor big = vec({-200, 200}, {2}, be.dtype), tb = vec({1, 0}, {2}, be.dtype);
    CHECK_CLOSE(ops::binary_cross_entropy_with_logits(big, tb, Reduction::none), vec({200, 200}, {2}), 1e-6, 1e-6);

    Tensor a = vec({1, -2, 0.5}, {3}, be.dtype).requires_grad_(true), b = vec({0.5, 1, 0.5}, {3}, be.dtype);
    Tensor m = ops::mse_loss(a, b);
    CHECK(m.item() == doctest::Approx(3.0833333333333335).epsilon(1e-7));
    m.backward();
    CHECK_CLOSE(a.grad(), vec({1.0 / 3, -2, 0}, {3}), tol, tol);  // 2 (a - b) / 3
    CHECK_CLOSE(ops::mse_loss(a, b, Reduction::none), vec({0.25, 9, 0}, {3}), tol, tol);
  }
}

TEST_CASE("dropout: fraction, scaling, determinism across thread counts, fresh masks per call") {
  const int saved_threads = num_threads();
  const int64_t n = 200003;
  Tensor x = ones({n});
  auto run = [&](int threads, uint64_t seed, const char* backend) {
    set_num_threads(threads);
    BackendGuard g(backend);
    Generator gen(seed);
    return ops::dropout(x, 0.3, true, &gen).to_vector();
  };
  std::vector<double> a = run(1, 123, "native"), b = run(2, 123, "native"), r = run(1, 123, "ref");
  set_num_threads(saved_threads);
  CHECK(a == b);  // same seed, 1 vs 2 threads: same bits
  CHECK(a == r);  // and the same as the reference kernel
  int64_t zeros_n = 0;
  bool scaled = true;
  for (double v : a) {
    if (v == 0) ++zeros_n;
    else scaled = scaled && v == double(float(1.0 / 0.7));
  }
  CHECK(scaled);
  // Binomial std of the fraction is sqrt(0.21 / n) ~ 0.001: allow 5 of them.
  CHECK(double(zeros_n) / double(n) == doctest::Approx(0.3).epsilon(0.005 / 0.3));

  // Successive calls on one generator draw new masks and advance it by ceil(n / 4) counters.
  Generator gen(7);
  Tensor m1 = ops::dropout(x, 0.5, true, &gen);
  CHECK(gen.offset() == uint64_t((n + 3) / 4));
  Tensor m2 = ops::dropout(x, 0.5, true, &gen);
  CHECK(m1.to_vector() != m2.to_vector());

  // Backward reuses the mask: grad = mask / (1 - p).
  Tensor xs = test::make_input({6, 7}, 3).requires_grad_(true);
  Generator g2(99);
  Tensor y = ops::dropout(xs, 0.4, true, &g2);
  ops::sum(y).backward();
  std::vector<double> yv = y.to_vector(), gv = xs.grad().to_vector(), xv = xs.to_vector();
  for (size_t i = 0; i < yv.size(); ++i) {
    CHECK(gv[i] == doctest::Approx(yv[i] == 0 ? 0.0 : 1.0 / 0.6));
    if (yv[i] != 0) CHECK(yv[i] == doctest::Approx(xv[i] / 0.6));
  }
  // p = 0 and eval: identity (the same tensor); p = 1: zeros; p outside [0, 1]: error.
  CHECK(ops::dropout(xs, 0.0, true).is_same(xs));
  CHECK(ops::dropout(xs, 0.7, false).is_same(xs));
  Tensor z = ops::dropout(xs, 1.0, true);
  CHECK(ops::sum(ops::abs(z)).item() == 0);
  CHECK_THROWS_KILN(ops::dropout(xs, 1.5, true), "dropout: probability has to be between 0 and 1, but got 1.5");
  CHECK_THROWS_KILN(ops::dropout(xs, -0.1, false), "dropout: probability has to be between 0 and 1");
}

TEST_CASE("norm and loss errors name the op and shapes") {
  Tensor x = zeros({2, 3, 4, 4});
  CHECK_THROWS_KILN(ops::batch_norm(x, Tensor(), Tensor(), zeros({4}), ones({4}), true),
                    "batch_norm: running_mean [4] does not match the 3 channels of input [2, 3, 4, 4]");
  CHECK_THROWS_KILN(ops::batch_norm(x, ones({5}), Tensor(), Tensor(), Tensor(), true),
                    "batch_norm: weight [5] does not match the 3 channels of input [2, 3, 4, 4]");
  CHECK_THROWS_KILN(ops::batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "batch_norm: expected more than 1 value per channel when training, got input [1, 3]");
  CHECK_THROWS_KILN(ops::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false),
                    "batch_norm: eval mode (training=false) needs running_mean and running_var");
  CHECK_THROWS_KILN(ops::batch_norm(zeros({3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "batch_norm: input [3] must have at least 2 dims");
  CHECK_THROWS_KILN(ops::softmax(zeros({2, 3}), 2), "softmax: dim 2 out of range");

  Tensor logits = zeros({4, 5});
  CHECK_THROWS_KILN(ops::cross_entropy(logits, idx({0, 1, 2}, {3})),
                    "cross_entropy: target [3] does not match input [4, 5] (expected target [4])");
  CHECK_THROWS_KILN(ops::cross_entropy(logits, idx({0, 5, 2, 1}, {4})),
                    "cross_entropy: target class index 5 (at flat position 1) is out of range for 5 classes "
                    "(input [4, 5], target [4]");
  CHECK_THROWS_KILN(ops::cross_entropy(logits, idx({0, -1, 2, 1}, {4})), "target class index -1");
  CHECK_THROWS_KILN(ops::cross_entropy(logits, zeros({4})), "cross_entropy: target must hold int64 class indices");
  CHECK_THROWS_KILN(ops::nll_loss(zeros({2, 3, 4}), idx({0, 1}, {2})),
                    "nll_loss: target [2] does not match input [2, 3, 4] (expected target [2, 4])");
  CHECK_THROWS_KILN(ops::binary_cross_entropy_with_logits(zeros({2, 3}), zeros({3, 2})),
                    "binary_cross_entropy_with_logits: target [3, 2] does not match input [2, 3]");
  CHECK_THROWS_KILN(ops::binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), Reduction::mean, ones({2})),
                    "binary_cross_entropy_with_logits: shapes [2] and [2, 3] cannot be broadcast");
  CHECK_THROWS_KILN(ops::mse_loss(zeros({2, 3}), zeros({6})), "mse_loss: target [6] does not match input [2, 3]");
  CHECK_THROWS_KILN(ops::mse_loss(zeros({2}), zeros({2}, DType::float64)),
                    "mse_loss: target dtype float64 does not match input dtype float32");
}

TEST_CASE("half inputs compute in float32") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3}, DType::bfloat16);
  Tensor y = ops::softmax(x, 0);
  CHECK(y.dtype() == DType::bfloat16);
  CHECK(y.to_vector()[2] == doctest::Approx(0.6652409558).epsilon(0.01));
  Tensor l = ops::cross_entropy(x.reshape({1, 3}), idx({2}, {1}));
  CHECK(l.item() == doctest::Approx(0.4076059644).epsilon(0.01));
}
