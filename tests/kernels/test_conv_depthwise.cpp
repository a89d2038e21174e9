// The native direct depthwise convolution (kernels/cpu/native/conv_depthwise.cpp): forward,
// backward-data and backward-weights (+ bias) in float32 against ref in float64, NCHW and NHWC,
// over multipliers 1 and 2, strides, dilations, paddings (an asymmetric bottom/right one),
// kernels 3 and 5 and odd sizes, for every build of the loops this CPU runs (avx512, avx2, sve,
// baseline); the same bits at 1 and 2 threads; that the native entry points
// route depthwise there; and the conv2d op keeping a channels-last depthwise layer channels-last.
//   ctest --test-dir build -R test_conv_depthwise
#include "tests/support/testing.h"

#include <cmath>

#include "engine/dispatch.h"
#include "engine/ops/conv.h"
#include "kernels/common/conv.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/ref/conv.h"

using namespace kiln;

namespace {

std::vector<double> rand_vec(int64_t n, uint64_t seed) { return test::make_input({n}, seed).to_vector(); }

ConvDesc dw(int64_t N, int64_t C, int64_t H, int64_t W, int64_t mult, int64_t R, int64_t stride, int64_t pad,
            int64_t dil, bool bias) {
  ConvDesc d;
  d.N = N, d.C = C, d.H = H, d.W = W, d.K = C * mult, d.R = d.S = R;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad, d.dilation_h = d.dilation_w = dil;
  d.groups = C, d.has_bias = bias;
  d.set_output_size();
  return d;
}

struct Out {
  std::vector<float> y, gx, gw, gb, gw_only;
};

Out run_native(const ConvDesc& d, const std::vector<float>& x, const std::vector<float>& w,
               const std::vector<float>& b, const std::vector<float>& gy) {
  Out o;
  o.y.assign(size_t(d.dst_elems()), -7.f);
  o.gx.assign(size_t(d.src_elems()), -7.f);
  o.gw.assign(size_t(d.wei_elems()), -7.f);
  o.gb.assign(size_t(d.K), -7.f);
  o.gw_only = o.gw;
  native::conv2d_fwd(d, x.data(), w.data(), b.data(), o.y.data());
  native::conv2d_bwd_data(d, gy.data(), w.data(), o.gx.data());
  native::conv2d_bwd_weights(d, x.data(), gy.data(), o.gw.data(), d.has_bias ? o.gb.data() : nullptr);
  native::conv2d_bwd_weights(d, x.data(), gy.data(), o.gw_only.data(), nullptr);
  return o;
}

}  // namespace

TEST_CASE("native depthwise conv vs ref, NCHW and NHWC, and thread-count independent bits") {
  std::vector<ConvDesc> ds = {
      dw(2, 8, 9, 11, 1, 3, 1, 1, 1, true),    // MobileNet-like 3x3
      dw(3, 5, 10, 7, 1, 3, 2, 1, 1, true),    // stride 2, odd channels
      dw(1, 6, 8, 8, 2, 3, 1, 1, 1, false),    // multiplier 2
      dw(2, 4, 12, 9, 3, 5, 2, 2, 1, true),    // kernel 5, multiplier 3, stride 2
      dw(2, 7, 11, 10, 1, 3, 1, 2, 2, true),   // dilation 2
      dw(1, 16, 5, 6, 1, 1, 1, 0, 1, true),    // 1x1 depthwise (a per-channel scale)
      dw(2, 3, 6, 6, 1, 3, 3, 0, 1, false),    // stride 3 leaves the last rows unread
  };
  ConvDesc asym = dw(2, 4, 9, 9, 1, 3, 2, 1, 1, true);  // bottom/right padding unlike the top/left
  asym.P = 4, asym.Q = 5;
  ds.push_back(asym);
  struct Restore {
    ~Restore() { native::set_conv_depthwise_path("auto"); }
  } restore;
  for (const char* path : {"avx512", "avx2", "sve", "baseline"}) {
    if (!native::conv_depthwise_path_available(path)) continue;
    native::set_conv_depthwise_path(path);
    CAPTURE(std::string(path));
    for (const ConvDesc& base : ds)
      for (bool nhwc : {false, true}) {
        ConvDesc d = base;
        d.nhwc = nhwc;
        CAPTURE(d.str());
        REQUIRE(native::is_depthwise(d));
        REQUIRE(native::supports_conv(d));
        ConvDesc dd = d;
        dd.dtype = DType::float64;
        auto x = rand_vec(d.src_elems(), 4), w = rand_vec(d.wei_elems(), 5), b = rand_vec(d.K, 6),
             gy = rand_vec(d.dst_elems(), 7);
        std::vector<double> y(size_t(d.dst_elems())), gx(size_t(d.src_elems())), gw(size_t(d.wei_elems())),
            gb(size_t(d.K));
        ref::conv2d_fwd<double>(dd, x.data(), w.data(), d.has_bias ? b.data() : nullptr, y.data());
        ref::conv2d_bwd_data<double>(dd, gy.data(), w.data(), gx.data());
        ref::conv2d_bwd_weights<double>(dd, x.data(), gy.data(), gw.data(), gb.data());
        std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), bf(b.begin(), b.end()),
            gyf(gy.begin(), gy.end());
        const int nt = num_threads();
        set_num_threads(1);
        const Out one = run_native(d, xf, wf, bf, gyf);
        set_num_threads(2);
        const Out two = run_native(d, xf, wf, bf, gyf);
        set_num_threads(nt);
        const double tol = 1e-5 * std::max(1.0, std::sqrt(double(d.N * d.P * d.Q)));
        auto close = [tol](const std::vector<float>& a, const std::vector<double>& e, const char* what) {
          for (size_t i = 0; i < a.size(); ++i)
            if (!(std::abs(a[i] - e[i]) <= tol * (1 + std::abs(e[i])))) {
              FAIL_CHECK(what << " differs at " << i << ": " << a[i] << " vs " << e[i]);
              return;
            }
        };
        close(two.y, y, "dst");
        close(two.gx, gx, "diff_src");
        close(two.gw, gw, "diff_wei");
        close(two.gw_only, gw, "diff_wei without bias");
        if (d.has_bias) close(two.gb, gb, "diff_bias");
        CHECK(one.y == two.y);
        CHECK(one.gx == two.gx);
        CHECK(one.gw == two.gw);
        CHECK(one.gb == two.gb);
      }
  }
}

TEST_CASE("grouped but not depthwise stays on the im2col path; depthwise needs groups == C") {
  ConvDesc d = dw(1, 8, 6, 6, 1, 3, 1, 1, 1, false);
  d.groups = 4;
  CHECK_FALSE(native::is_depthwise(d));
  d.groups = 1;
  CHECK_FALSE(native::is_depthwise(d));
  d.groups = 8;
  d.dtype = DType::float64;
  CHECK_FALSE(native::is_depthwise(d));
}

TEST_CASE("conv2d op: a channels-last depthwise layer stays channels-last on native and matches NCHW") {
  BackendGuard g("native", true);
  Tensor x = test::make_input({2, 6, 7, 7}, 1, DType::float32).contiguous(MemoryFormat::channels_last);
  Tensor w = test::make_input({12, 1, 3, 3}, 2, DType::float32);
  Tensor b = test::make_input({12}, 3, DType::float32);
  Tensor y = ops::conv2d(x, w, b, 1, 1, 1, 6);
  CHECK(y.suggest_memory_format() == MemoryFormat::channels_last);
  Tensor r = ops::conv2d(x.contiguous(), w, b, 1, 1, 1, 6);
  CHECK_CLOSE(y, r, 1e-5, 1e-5);
}
