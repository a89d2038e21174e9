// Integer and boolean tensors: arithmetic (wrapping), comparisons into booleans, logical ops,
// PyTorch's type promotion, sums as int64, clamp, and the "dtype is not supported" errors. The
// expected values are PyTorch's for the same expressions. Each case runs on the native kernels
// and on ref (strict: no fallback); tests/oracle checks every kernel against ref element by element.
//   ctest --test-dir build -R engine.test_integer_ops
#include "tests/support/testing.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend_preference.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/reduce.h"

using namespace kiln;

namespace {

Tensor ints(const std::vector<double>& v, DType t = DType::int64) {
  return from_vector(v, {int64_t(v.size())}, TensorOptions(t));
}

const char* const kBackends[] = {"native", "ref"};

}  // namespace

TEST_CASE("integer arithmetic keeps the dtype and wraps like PyTorch") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    BackendGuard g(backend, /*strict=*/true);
    for (DType t : {DType::int32, DType::int64}) {
      CAPTURE(t);
      Tensor a = ints({-7, 0, 5, 12}, t), b = ints({3, -2, 5, -4}, t);
      CHECK((a + b).dtype() == t);
      CHECK((a + b).to_vector() == std::vector<double>{-4, -2, 10, 8});
      CHECK((a - b).to_vector() == std::vector<double>{-10, 2, 0, 16});
      CHECK((a * b).to_vector() == std::vector<double>{-21, 0, 25, -48});
      CHECK(ops::maximum(a, b).to_vector() == std::vector<double>{3, 0, 5, 12});
      CHECK(ops::minimum(a, b).to_vector() == std::vector<double>{-7, -2, 5, -4});
      CHECK(ops::neg(a).to_vector() == std::vector<double>{7, 0, -5, -12});
      CHECK(ops::abs(a).to_vector() == std::vector<double>{7, 0, 5, 12});
      CHECK(ops::relu(a).to_vector() == std::vector<double>{0, 0, 5, 12});
      CHECK(ops::square(a).to_vector() == std::vector<double>{49, 0, 25, 144});
      CHECK(ops::square(a).dtype() == t);
      // Broadcasting and a strided operand.
      Tensor m = arange(6, t).reshape({2, 3});
      CHECK((m.t() + ints({10, 20}, t)).to_vector() == std::vector<double>{10, 23, 11, 24, 12, 25});
    }
    // uint8 wraps modulo 256: 250 + 10 = 4, 3 - 5 = 254 (torch.tensor([250], dtype=torch.uint8) + 10).
    Tensor u = ints({250, 3}, DType::uint8);
    CHECK((u + ints({10, 0}, DType::uint8)).to_vector() == std::vector<double>{4, 3});
    CHECK((u - ints({0, 5}, DType::uint8)).to_vector() == std::vector<double>{250, 254});
    CHECK(ops::neg(ints({1}, DType::uint8)).to_vector() == std::vector<double>{255});
    // int32 overflow wraps (no undefined behaviour): INT32_MAX + 1 = INT32_MIN.
    Tensor big = ints({double(std::numeric_limits<int32_t>::max())}, DType::int32);
    CHECK((big + ints({1}, DType::int32)).to_vector() == std::vector<double>{double(std::numeric_limits<int32_t>::min())});
  }
}

