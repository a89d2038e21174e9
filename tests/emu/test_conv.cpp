// kiln's own CUDA convolution (kernels/cuda/native/conv.cu) under the emulator, against the ref
// convolution in double: batch 2, channels 3 -> 5 (3 -> 6 with groups 3), 9x11 images, kernels
// 1/3/5, strides 1/2, padding, dilation 2, groups 1 and 3, NCHW and NHWC; forward with bias and
// the fused ReLU, backward-data, backward-weights with the bias gradient; and a column budget
// small enough to split the batch into chunks.
// Tolerance: float32 sums of at most ~200 products of values in [-1, 1]: rtol 1e-4, atol 1e-4.
//   ctest --test-dir build -R emu.test_conv
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/cpu/ref/conv.h"
#include "kernels/cuda/native/conv.h"

namespace kiln {
namespace {

std::vector<double> random_values(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = double(int64_t(s >> 40) % 2001 - 1000) / 1000.0;
  }
  return v;
}

std::string first_mismatch(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]);
    if (!(err <= 1e-4 + 1e-4 * std::abs(want[i]))) {
      std::ostringstream os;
      os << what << "[" << i << "] = " << got[i] << ", ref " << want[i];
      return os.str();
    }
  }
  return "";
}

struct Case {
  int64_t C, K, R, S, stride_h, stride_w, pad_h, pad_w, dil, groups;
  bool relu;
};

void run_case(const Case& c, bool nhwc, int64_t N = 2) {
  ConvDesc d;
  d.N = N; d.C = c.C; d.H = 9; d.W = 11;
  d.K = c.K; d.R = c.R; d.S = c.S;
  d.stride_h = c.stride_h; d.stride_w = c.stride_w;
  d.pad_h = c.pad_h; d.pad_w = c.pad_w;
  d.dilation_h = d.dilation_w = c.dil;
  d.groups = c.groups;
  d.has_bias = true;
  d.relu = c.relu;
  d.nhwc = nhwc;
  d.set_output_size();
  INFO(d.str());
  REQUIRE(cuda::supports_conv(d));
  const auto src = random_values(size_t(d.src_elems()), 1);
  const auto wei = random_values(size_t(d.wei_elems()), 2);
  const auto bias = random_values(size_t(d.K), 3);
  const auto diff_dst = random_values(size_t(d.dst_elems()), 4);
  auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto src_f = f(src), wei_f = f(wei), bias_f = f(bias), diff_dst_f = f(diff_dst);

  std::vector<double> dst(size_t(d.dst_elems())), diff_src(size_t(d.src_elems())), diff_wei(size_t(d.wei_elems())),
      diff_bias(size_t(d.K));
  ConvDesc dr = d;
  dr.dtype = DType::float64;
  ref::conv2d_fwd<double>(dr, src.data(), wei.data(), bias.data(), dst.data());
  ref::conv2d_bwd_data<double>(dr, diff_dst.data(), wei.data(), diff_src.data());
  ref::conv2d_bwd_weights<double>(dr, src.data(), diff_dst.data(), diff_wei.data(), diff_bias.data());

  // Outputs start as NaN: every element must be written.
  const float nan = std::nanf("");
  std::vector<float> dst_f(dst.size(), nan), diff_src_f(diff_src.size(), nan), diff_wei_f(diff_wei.size(), nan),
      diff_bias_f(diff_bias.size(), nan);
  cuda::conv2d_fwd(d, src_f.data(), wei_f.data(), bias_f.data(), dst_f.data());
  cuda::conv2d_bwd_data(d, diff_dst_f.data(), wei_f.data(), diff_src_f.data());
  cuda::conv2d_bwd_weights(d, src_f.data(), diff_dst_f.data(), diff_wei_f.data(), diff_bias_f.data());
  std::string m = first_mismatch(dst_f, dst, "dst");
  CHECK_MESSAGE(m.empty(), m);
  m = first_mismatch(diff_src_f, diff_src, "diff_src");
  CHECK_MESSAGE(m.empty(), m);
  m = first_mismatch(diff_wei_f, diff_wei, "diff_wei");
  CHECK_MESSAGE(m.empty(), m);
  m = first_mismatch(diff_bias_f, diff_bias, "diff_bias");
  CHECK_MESSAGE(m.empty(), m);

  // Bitwise reproducible: a second run gives the same bits.
  std::vector<float> again(diff_wei.size(), nan);
  cuda::conv2d_bwd_weights(d, src_f.data(), diff_dst_f.data(), again.data(), nullptr);
  CHECK(std::memcmp(again.data(), diff_wei_f.data(), again.size() * sizeof(float)) == 0);
}

//                   C  K  R  S sh sw ph pw dil g relu
const Case kCases[] = {{3, 5, 1, 1, 1, 1, 0, 0, 1, 1, false},   // pointwise: no im2col
                       {3, 5, 1, 1, 2, 2, 0, 0, 1, 1, true},    // strided 1x1
                       {3, 5, 3, 3, 1, 1, 1, 1, 1, 1, true},
                       {3, 6, 3, 3, 2, 2, 1, 1, 1, 3, false},
                       {3, 5, 5, 5, 1, 1, 2, 2, 2, 1, false},   // dilation 2
                       {3, 5, 5, 3, 2, 1, 2, 1, 1, 1, true},    // non-square kernel, mixed strides
                       {3, 6, 3, 3, 1, 2, 0, 2, 2, 3, false},   // groups with dilation
                       {3, 6, 1, 1, 1, 1, 0, 0, 1, 3, false}};  // pointwise with groups

}  // namespace

TEST_CASE("emu conv2d NCHW: forward, backward-data, backward-weights against ref") {
  for (const Case& c : kCases) run_case(c, false);
}

TEST_CASE("emu conv2d NHWC: forward, backward-data, backward-weights against ref") {
  for (const Case& c : kCases) run_case(c, true);
}

TEST_CASE("emu conv2d: a column budget that splits the batch into chunks") {
  // 3x3 of 3 channels over 9x11: 27 * 99 floats per image; room for 2 images, so chunks 2 + 1.
  cuda::set_conv_column_budget(2 * 27 * 99 * 4 + 100);
  const Case c{3, 6, 3, 3, 1, 1, 1, 1, 1, 3, false};
  run_case(c, false, 3);
  run_case(c, true, 3);
  cuda::set_conv_column_budget(1);  // one image per chunk
  for (const Case& k : kCases) {
    run_case(k, false, 3);
    run_case(k, true, 3);
  }
  cuda::set_conv_column_budget(0);
}

TEST_CASE("emu conv2d: argument errors") {
  ConvDesc d;
  d.dtype = DType::float64;
  CHECK_FALSE(cuda::supports_conv(d));
  float x = 0;
  CHECK_THROWS_AS(cuda::conv2d_fwd(d, &x, &x, nullptr, &x), kiln::Error);
  d.dtype = DType::float32;
  d.C = 3;
  d.groups = 2;
  CHECK_FALSE(cuda::supports_conv(d));
}

}  // namespace kiln
