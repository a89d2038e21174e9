// kiln's own CUDA padding and upsampling (kernels/cuda/native/shape.cu) under the emulator,
// against the ref kernels in double: every pad mode with positive, zero, negative (crop) and
// asymmetric pads, 1-d pads; nearest and bilinear upsampling (align_corners both ways, user
// scales, up and down, sizes 1) forward and backward. float64 runs are compared at 1e-12
// (different summation order only), float32 at rtol/atol 1e-5.
//   ctest --test-dir build -R emu.test_shape
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/cpu/ref/shape.h"
#include "kernels/cuda/native/shape.h"

namespace kiln {
namespace {

std::vector<double> random_values(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 3;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = double(int64_t(s >> 40) % 2001 - 1000) / 1000.0;
  }
  return v;
}

template <class T>
std::string first_mismatch(const std::vector<T>& got, const std::vector<double>& want, double tol, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]);
    if (!(err <= tol + tol * std::abs(want[i]))) {
      std::ostringstream os;
      os << what << "[" << i << "] = " << got[i] << ", ref " << want[i];
      return os.str();
    }
  }
  return "";
}

// Forward and backward of one descriptor in T on the emulated device and in double on ref.
template <class T, class Desc, class Fwd, class Bwd, class RefFwd, class RefBwd>
void compare(const Desc& d, int64_t in_elems, int64_t out_elems, Fwd fwd, Bwd bwd, RefFwd rfwd, RefBwd rbwd) {
  const double tol = std::is_same<T, double>::value ? 1e-12 : 1e-5;
  const auto src = random_values(size_t(in_elems), 1);
  const auto diff_dst = random_values(size_t(out_elems), 2);
  std::vector<double> dst(static_cast<size_t>(out_elems)), diff_src(static_cast<size_t>(in_elems));
  rfwd(src.data(), dst.data());
  rbwd(diff_dst.data(), diff_src.data());
  std::vector<T> src_t(src.begin(), src.end()), diff_dst_t(diff_dst.begin(), diff_dst.end());
  std::vector<T> dst_t(dst.size(), T(NAN)), diff_src_t(diff_src.size(), T(NAN));
  fwd(d, src_t.data(), dst_t.data());
  bwd(d, diff_dst_t.data(), diff_src_t.data());
  std::string m = first_mismatch(dst_t, dst, tol, "dst");
  CHECK_MESSAGE(m.empty(), m);
  m = first_mismatch(diff_src_t, diff_src, tol, "diff_src");
  CHECK_MESSAGE(m.empty(), m);
}

template <class T>
void pad_case(PadMode mode, int64_t ih, int64_t iw, int64_t top, int64_t bottom, int64_t left, int64_t right) {
  PadDesc d;
  d.mode = mode;
  d.dtype = std::is_same<T, double>::value ? DType::float64 : DType::float32;
  d.planes = 3;
  d.ih = ih; d.iw = iw;
  d.oh = ih + top + bottom;
  d.ow = iw + left + right;
  d.top = top;
  d.left = left;
  d.value = 0.25;
  INFO(d.str());
  REQUIRE(cuda::supports_pad(d));
  PadDesc dr = d;
  dr.dtype = DType::float64;
  compare<T>(
      d, d.planes * ih * iw, d.planes * d.oh * d.ow,
      [](const PadDesc& x, const T* s, T* o) { cuda::pad_fwd(x, s, o); },
      [](const PadDesc& x, const T* s, T* o) { cuda::pad_bwd(x, s, o); },
      [&](const double* s, double* o) { ref::pad_fwd<double>(dr, s, o); },
      [&](const double* s, double* o) { ref::pad_bwd<double>(dr, s, o); });
}

template <class T>
void upsample_case(UpsampleMode mode, int64_t ih, int64_t iw, int64_t oh, int64_t ow, bool align, double sh = 0,
                   double sw = 0) {
  UpsampleDesc d;
  d.mode = mode;
  d.dtype = std::is_same<T, double>::value ? DType::float64 : DType::float32;
  d.n = 2; d.c = 3;
  d.ih = ih; d.iw = iw; d.oh = oh; d.ow = ow;
  d.align_corners = align;
  d.scale_h = sh;
  d.scale_w = sw;
  INFO(d.str());
  REQUIRE(cuda::supports_upsample(d));
  UpsampleDesc dr = d;
  dr.dtype = DType::float64;
  compare<T>(
      d, d.planes() * ih * iw, d.planes() * oh * ow,
      [](const UpsampleDesc& x, const T* s, T* o) { cuda::upsample_fwd(x, s, o); },
      [](const UpsampleDesc& x, const T* s, T* o) { cuda::upsample_bwd(x, s, o); },
      [&](const double* s, double* o) { ref::upsample_fwd<double>(dr, s, o); },
      [&](const double* s, double* o) { ref::upsample_bwd<double>(dr, s, o); });
}

template <class T>
void pad_all() {
  for (PadMode m : {PadMode::constant, PadMode::reflect, PadMode::replicate, PadMode::circular}) {
    pad_case<T>(m, 9, 11, 2, 3, 4, 1);    // asymmetric
    pad_case<T>(m, 9, 11, 0, 0, 0, 0);    // identity
    pad_case<T>(m, 9, 11, -2, 1, 3, -4);  // crop on one side, pad on the other
    pad_case<T>(m, 1, 7, 0, 0, 6, 5);     // 1-d
    pad_case<T>(m, 5, 4, 4, 4, 3, 3);     // pads up to in - 1 (reflect's limit) / in (circular's)
  }
  pad_case<T>(PadMode::constant, 3, 3, 5, 6, 7, 8);    // pads larger than the input
  pad_case<T>(PadMode::replicate, 1, 1, 4, 2, 3, 5);   // a single pixel replicated
  pad_case<T>(PadMode::circular, 6, 7, -2, -1, 2, 1);  // crop then wrap
}

template <class T>
void upsample_all() {
  for (UpsampleMode m : {UpsampleMode::nearest, UpsampleMode::bilinear})
    for (bool align : {false, true}) {
      if (m == UpsampleMode::nearest && align) continue;
      upsample_case<T>(m, 9, 11, 18, 22, align);     // x2
      upsample_case<T>(m, 9, 11, 9, 11, align);      // identity
      upsample_case<T>(m, 9, 11, 23, 17, align);     // odd ratios
      upsample_case<T>(m, 9, 11, 5, 4, align);       // downsampling
      upsample_case<T>(m, 1, 1, 7, 3, align);        // from one pixel
      upsample_case<T>(m, 7, 5, 1, 1, align);        // to one pixel
      upsample_case<T>(m, 4, 5, 12, 12, align, 3.0, 2.5);  // user scale factors
    }
}

}  // namespace

TEST_CASE("emu pad float64: all modes against ref") { pad_all<double>(); }
TEST_CASE("emu pad float32: all modes against ref") { pad_all<float>(); }
TEST_CASE("emu upsample float64: nearest and bilinear against ref") { upsample_all<double>(); }
TEST_CASE("emu upsample float32: nearest and bilinear against ref") { upsample_all<float>(); }

TEST_CASE("emu pad/upsample: dtypes") {
  PadDesc p;
  p.dtype = DType::float16;
  CHECK_FALSE(cuda::supports_pad(p));
  float x = 0;
  CHECK_THROWS_AS(cuda::pad_fwd(p, &x, &x), kiln::Error);
  UpsampleDesc u;
  u.dtype = DType::int32;
  CHECK_FALSE(cuda::supports_upsample(u));
}

}  // namespace kiln
