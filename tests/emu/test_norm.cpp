// kiln's own CUDA batch norm, dropout and softmax (kernels/cuda/native/norm.cu) run under the
// emulator against kernels/cpu/ref/norm.h on small odd shapes. The kernels run in float64
// against the ref in float64 (tolerance 1e-12: only the summation order differs; the GPU sums
// by trees) and once in float32 against the float64 ref (tolerance 2e-5: float32 rounding of
// values of order 1 over sums of a few hundred terms). Dropout's mask must equal the CPU native
// kernel's bit for bit.  Run: ctest --test-dir build -R emu.test_norm
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/cpu/native/norm.h"
#include "kernels/cpu/ref/norm.h"
#include "kernels/cuda/native/norm.h"

#include "tests/emu/emu_testing.h"

using namespace kiln;

namespace {

using emu_test::check_near;
using emu_test::rnd;

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

struct BnCase {
  int64_t N, C, S;
  bool nhwc, training, relu, affine;
};

template <class T>
void run_bn(const BnCase& k, double tol) {
  BatchNormDesc d;
  d.dtype = sizeof(T) == 8 ? DType::float64 : DType::float32;
  d.N = k.N, d.C = k.C, d.S = k.S, d.nhwc = k.nhwc, d.training = k.training, d.relu = k.relu;
  d.momentum = 0.1;
  const size_t n = size_t(k.N * k.C * k.S), c = size_t(k.C);
  const std::vector<double> x = rnd(n, 1, -2, 3), w = rnd(c, 2, 0.5, 1.5), b = rnd(c, 3), dy = rnd(n, 4);
  const std::vector<double> rm0 = rnd(c, 5), rv0 = rnd(c, 6, 0.5, 2);
  // ref in double
  std::vector<double> rm = rm0, rv = rv0, y(n), sm(c), si(c), dx(n), dw(c), db(c);
  ref::batch_norm_fwd<double>(d, x.data(), k.affine ? w.data() : nullptr, k.affine ? b.data() : nullptr, rm.data(),
                              rv.data(), y.data(), sm.data(), si.data());
  ref::batch_norm_bwd<double>(d, x.data(), dy.data(), k.affine ? w.data() : nullptr, sm.data(), si.data(), dx.data(),
                              dw.data(), db.data());
  // emulated kernels in T ("device" memory is host memory under the emulator)
  std::vector<T> tx = as<T>(x), tw = as<T>(w), tb = as<T>(b), tdy = as<T>(dy), trm = as<T>(rm0), trv = as<T>(rv0);
  std::vector<T> ty(n), tsm(c), tsi(c), tdx(n), tdw(c), tdb(c);
  cuda::batch_norm_fwd(d, tx.data(), k.affine ? tw.data() : nullptr, k.affine ? tb.data() : nullptr, trm.data(),
                       trv.data(), ty.data(), tsm.data(), tsi.data());
  cuda::batch_norm_bwd(d, tx.data(), tdy.data(), k.affine ? tw.data() : nullptr, tsm.data(), tsi.data(), tdx.data(),
                       tdw.data(), tdb.data());
  check_near(ty, y, tol, "dst");
  check_near(tsm, sm, tol, "save_mean");
  check_near(tsi, si, tol, "save_invstd");
  check_near(trm, rm, tol, "running_mean");
  check_near(trv, rv, tol, "running_var");
  check_near(tdx, dx, tol, "diff_src");
  check_near(tdw, dw, tol * 10, "diff_wei");  // sums of N*S products
  check_near(tdb, db, tol * 10, "diff_bias");
  // nullable outputs of backward: diff_src only
  std::vector<T> tdx2(n);
  cuda::batch_norm_bwd(d, tx.data(), tdy.data(), k.affine ? tw.data() : nullptr, tsm.data(), tsi.data(), tdx2.data(),
                       nullptr, nullptr);
  check_near(tdx2, dx, tol, "diff_src (no weight grads)");
}

}  // namespace

