// kiln's own CUDA pooling, adaptive pooling and LRN (kernels/cuda/native/pool.cu) under the
// emulator against kernels/cpu/ref/pool.h: batch 3, channels 5, 9x11 images; windows 2 and 3,
// strides 1, 2, 3, padding 0 and 1, floor and ceil mode, dilation, count_include_pad,
// divisor_override, NCHW and NHWC. float64 against the float64 ref: max pooling must match
// exactly (values and int64 argmax indices); avg and LRN to 1e-12 (division and pow rounding in
// a different order, and the backward gathers what the ref scatters). One float32 pass against
// the float64 ref at 1e-5 (float32 rounding of O(1) sums of at most 9 terms).
//   Run: ctest --test-dir build -R emu.test_pool
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/cpu/ref/pool.h"
#include "kernels/cuda/native/pool.h"

#include "tests/emu/emu_testing.h"

using namespace kiln;

namespace {

using emu_test::check_near;
using emu_test::rnd;

PoolDesc pool_desc(PoolAlg alg, int64_t k, int64_t s, int64_t p, bool ceil, bool nhwc) {
  PoolDesc d;
  d.alg = alg, d.dtype = DType::float64, d.n = 3, d.c = 5, d.ih = 9, d.iw = 11;
  d.kh = d.kw = k, d.sh = d.sw = s, d.ph = d.pw = p, d.ceil_mode = ceil, d.nhwc = nhwc;
  d.oh = pool_output_size(d.ih, k, p, s, 1, ceil);
  d.ow = pool_output_size(d.iw, k, p, s, 1, ceil);
  return d;
}

void run_pool(const PoolDesc& d, double tol) {
  const size_t ni = size_t(d.planes() * d.ih * d.iw), no = size_t(d.planes() * d.oh * d.ow);
  std::vector<double> x = rnd(ni, 21), dy = rnd(no, 22);
  if (d.alg == PoolAlg::max) x[7] = x[8];  // a tie: the first tap must win, as in the ref
  std::vector<double> y(no), yr(no), dx(ni), dxr(ni);
  std::vector<int64_t> idx(no), idxr(no);
  const bool max = d.alg == PoolAlg::max;
  cuda::pool_fwd(d, x.data(), y.data(), max ? idx.data() : nullptr);
  ref::pool_fwd<double>(d, x.data(), yr.data(), max ? idxr.data() : nullptr);
  check_near(y, yr, max ? 0.0 : tol, "dst");
  if (max) CHECK(idx == idxr);
  cuda::pool_bwd(d, dy.data(), max ? idxr.data() : nullptr, dx.data());
  ref::pool_bwd<double>(d, dy.data(), max ? idxr.data() : nullptr, dxr.data());
  check_near(dx, dxr, max ? 0.0 : tol, "diff_src");
}

}  // namespace

TEST_CASE("emu pool fwd/bwd against ref: windows, strides, padding, ceil mode, layouts") {
  int cases = 0;
  for (int64_t k : {2, 3})
    for (int64_t s : {1, 2, 3})
      for (int64_t p : {0, 1})
        for (bool ceil : {false, true})
          for (bool nhwc : {false, true})
            for (int variant = 0; variant < 3; ++variant) {  // max, avg incl. pad, avg excl. pad
              PoolDesc d = pool_desc(variant == 0 ? PoolAlg::max : PoolAlg::avg, k, s, p, ceil, nhwc);
              d.count_include_pad = variant != 2;
              CAPTURE(d.str());
              run_pool(d, 1e-12);
              ++cases;
            }
  CHECK(cases == 144);
}

