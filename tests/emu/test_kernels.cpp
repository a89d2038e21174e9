// What the oracle cannot check about kiln's CUDA kernels under the emulator (their values against
// ref over the oracle's problem tables: ctest -R oracle_emu): the same bits on every launch
// (reductions without atomics: two-pass reduce, multi-block sums of squares, convolution weight
// gradients), the convolution's batch chunks under a small column budget giving the unchunked
// result, empty shapes, and what each kernel declines or refuses with kiln::Error.
//   ctest --test-dir build -R emu.test_kernels
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/common/conv.h"
#include "kernels/common/error.h"
#include "kernels/cuda/native/conv.h"
#include "kernels/cuda/native/gemm.h"
#include "kernels/cuda/native/optim.h"
#include "kernels/cuda/native/reduce.h"
#include "kernels/cuda/native/shape.h"

namespace kiln {
namespace {

std::vector<float> values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int64_t(s >> 40) % 2001 - 1000) / 1000.0f + 0.25f;  // mostly positive: sums grow
  }
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("emu kernels: the same bits on every launch (reduce one and two passes, sum_squares, conv weight gradients)") {
  const int64_t shapes[][3] = {{1, 100003, 1}, {3, 9000, 1}, {2, 1000, 3}, {4, 1, 1000}};
  for (const auto& s : shapes) {
    ReduceDesc d;
    d.outer = s[0], d.reduce = s[1], d.inner = s[2];
    CAPTURE(d.str());
    const std::vector<float> x = values(size_t(d.outer * d.reduce * d.inner), 1);
    std::vector<float> a(size_t(d.outer * d.inner)), b(a.size(), -1.f);
    cuda::reduce(d, x.data(), a.data(), nullptr);
    cuda::reduce(d, x.data(), b.data(), nullptr);
    CHECK(same_bits(a, b));
  }
  VecDesc v;
  v.n = 70001;  // 18 partial blocks
  const std::vector<float> x = values(size_t(v.n), 2);
  double s1 = 0, s2 = -1;
  cuda::sum_squares(v, x.data(), &s1);
  cuda::sum_squares(v, x.data(), &s2);
  CHECK(s1 == s2);
  const ConvDesc c = parse_conv_problem("mb3ic3ih9iw11oc6kh3ph1");
  const std::vector<float> src = values(size_t(c.src_elems()), 3), dy = values(size_t(c.dst_elems()), 4);
  std::vector<float> w1(size_t(c.wei_elems())), w2(w1.size(), -1.f), b1(size_t(c.K)), b2(b1.size(), -1.f);
  cuda::conv2d_bwd_weights(c, src.data(), dy.data(), w1.data(), b1.data());
  cuda::conv2d_bwd_weights(c, src.data(), dy.data(), w2.data(), b2.data());
  CHECK(same_bits(w1, w2));
  CHECK(same_bits(b1, b2));
}

TEST_CASE("emu kernels: the conv bias gradient alone, float32 and half diff_dst, sums in float32") {
  for (bool nhwc : {false, true}) {
    CAPTURE(nhwc);
    ConvDesc c = parse_conv_problem("mb3ic3ih9iw11oc6kh3ph1");
    c.nhwc = nhwc;
    const std::vector<float> src = values(size_t(c.src_elems()), 5), dy = values(size_t(c.dst_elems()), 6);
    std::vector<float> want(size_t(c.K)), got(want.size(), -1.f);
    cuda::conv2d_bwd_weights(c, src.data(), dy.data(), nullptr, want.data());
    REQUIRE(cuda::supports_conv_bias_grad(c));
    cuda::conv2d_bias_grad(c, dy.data(), got.data());
    CHECK(same_bits(got, want));  // the same kernel and order as the full backward
    // Half diff_dst: each element widened, then the same float32 sums as for the widened copy.
    std::vector<Half> dyh(dy.begin(), dy.end());
    std::vector<BFloat16> dyb(dy.begin(), dy.end());
    std::vector<float> dyh_f(dyh.begin(), dyh.end()), dyb_f(dyb.begin(), dyb.end());
    std::vector<float> want_h(want.size()), want_b(want.size()), got_h(want.size(), -1.f), got_b(want.size(), -1.f);
    cuda::conv2d_bias_grad(c, dyh_f.data(), want_h.data());
    cuda::conv2d_bias_grad(c, dyb_f.data(), want_b.data());
    ConvDesc h = c, b = c;
    h.dtype = DType::float16;
    b.dtype = DType::bfloat16;
    REQUIRE(cuda::supports_conv_bias_grad(h));
    REQUIRE(cuda::supports_conv_bias_grad(b));
    cuda::conv2d_bias_grad(h, dyh.data(), got_h.data());
    cuda::conv2d_bias_grad(b, dyb.data(), got_b.data());
    CHECK(same_bits(got_h, want_h));
    CHECK(same_bits(got_b, want_b));
    // ... and not rounded to the half type: a sum of 297 values of about 0.25 needs float32's bits.
    bool wider_than_bf16 = false;
    for (float v : got_b) wider_than_bf16 |= float(BFloat16(v)) != v;
    CHECK(wider_than_bf16);
  }
  ConvDesc d = parse_conv_problem("mb1ic4ih7oc6kh1");
  d.dtype = DType::float64;
  CHECK_FALSE(cuda::supports_conv_bias_grad(d));
  std::vector<double> dy64(size_t(d.dst_elems()));
  std::vector<float> out(size_t(d.K));
  CHECK_THROWS_AS(cuda::conv2d_bias_grad(d, dy64.data(), out.data()), Error);
}