TEST_CASE("emu batch_norm fwd/bwd against ref (NCHW, NHWC, flat, eval, relu, affine=false)") {
  const BnCase cases[] = {
      {3, 5, 99, false, true, false, true}, {3, 5, 99, true, true, false, true}, {3, 5, 99, false, true, true, true},
      {3, 5, 99, true, false, true, true},  {3, 5, 99, false, false, false, false}, {7, 33, 1, false, true, false, true},
      {1, 37, 3, true, true, true, false},  {2, 3, 1, true, true, false, true},     {1, 5, 1, false, true, false, true},
      // several row chunks per channel (16384 elements per block: NCHW 16384 rows, NHWC 512)
      {2, 2, 8200, false, true, false, true}, {2, 5, 300, true, true, true, true},
  };
  for (const BnCase& k : cases) {
    CAPTURE(k.N);
    CAPTURE(k.C);
    CAPTURE(k.S);
    CAPTURE(k.nhwc);
    CAPTURE(k.training);
    CAPTURE(k.relu);
    run_bn<double>(k, 1e-12);
  }
  run_bn<float>(cases[0], 2e-5);
  run_bn<float>(cases[1], 2e-5);
}

TEST_CASE("emu dropout: the CPU native mask bit for bit, and the backward") {
  for (int64_t n : {1, 7, 33, 255, 1000}) {
    for (double p : {0.0, 0.1, 0.5, 0.9}) {
      CAPTURE(n);
      CAPTURE(p);
      const size_t un = static_cast<size_t>(n);
      DropoutDesc d;
      d.n = n, d.p = p, d.seed = 1234567 + uint64_t(n), d.offset = 3;
      const std::vector<float> x = as<float>(rnd(un, 7));
      std::vector<float> y(un), yc(un), dx(un), dxc(un);
      std::vector<uint8_t> m(un), mc(un);
      cuda::dropout_fwd(d, x.data(), y.data(), m.data());
      native::dropout_fwd(d, x.data(), yc.data(), mc.data());
      CHECK(m == mc);
      CHECK(y == yc);
      cuda::dropout_bwd(d, x.data(), m.data(), dx.data());
      native::dropout_bwd(d, x.data(), mc.data(), dxc.data());
      CHECK(dx == dxc);
    }
  }
  // float64 against the ref (which draws element by element through philox_uniform)
  DropoutDesc d;
  d.dtype = DType::float64, d.n = 999, d.p = 0.3, d.seed = 42, d.offset = 17;
  const std::vector<double> x = rnd(999, 8);
  std::vector<double> y(999), yr(999);
  std::vector<uint8_t> m(999), mr(999);
  cuda::dropout_fwd(d, x.data(), y.data(), m.data());
  ref::dropout_fwd<double>(d, x.data(), yr.data(), mr.data());
  CHECK(m == mr);
  CHECK(y == yr);
}

TEST_CASE("emu softmax / log-softmax fwd/bwd against ref (dims 1, 7, 33, 1000; inner 1 and 3)") {
  for (int64_t dim : {1, 7, 33, 1000})
    for (int64_t inner : {1, 3})
      for (bool log : {false, true}) {
        CAPTURE(dim);
        CAPTURE(inner);
        CAPTURE(log);
        SoftmaxDesc d;
        d.dtype = DType::float64, d.outer = 5, d.dim = dim, d.inner = inner, d.log = log;
        const size_t n = size_t(d.outer * dim * inner);
        const std::vector<double> x = rnd(n, 9, -4, 4), dy = rnd(n, 10);
        std::vector<double> y(n), yr(n), dx(n), dxr(n);
        cuda::softmax_fwd(d, x.data(), y.data());
        ref::softmax_fwd<double>(d, x.data(), yr.data());
        check_near(y, yr, 1e-12, "dst");
        cuda::softmax_bwd(d, yr.data(), dy.data(), dx.data());
        ref::softmax_bwd<double>(d, yr.data(), dy.data(), dxr.data());
        check_near(dx, dxr, 1e-12, "diff_src");
        if (dim == 1000) {  // float32 once per layout: 2e-5 covers exp/log rounding in float
          d.dtype = DType::float32;
          const std::vector<float> xf = as<float>(x), yf0 = as<float>(yr), dyf = as<float>(dy);
          std::vector<float> yf(n), dxf(n);
          cuda::softmax_fwd(d, xf.data(), yf.data());
          check_near(yf, yr, 2e-5, "dst float32");
          cuda::softmax_bwd(d, yf0.data(), dyf.data(), dxf.data());
          check_near(dxf, dxr, 2e-5, "diff_src float32");
        }
      }
}