TEST_CASE("emu pool: dilation, divisor_override, windows larger than the stride, float32") {
  PoolDesc d = pool_desc(PoolAlg::max, 3, 2, 1, true, false);
  d.dh = 2, d.dw = 2;
  d.oh = pool_output_size(d.ih, 3, 1, 2, 2, true);
  d.ow = pool_output_size(d.iw, 3, 1, 2, 2, true);
  for (bool nhwc : {false, true}) {
    d.nhwc = nhwc;
    CAPTURE(d.str());
    run_pool(d, 0);
  }
  PoolDesc a = pool_desc(PoolAlg::avg, 3, 1, 1, false, true);
  a.divisor_override = 7;
  CAPTURE(a.str());
  run_pool(a, 1e-12);
  PoolDesc h = pool_desc(PoolAlg::avg, 2, 2, 1, true, false);  // 9x11 -> ceil windows in padding
  h.kh = 3;
  h.oh = pool_output_size(h.ih, 3, 1, 2, 1, true);
  run_pool(h, 1e-12);

  // float32 once: avg 3x3/2 pad 1 NCHW against the float64 ref
  PoolDesc f = pool_desc(PoolAlg::avg, 3, 2, 1, false, false);
  const size_t ni = size_t(f.planes() * f.ih * f.iw), no = size_t(f.planes() * f.oh * f.ow);
  const std::vector<double> x = rnd(ni, 23), dy = rnd(no, 24);
  std::vector<double> yr(no), dxr(ni);
  ref::pool_fwd<double>(f, x.data(), yr.data(), nullptr);
  ref::pool_bwd<double>(f, dy.data(), nullptr, dxr.data());
  f.dtype = DType::float32;
  const std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end());
  std::vector<float> yf(no), dxf(ni);
  cuda::pool_fwd(f, xf.data(), yf.data(), nullptr);
  cuda::pool_bwd(f, dyf.data(), nullptr, dxf.data());
  check_near(yf, yr, 1e-6, "dst float32");
  check_near(dxf, dxr, 1e-6, "diff_src float32");
}

TEST_CASE("emu adaptive pool fwd/bwd against ref (shrinking, growing, overlapping windows)") {
  const int64_t sizes[][2] = {{1, 1}, {3, 4}, {5, 7}, {9, 11}, {13, 17}};  // 9x11 -> oh x ow
  for (const auto& o : sizes)
    for (PoolAlg alg : {PoolAlg::avg, PoolAlg::max}) {
      AdaptivePoolDesc d;
      d.alg = alg, d.dtype = DType::float64, d.n = 3, d.c = 5, d.ih = 9, d.iw = 11, d.oh = o[0], d.ow = o[1];
      CAPTURE(d.str());
      const size_t ni = size_t(d.planes() * d.ih * d.iw), no = size_t(d.planes() * d.oh * d.ow);
      const std::vector<double> x = rnd(ni, 31), dy = rnd(no, 32);
      std::vector<double> y(no), yr(no), dx(ni), dxr(ni);
      std::vector<int64_t> idx(no), idxr(no);
      cuda::adaptive_pool_fwd(d, x.data(), y.data(), idx.data());
      ref::adaptive_pool_fwd<double>(d, x.data(), yr.data(), idxr.data());
      check_near(y, yr, 1e-12, "dst");
      if (alg == PoolAlg::max) CHECK(idx == idxr);
      cuda::adaptive_pool_bwd(d, dy.data(), idxr.data(), dx.data());
      ref::adaptive_pool_bwd<double>(d, dy.data(), idxr.data(), dxr.data());
      check_near(dx, dxr, 1e-12, "diff_src");
    }
}