TEST_CASE("comparisons and logical ops return booleans; sums of booleans are int64") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    BackendGuard g(backend, true);
    // Accuracy from argmax, the way a LibTorch program counts correct predictions.
    Tensor logits = from_vector(std::vector<double>{0.1, 0.9, 0.8, 0.2, 0.3, 0.7}, {3, 2});
    Tensor target = ints({1, 0, 0});
    Tensor correct = ops::eq(ops::argmax(logits, 1), target);
    CHECK(correct.dtype() == DType::boolean);
    CHECK(correct.to_vector() == std::vector<double>{1, 1, 0});
    Tensor n = ops::sum(correct);
    CHECK(n.dtype() == DType::int64);
    CHECK(n.item() == 2);
    CHECK((ops::argmax(logits, 1) == target).to_vector() == std::vector<double>{1, 1, 0});
    for (DType t : {DType::int32, DType::int64, DType::uint8, DType::float32, DType::bfloat16, DType::float16}) {
      CAPTURE(t);
      Tensor a = ints({1, 2, 3}, t), b = ints({3, 2, 1}, t);
      CHECK(ops::lt(a, b).to_vector() == std::vector<double>{1, 0, 0});
      CHECK(ops::le(a, b).to_vector() == std::vector<double>{1, 1, 0});
      CHECK(ops::gt(a, b).to_vector() == std::vector<double>{0, 0, 1});
      CHECK(ops::ge(a, b).to_vector() == std::vector<double>{0, 1, 1});
      CHECK(ops::ne(a, b).to_vector() == std::vector<double>{1, 0, 1});
      CHECK((a > 1).to_vector() == std::vector<double>{0, 1, 1});
      CHECK((a == 2).dtype() == DType::boolean);
    }
    Tensor p = ints({0, 0, 1, 1}, DType::boolean), q = ints({0, 1, 0, 1}, DType::boolean);
    CHECK(ops::logical_and(p, q).to_vector() == std::vector<double>{0, 0, 0, 1});
    CHECK(ops::logical_or(p, q).to_vector() == std::vector<double>{0, 1, 1, 1});
    CHECK(ops::logical_xor(p, q).to_vector() == std::vector<double>{0, 1, 1, 0});
    CHECK(ops::logical_not(p).to_vector() == std::vector<double>{1, 1, 0, 0});
    // Nonzero is true for every dtype; booleans add as "or" and multiply as "and" (PyTorch).
    CHECK(ops::logical_and(ints({0, 2, -3}), from_vector(std::vector<double>{1, 0.5, 0}, {3})).to_vector() ==
          std::vector<double>{0, 1, 0});
    CHECK((p + q).dtype() == DType::boolean);
    CHECK((p + q).to_vector() == std::vector<double>{0, 1, 1, 1});
    CHECK((p * q).to_vector() == std::vector<double>{0, 0, 0, 1});
    // Integer sums and maxima.
    Tensor m = ints({1, -2, 3, 4, 5, -6}, DType::int32).reshape({2, 3});
    CHECK(ops::sum(m, {1}).dtype() == DType::int64);
    CHECK(ops::sum(m, {1}).to_vector() == std::vector<double>{2, 3});
    CHECK(ops::sum(ints({200, 100}, DType::uint8)).item() == 300);  // int64: no uint8 wrap
    CHECK(ops::max(m, 1).values.dtype() == DType::int32);
    CHECK(ops::max(m, 1).values.to_vector() == std::vector<double>{3, 5});
    CHECK(ops::argmax(m, 1, /*keepdim=*/true).sizes() == Shape{2, 1});
    CHECK(ops::argmin(m, 1).to_vector() == std::vector<double>{1, 2});
  }
}

TEST_CASE("type promotion follows PyTorch's result_type") {
  auto rt = [](DType a, DType b) { return ops::result_type(zeros({2}, a), zeros({2}, b)); };
  CHECK(rt(DType::int32, DType::int64) == DType::int64);
  CHECK(rt(DType::uint8, DType::int32) == DType::int32);
  CHECK(rt(DType::int64, DType::float32) == DType::float32);
  CHECK(rt(DType::boolean, DType::uint8) == DType::uint8);
  CHECK(rt(DType::float32, DType::float64) == DType::float64);
  CHECK(rt(DType::float16, DType::bfloat16) == DType::float32);
  CHECK(rt(DType::bfloat16, DType::int64) == DType::bfloat16);
  // A zero-dim operand counts only when of a higher category: torch.ones(2) + torch.tensor(1.,
  // dtype=torch.float64) is float32; torch.ones(2, dtype=torch.int32) + that is float64.
  CHECK(ops::result_type(zeros({2}), zeros({}, DType::float64)) == DType::float32);
  CHECK(ops::result_type(zeros({2}, DType::int32), zeros({}, DType::float64)) == DType::float64);
  CHECK(ops::result_type(zeros({2}, DType::uint8), zeros({}, DType::int64)) == DType::uint8);
  // Mixed operands compute in the promoted dtype.
  Tensor i = ints({1, 2, 3}, DType::int32), l = ints({10, 20, 30});
  CHECK((i + l).dtype() == DType::int64);
  Tensor f = i * from_vector(std::vector<double>{0.5, 0.5, 0.5}, {3});
  CHECK(f.dtype() == DType::float32);
  CHECK(f.to_vector() == std::vector<double>{0.5, 1, 1.5});
  CHECK((zeros({2}) * zeros({2}, DType::float64)).dtype() == DType::float64);
  // Numbers: an integer keeps an integer tensor's dtype, a floating-point number makes float32.
  CHECK((l + 2).dtype() == DType::int64);
  CHECK((l + 2).to_vector() == std::vector<double>{12, 22, 32});
  CHECK((l * 2.5).dtype() == DType::float32);
  CHECK((l * 2.5).to_vector() == std::vector<double>{25, 50, 75});
  CHECK((l - 1).to_vector() == std::vector<double>{9, 19, 29});
  CHECK((3 - l).to_vector() == std::vector<double>{-7, -17, -27});
  // True division: integers divide in float32 (torch.tensor([1, 2]) / 2 -> [0.5, 1.]).
  CHECK((ints({1, 2}) / 2).dtype() == DType::float32);
  CHECK((ints({1, 2}) / 2).to_vector() == std::vector<double>{0.5, 1});
  CHECK(ops::div(ints({1, 3}), ints({2, 2})).to_vector() == std::vector<double>{0.5, 1.5});
  // Functions without an integer form compute in float32.
  CHECK(ops::exp(ints({0})).dtype() == DType::float32);
  CHECK(ops::exp(ints({0})).item() == 1);
  CHECK(ops::sigmoid(ints({0}, DType::boolean)).item() == 0.5);
  CHECK(ops::result_type(ints({1}), Scalar(2.5)) == DType::float32);
  CHECK(ops::result_type(ints({1}, DType::uint8), Scalar(2)) == DType::uint8);
}

