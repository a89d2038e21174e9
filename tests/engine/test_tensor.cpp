// Tensor basics: factories, views without copies, contiguous, conversions, printing, errors.
//   ctest --test-dir build -R engine.test_tensor
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/allocator.h"
#include "engine/print.h"
#include "kernels/common/parallel.h"

#include <cmath>
#include <sstream>
#include <utility>

using namespace kiln;

TEST_CASE("factories and values") {
  Tensor z = zeros({2, 3});
  CHECK(z.sizes() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.numel() == 6);
  CHECK(z.dtype() == DType::float32);
  for (double v : z.to_vector()) CHECK(v == 0);
  Tensor f = full({4}, 2.5, DType::float64);
  CHECK(f.to_vector() == std::vector<double>{2.5, 2.5, 2.5, 2.5});
  Tensor a = arange(5, DType::int64);
  CHECK(a.to_vector() == std::vector<double>{0, 1, 2, 3, 4});
  Tensor v = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(v.at({1, 2}) == 6);
  CHECK(v.at({-1, 0}) == 4);
  CHECK_THROWS_KILN(empty({2, -1}), "negative size");
  CHECK_THROWS_KILN(from_vector(std::vector<double>{1, 2, 3}, {2, 2}), "do not fill shape");
  CHECK_THROWS_KILN(v.item(), "has 6 elements");
}