TEST_CASE("emu kernels: conv under a column budget that splits the batch gives the unchunked bits") {
  for (const char* p : {"mb3ic3ih9iw11oc6kh3ph1", "g3mb3ic6ih9oc6kh3sh2ph1", "mb3ic4ih7oc5kh1"})
    for (bool nhwc : {false, true}) {
      ConvDesc d = parse_conv_problem(p);
      d.nhwc = nhwc;
      CAPTURE(d.str());
      const std::vector<float> src = values(size_t(d.src_elems()), 5), wei = values(size_t(d.wei_elems()), 6),
                               bias = values(size_t(d.K), 7), dy = values(size_t(d.dst_elems()), 8);
      struct Out {
        std::vector<float> y, dx;
      };
      auto run = [&] {
        Out o{std::vector<float>(size_t(d.dst_elems())), std::vector<float>(size_t(d.src_elems()))};
        cuda::conv2d_fwd(d, src.data(), wei.data(), bias.data(), o.y.data());
        cuda::conv2d_bwd_data(d, dy.data(), wei.data(), o.dx.data());
        return o;
      };
      const Out whole = run();
      cuda::set_conv_column_budget(1);  // one image per chunk
      const Out chunked = run();
      cuda::set_conv_column_budget(0);
      CHECK(same_bits(whole.y, chunked.y));
      CHECK(same_bits(whole.dx, chunked.dx));
    }
}

TEST_CASE("emu kernels: empty shapes, and what the kernels decline or refuse") {
  GemmDesc g;
  g.m = 0, g.n = 5, g.k = 3, g.lda = 3, g.ldb = 5, g.ldc = 5;
  cuda::gemm(g, nullptr, nullptr, nullptr);  // nothing to do, nothing read
  std::vector<float> c(6, 2.f);
  g.m = 2, g.n = 3, g.k = 0, g.lda = 1, g.ldb = 3, g.ldc = 3, g.beta = 0.5;  // k = 0: C = beta * C
  float dummy = 0;
  cuda::gemm(g, &dummy, &dummy, c.data());
  for (float x : c) CHECK(x == 1.f);
  g.lda = 0, g.k = 4;
  CHECK_THROWS_AS(cuda::gemm(g, &dummy, &dummy, c.data()), kiln::Error);
  g.dtype = DType::int32;
  CHECK_FALSE(cuda::supports_gemm(g));

  ReduceDesc r;
  CHECK(cuda::supports_reduce(r));
  r.op = ReduceOp::max;
  r.want_index = true;
  CHECK(cuda::supports_reduce(r));  // max and min, with the index (argmax, the backward pass)
  {
    ReduceDesc empty = r;  // max over an empty axis has no answer
    empty.reduce = 0;
    float src = 0, dst = 0;
    int64_t idx = 0;
    CHECK_THROWS_WITH(cuda::reduce(empty, &src, &dst, &idx), doctest::Contains("max/min over an empty axis"));
  }
  r.op = ReduceOp::sum;
  CHECK_FALSE(cuda::supports_reduce(r));  // sums have no index
  r.want_index = false;
  r.dtype = DType::bfloat16;
  CHECK_FALSE(cuda::supports_reduce(r));

  ConvDesc d;
  d.dtype = DType::float64;
  CHECK_FALSE(cuda::supports_conv(d));
  CHECK_THROWS_AS(cuda::conv2d_fwd(d, &dummy, &dummy, nullptr, &dummy), kiln::Error);
  d.dtype = DType::float32;
  d.C = 3;
  d.groups = 2;
  CHECK_FALSE(cuda::supports_conv(d));

  PadDesc p;
  p.dtype = DType::float16;
  CHECK_FALSE(cuda::supports_pad(p));
  CHECK_THROWS_AS(cuda::pad_fwd(p, &dummy, &dummy), kiln::Error);
  UpsampleDesc u;
  u.dtype = DType::int32;
  CHECK_FALSE(cuda::supports_upsample(u));
}

}  // namespace kiln