TEST_CASE("clamp with both bounds: integers stay integers, the gradient passes inside the bounds") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    BackendGuard g(backend, true);
    Tensor i = ints({-5, 0, 3, 9}, DType::int32);
    CHECK(ops::clamp(i, 0, 5).dtype() == DType::int32);
    CHECK(ops::clamp(i, 0, 5).to_vector() == std::vector<double>{0, 0, 3, 5});
    CHECK(ops::clamp_max(i, 1).to_vector() == std::vector<double>{-5, 0, 1, 1});
    CHECK(ops::clamp(from_vector(std::vector<double>{-1, 0.25, 2}, {3}), -0.5, 0.5).to_vector() ==
          std::vector<double>{-0.5, 0.25, 0.5});
  }
  CHECK_THROWS_KILN(ops::clamp(zeros({2}), 1, 0), "clamp: min 1 is greater than max 0");
  // Finite differences away from the bounds (the derivative jumps there).
  Tensor x = from_vector(std::vector<double>{-0.9, -0.3, 0.1, 0.45, 0.8}, {5}, DType::float64).requires_grad_();
  for (const char* backend : kBackends) {
    test::GradcheckOptions o;
    o.backend = backend;
    CHECK_GRAD([](const std::vector<Tensor>& in) { return ops::clamp(in[0], -0.5, 0.5); }, std::vector<Tensor>{x}, o);
    CHECK_GRAD([](const std::vector<Tensor>& in) { return ops::clamp_max(in[0], 0.2); }, std::vector<Tensor>{x}, o);
  }
  Tensor x2 = x.detach().clone().requires_grad_();
  ops::sum(ops::clamp(x2, -0.5, 0.5)).backward();
  CHECK(x2.grad().to_vector() == std::vector<double>{0, 1, 1, 1, 0});
}

TEST_CASE("what integers and booleans cannot do is a clear error") {
  CHECK_THROWS_KILN(ops::pow(ints({2}), ints({3})), "pow: dtype int64 is not supported");
  CHECK_THROWS_KILN(ints({1}, DType::boolean) - ints({1}, DType::boolean), "sub: dtype bool is not supported");
  CHECK_THROWS_KILN(ops::neg(ints({1}, DType::boolean)), "neg: dtype bool is not supported");
  CHECK_THROWS_KILN(ops::mean(ints({1, 2})), "mean: dtype int64 is not supported");
  CHECK_THROWS_KILN(ints({1}).requires_grad_(), "only floating-point tensors can require grad");
  CHECK_THROWS_KILN(ops::matmul(ones({2, 2}, DType::int64), ones({2, 2}, DType::int64)),
                    "matmul: needs floating-point operands, got int64");
  // A kernel table asked for a dtype none of its kernels takes, where float32 has one, says so.
  GemmDesc g;
  g.dtype = DType::int64;
  g.m = g.n = g.k = 2;
  g.lda = g.ldb = g.ldc = 2;
  CHECK_THROWS_KILN(op_table<kernel_op::gemm>()(DeviceType::cpu, g, nullptr, nullptr, nullptr),
                    "dtype int64 is not supported by op 'gemm' on cpu");
}

TEST_CASE("booleans: conversions, fills and printing") {
  Tensor b = from_vector(std::vector<double>{0, 2, -1}, {3}).to(DType::boolean);
  CHECK(b.dtype() == DType::boolean);
  CHECK(b.element_size() == 1);
  CHECK(b.to_vector() == std::vector<double>{0, 1, 1});
  CHECK(b.to(DType::int64).to_vector() == std::vector<double>{0, 1, 1});
  CHECK(full({2}, 1, DType::boolean).to_vector() == std::vector<double>{1, 1});
  CHECK(to_string(b) == "tensor([False,  True,  True])");  // bool is a default dtype of the printer, as int64
}