TEST_CASE("emu LRN fwd/bwd against ref (sizes 1..6 over 5 and 7 channels)") {
  for (int64_t c : {5, 7})
    for (int64_t size : {1, 2, 3, 5, 6}) {
      LrnDesc d;
      d.dtype = DType::float64, d.n = 3, d.c = c, d.inner = 9 * 11 / 3, d.size = size;
      d.alpha = 0.1, d.beta = 0.75, d.k = 2;
      CAPTURE(d.str());
      const size_t n = size_t(d.n * d.c * d.inner);
      const std::vector<double> x = rnd(n, 41, -2, 2), dy = rnd(n, 42);
      std::vector<double> y(n), s(n), yr(n), sr(n), dx(n), dxr(n);
      cuda::lrn_fwd(d, x.data(), y.data(), s.data());
      ref::lrn_fwd<double>(d, x.data(), yr.data(), sr.data());
      check_near(y, yr, 1e-12, "dst");
      check_near(s, sr, 1e-12, "scale");
      cuda::lrn_bwd(d, x.data(), yr.data(), sr.data(), dy.data(), dx.data());
      ref::lrn_bwd<double>(d, x.data(), yr.data(), sr.data(), dy.data(), dxr.data());
      check_near(dx, dxr, 1e-12, "diff_src");
    }
}

TEST_CASE("emu pool and adaptive pool in bfloat16 and float16") {
  // The ref runs in double on the 16-bit inputs widened. Max pooling picks an input, so values
  // and indices match exactly; avg rounds its float32 mean once (bfloat16 2^-8, float16 2^-11).
  auto run = [](auto tag, DType dt, double tol) {
    using H = decltype(tag);
    for (PoolAlg alg : {PoolAlg::max, PoolAlg::avg})
      for (bool nhwc : {false, true}) {
        PoolDesc d = pool_desc(alg, 3, 2, 1, true, nhwc);
        CAPTURE(d.str());
        const size_t ni = size_t(d.planes() * d.ih * d.iw), no = size_t(d.planes() * d.oh * d.ow);
        std::vector<H> hx, hdy;
        std::vector<double> x, dy;
        for (double v : rnd(ni, 91)) hx.push_back(H(float(v))), x.push_back(double(float(hx.back())));
        for (double v : rnd(no, 92)) hdy.push_back(H(float(v))), dy.push_back(double(float(hdy.back())));
        std::vector<double> yr(no), dxr(ni);
        std::vector<int64_t> idx(no), idxr(no);
        const bool max = alg == PoolAlg::max;
        ref::pool_fwd<double>(d, x.data(), yr.data(), max ? idxr.data() : nullptr);
        ref::pool_bwd<double>(d, dy.data(), max ? idxr.data() : nullptr, dxr.data());
        d.dtype = dt;
        std::vector<H> hy(no), hdx(ni);
        cuda::pool_fwd(d, hx.data(), hy.data(), max ? idx.data() : nullptr);
        cuda::pool_bwd(d, hdy.data(), max ? idx.data() : nullptr, hdx.data());
        std::vector<float> fy, fdx;
        for (H v : hy) fy.push_back(float(v));
        for (H v : hdx) fdx.push_back(float(v));
        check_near(fy, yr, max ? 0.0 : tol, "dst");
        if (max) CHECK(idx == idxr);
        check_near(fdx, dxr, tol, "diff_src");  // max: sums of up to 4 gradients, rounded once
      }
    AdaptivePoolDesc a;
    a.alg = PoolAlg::avg, a.dtype = dt, a.n = 3, a.c = 5, a.ih = 9, a.iw = 11, a.oh = 4, a.ow = 5;
    const size_t ni = size_t(a.planes() * a.ih * a.iw), no = size_t(a.planes() * a.oh * a.ow);
    std::vector<H> hx;
    std::vector<double> x;
    for (double v : rnd(ni, 93)) hx.push_back(H(float(v))), x.push_back(double(float(hx.back())));
    std::vector<double> yr(no);
    ref::adaptive_pool_fwd<double>(a, x.data(), yr.data(), nullptr);
    std::vector<H> hy(no);
    cuda::adaptive_pool_fwd(a, hx.data(), hy.data(), nullptr);
    std::vector<float> fy;
    for (H v : hy) fy.push_back(float(v));
    check_near(fy, yr, tol, "adaptive dst");
  };
  run(BFloat16{}, DType::bfloat16, 1.0 / 256);
  run(Half{}, DType::float16, 1.0 / 2048);
}