TEST_CASE("emu batch_norm and softmax in bfloat16 and float16 (float32 statistics)") {
  // The ref runs in double on the 16-bit inputs widened; the tolerance is the 16-bit rounding of
  // the outputs (bfloat16: 2^-8 relative, float16: 2^-11) with a factor 2 for the rounded
  // intermediate inputs of backward.
  auto run = [](auto tag, DType dt, double tol) {
    using H = decltype(tag);
    BatchNormDesc d;
    d.dtype = dt, d.N = 3, d.C = 5, d.S = 99, d.nhwc = true, d.relu = false;
    const size_t n = size_t(d.N * d.C * d.S), c = size_t(d.C);
    std::vector<H> hx, hdy;
    std::vector<double> x, dy;
    for (double v : rnd(n, 81, -2, 3)) hx.push_back(H(float(v))), x.push_back(double(float(hx.back())));
    for (double v : rnd(n, 82)) hdy.push_back(H(float(v))), dy.push_back(double(float(hdy.back())));
    const std::vector<double> w = rnd(c, 83, 0.5, 1.5), b = rnd(c, 84);
    std::vector<double> rm(c, 0.0), rv(c, 1.0), y(n), sm(c), si(c), dx(n), dw(c), db(c);
    ref::batch_norm_fwd<double>(d, x.data(), w.data(), b.data(), rm.data(), rv.data(), y.data(), sm.data(), si.data());
    ref::batch_norm_bwd<double>(d, x.data(), dy.data(), w.data(), sm.data(), si.data(), dx.data(), dw.data(), db.data());
    std::vector<float> fw = as<float>(w), fb = as<float>(b), frm(c, 0.0f), frv(c, 1.0f), fsm(c), fsi(c), fdw(c), fdb(c);
    std::vector<H> hy(n), hdx(n);
    cuda::batch_norm_fwd(d, hx.data(), fw.data(), fb.data(), frm.data(), frv.data(), hy.data(), fsm.data(), fsi.data());
    cuda::batch_norm_bwd(d, hx.data(), hdy.data(), fw.data(), fsm.data(), fsi.data(), hdx.data(), fdw.data(),
                         fdb.data());
    std::vector<float> fy, fdx;
    for (H v : hy) fy.push_back(float(v));
    for (H v : hdx) fdx.push_back(float(v));
    check_near(fy, y, tol, "bn dst");
    check_near(fsm, sm, 1e-5, "bn save_mean (float32)");
    check_near(fsi, si, 1e-5, "bn save_invstd (float32)");
    check_near(frv, rv, 1e-5, "bn running_var (float32)");
    check_near(fdx, dx, 2 * tol, "bn diff_src");
    check_near(fdw, dw, 1e-4, "bn diff_wei (float32 sums of 297 terms)");
    check_near(fdb, db, 1e-4, "bn diff_bias");

    for (int64_t inner : {1, 3}) {
      SoftmaxDesc s;
      s.dtype = dt, s.outer = 5, s.dim = 33, s.inner = inner, s.log = inner == 3;
      const size_t m = size_t(s.outer * s.dim * s.inner);
      std::vector<H> sx;
      std::vector<double> sxd, syr(m);
      for (double v : rnd(m, 85, -4, 4)) sx.push_back(H(float(v))), sxd.push_back(double(float(sx.back())));
      ref::softmax_fwd<double>(s, sxd.data(), syr.data());
      std::vector<H> sy(m);
      cuda::softmax_fwd(s, sx.data(), sy.data());
      std::vector<float> sf;
      for (H v : sy) sf.push_back(float(v));
      check_near(sf, syr, tol, "softmax dst");
    }
  };
  run(BFloat16{}, DType::bfloat16, 1.0 / 256);
  run(Half{}, DType::float16, 1.0 / 2048);
}

TEST_CASE("emu dropout in bfloat16: the float32 CPU mask, values x * 1/(1-p) rounded once") {
  DropoutDesc d;
  d.n = 255, d.p = 0.3, d.seed = 99, d.offset = 5;
  std::vector<float> xf;
  std::vector<BFloat16> xb;
  for (double v : rnd(255, 95)) xb.push_back(BFloat16(float(v))), xf.push_back(float(xb.back()));
  std::vector<float> yc(255);
  std::vector<uint8_t> mc(255), m(255);
  native::dropout_fwd(d, xf.data(), yc.data(), mc.data());
  d.dtype = DType::bfloat16;
  std::vector<BFloat16> y(255), dx(255);
  cuda::dropout_fwd(d, xb.data(), y.data(), m.data());
  CHECK(m == mc);
  for (size_t i = 0; i < 255; ++i) CHECK(float(y[i]) == float(BFloat16(yc[i])));
  cuda::dropout_bwd(d, xb.data(), m.data(), dx.data());
  for (size_t i = 0; i < 255; ++i) CHECK(float(dx[i]) == float(y[i]));
}