TEST_CASE("views share storage") {
  Tensor x = from_vector(std::vector<double>{0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = x.t();
  CHECK(t.sizes() == Shape{3, 2});
  CHECK(t.strides() == Shape{1, 3});
  CHECK(!t.is_contiguous());
  CHECK(t.data_ptr() == x.data_ptr());
  CHECK(t.at({2, 1}) == 5);
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor s = x.slice(1, 1, 3);
  CHECK(s.sizes() == Shape{2, 2});
  CHECK(s.to_vector() == std::vector<double>{1, 2, 4, 5});
  Tensor st = x.reshape({6}).slice(0, 0, 6, 2);
  CHECK(st.to_vector() == std::vector<double>{0, 2, 4});
  Tensor e = from_vector(std::vector<double>{1, 2, 3}, {3, 1}).expand({3, 4});
  CHECK(e.strides() == Shape{1, 0});
  CHECK(e.at({2, 3}) == 3);
  Tensor u = x.unsqueeze(0);
  CHECK(u.sizes() == Shape{1, 2, 3});
  CHECK(u.squeeze(0).sizes() == Shape{2, 3});
  CHECK(x.view({3, -1}).sizes() == Shape{3, 2});
  CHECK(x.permute({1, 0}).sizes() == Shape{3, 2});
  CHECK(x.select(0, 1).to_vector() == std::vector<double>{3, 4, 5});
  CHECK(x.flatten().sizes() == Shape{6});
  // A transposed tensor cannot be viewed flat, but reshape copies.
  CHECK_THROWS_KILN(t.view({6}), "cannot view");
  CHECK(t.reshape({6}).to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_KILN(x.view({4, -1}), "invalid for input of shape [2, 3]");
  CHECK_THROWS_KILN(x.permute({0, 0}), "repeated dim");
  CHECK_THROWS_KILN(x.transpose(0, 2), "dim 2 out of range");
  CHECK_THROWS_KILN(x.expand({4, 3, 4}), "cannot expand");
}

TEST_CASE("dtype conversion round trips") {
  Tensor x = from_vector(std::vector<double>{-1.5, 0.1, 3.0, 65504.0, 1e-6}, {5});
  Tensor h = x.to(DType::float16);
  CHECK(h.dtype() == DType::float16);
  std::vector<double> hv = h.to_vector();
  CHECK(hv[0] == -1.5);
  CHECK(hv[1] == doctest::Approx(0.1).epsilon(1e-3));
  CHECK(hv[3] == 65504.0);
  CHECK(hv[4] == doctest::Approx(1e-6).epsilon(0.05));  // subnormal in half
  Tensor b = x.to(DType::bfloat16);
  CHECK(b.to_vector()[2] == 3.0);
  CHECK(b.to_vector()[1] == doctest::Approx(0.1).epsilon(1e-2));
  Tensor i = x.to(DType::int32);
  CHECK(i.to_vector()[2] == 3);
  Tensor u8 = from_vector(std::vector<double>{0, 255, 7}, {3}, DType::uint8);
  CHECK(u8.to(DType::float32).to_vector() == std::vector<double>{0, 255, 7});
  // Half rounding: nearest even.
  CHECK(float(Half(2049.0f)) == 2048.0f);
  CHECK(float(Half(2051.0f)) == 2052.0f);
  CHECK(float(BFloat16(1.00390625f)) == 1.0f);
}

TEST_CASE("copy_ broadcasts and converts; fill_ writes through views") {
  Tensor x = zeros({2, 3}, DType::float64);
  x.slice(1, 0, 3, 2).fill_(7);
  CHECK(x.to_vector() == std::vector<double>{7, 0, 7, 7, 0, 7});
  x.copy_(from_vector(std::vector<double>{1, 2, 3}, {3}, DType::float32));
  CHECK(x.to_vector() == std::vector<double>{1, 2, 3, 1, 2, 3});
}

TEST_CASE("random numbers are reproducible and do not depend on the thread count") {
  Generator g1(42), g2(42);
  Tensor a = rand({1000}, {}, &g1);
  int saved = num_threads();
  set_num_threads(1);
  Tensor b = rand({1000}, {}, &g2);
  set_num_threads(saved);
  CHECK(a.to_vector() == b.to_vector());
  std::vector<double> v = a.to_vector();
  double mean = 0;
  for (double x : v) {
    CHECK(x >= 0);
    CHECK(x < 1);
    mean += x / 1000;
  }
  CHECK(mean == doctest::Approx(0.5).epsilon(0.05));
  Generator g3(1);
  Tensor n = randn({20000}, DType::float64, &g3);
  std::vector<double> nv = n.to_vector();
  double m = 0, s = 0;
  for (double x : nv) m += x / nv.size();
  for (double x : nv) s += (x - m) * (x - m) / nv.size();
  CHECK(m == doctest::Approx(0).epsilon(0.03));
  CHECK(std::sqrt(s) == doctest::Approx(1).epsilon(0.03));
  // A second draw continues the stream rather than repeating it.
  Tensor c = rand({1000}, {}, &g1);
  CHECK(c.to_vector() != a.to_vector());
}

TEST_CASE("allocator: aligned, cached, counted") {
  auto& alloc = CpuAllocator::instance();
  MemoryStats before = alloc.stats();
  {
    Tensor t = empty({1000, 1000});
    CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0);
    MemoryStats during = alloc.stats();
    CHECK(during.current >= before.current + 4000000);
    CHECK(during.peak >= during.current);
  }
  MemoryStats after = alloc.stats();
  CHECK(after.current == before.current);
  int64_t hits = after.cache_hits;
  Tensor again = empty({1000, 1000});
  CHECK(alloc.stats().cache_hits == hits + 1);
  CHECK(CpuAllocator::round_size(1) == 64);
  CHECK(CpuAllocator::round_size(5000) == 5120);
  CHECK(CpuAllocator::round_size(4000000) >= 4000000);
  CHECK(CpuAllocator::round_size(4000000) <= 4000000 * 1.125);
}

// The expected strings are PyTorch's for the same tensors (torch.arange(20), ...), with kiln's
// dtype names in the suffix (dtype=int32 for dtype=torch.int32).
TEST_CASE("printing: PyTorch's format, wrapping and summarisation") {
  CHECK(to_string(arange(20, DType::int64)) ==
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
        "        18, 19])");
  CHECK(to_string(from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2})) == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(to_string(from_vector(std::vector<double>{1.5, 0.25, -3}, {3})) == "tensor([ 1.5000,  0.2500, -3.0000])");
  CHECK(to_string(scalar_tensor(3.5)) == "tensor(3.5000)");
  CHECK(to_string(from_vector(std::vector<double>{1, 2}, {2}, DType::int32)) == "tensor([1, 2], dtype=int32)");
  CHECK(to_string(from_vector(std::vector<double>{0.5, 2}, {2}, DType::float64)) == "tensor([0.5000, 2.0000], dtype=float64)");
  CHECK(to_string(zeros({0, 3})) == "tensor([], size=(0, 3))");
  CHECK(to_string(zeros({0})) == "tensor([])");
  CHECK(to_string(from_vector(std::vector<double>{1.5, std::nan(""), INFINITY}, {3})) == "tensor([1.5000,    nan,    inf])");
  CHECK(to_string(from_vector(std::vector<double>{1e-5, 1}, {2})) == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(to_string(zeros({2}).requires_grad_()) == "tensor([0., 0.], requires_grad=True)");
  // Summarised (more than 1000 elements): 3 edge items per dimension, rows of "..." between.
  CHECK(to_string(arange(2000, DType::float32)) ==
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03])");
  CHECK(to_string(arange(1100, DType::int64).reshape({100, 11})) ==
        "tensor([[   0,    1,    2,  ...,    8,    9,   10],\n"
        "        [  11,   12,   13,  ...,   19,   20,   21],\n"
        "        [  22,   23,   24,  ...,   30,   31,   32],\n"
        "        ...,\n"
        "        [1067, 1068, 1069,  ..., 1075, 1076, 1077],\n"
        "        [1078, 1079, 1080,  ..., 1086, 1087, 1088],\n"
        "        [1089, 1090, 1091,  ..., 1097, 1098, 1099]])");
  CHECK(to_string(arange(8, DType::int64).reshape({2, 2, 2})) ==
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
  // A view prints its own values (strides, offset).
  CHECK(to_string(arange(6, DType::int64).reshape({2, 3}).t()) == "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
  std::ostringstream os;
  os << arange(3, DType::uint8);
  CHECK(os.str() == "tensor([0, 1, 2], dtype=uint8)");
}

TEST_CASE("printing: options") {
  const PrintOptions saved = print_options();
  PrintOptions o;
  o.precision = 2;
  set_print_options(o);
  CHECK(to_string(from_vector(std::vector<double>{1.5, 0.25}, {2})) == "tensor([1.50, 0.25])");
  o.threshold = 4;
  o.edgeitems = 1;
  set_print_options(o);
  CHECK(to_string(arange(5, DType::int64)) == "tensor([0,  ..., 4])");
  o.sci_mode = PrintOptions::Sci::on;
  CHECK(to_string(from_vector(std::vector<double>{1.5, 0.25}, {2}), o) == "tensor([1.50e+00, 2.50e-01])");
  set_print_options(saved);
  o.linewidth = 0;
  CHECK_THROWS_KILN(set_print_options(o), "linewidth must be at least 1");
  o.linewidth = 80;
  o.edgeitems = -1;
  CHECK_THROWS_KILN(set_print_options(o), "edgeitems must be at least 0");
}

TEST_CASE("an undefined Tensor names the accessor that met it") {
  Tensor a = ones({2});
  Tensor b = std::move(a);
  CHECK_THROWS_KILN(a.sizes(), "Tensor::sizes(): the Tensor is undefined");  // NOLINT(bugprone-use-after-move)
  CHECK_THROWS_KILN(Tensor().requires_grad_(), "Tensor::requires_grad_()");
  CHECK(b.numel() == 2);
}

TEST_CASE("allocator: held bytes (in use + cached) stay within the limit; a miss frees other sizes") {
  auto& alloc = CpuAllocator::instance();
  const int64_t saved = alloc.cache_limit();
  alloc.empty_cache();
  const int64_t base = alloc.stats().reserved;  // live tensors of the process
  alloc.set_cache_limit(base + (int64_t(6) << 20));
  {
    Tensor a = empty({1 << 20});  // 4 MiB
    Tensor b = empty({1 << 20});
  }
  CHECK(alloc.cached_bytes() == int64_t(4) << 20);  // one of the two blocks is kept
  {
    Tensor c = empty({1 << 19});  // 2 MiB: fits beside the cached 4 MiB
    CHECK(alloc.cached_bytes() == int64_t(4) << 20);
    Tensor d = empty({3 << 18});  // 3 MiB: the cached 4 MiB block is given back first
    CHECK(alloc.cached_bytes() == 0);
    CHECK(alloc.stats().reserved <= base + (int64_t(6) << 20));
  }
  alloc.set_cache_limit(saved);
  CHECK(alloc.cache_limit() == saved);
}
