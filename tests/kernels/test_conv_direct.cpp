// The native direct channels-last convolution (kernels/cpu/native/conv_direct.cpp): forward
// (with bias, ReLU and the residual post-op), backward-weights and backward-data in float32 against ref in
// float64, for every register tile this CPU runs (avx512, avx2): kernels 1 to 11, strides,
// dilations, paddings (one larger than the kernel reach, an asymmetric bottom/right one), channel
// counts off the tile's panel width, rows longer and shorter than a tile, batch 1; the same bits
// at 1 and 2 threads; and which shapes the entry points send to it.
//   ctest --test-dir build -R test_conv_direct
#include "tests/support/testing.h"

#include <algorithm>
#include <cmath>

#include "kernels/common/conv.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/ref/conv.h"

using namespace kiln;

namespace {

std::vector<double> rand_vec(int64_t n, uint64_t seed) { return test::make_input({n}, seed).to_vector(); }

ConvDesc conv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S, int64_t stride,
              int64_t pad, int64_t dil, bool bias) {
  ConvDesc d;
  d.N = N, d.C = C, d.H = H, d.W = W, d.K = K, d.R = R, d.S = S;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad, d.dilation_h = d.dilation_w = dil;
  d.has_bias = bias, d.nhwc = true;
  d.set_output_size();
  return d;
}

struct Restore {
  ~Restore() {
    native::set_conv_direct_path("auto");
    native::reset_conv_direct_tuning();
  }
};

void check_close(const std::vector<float>& a, const std::vector<double>& e, double tol, const std::string& what) {
  REQUIRE(a.size() == e.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - e[i]) <= tol * (1 + std::abs(e[i])))) {
      FAIL_CHECK(what << " differs at " << i << ": " << a[i] << " vs " << e[i]);
      return;
    }
}

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace

TEST_CASE("native direct conv vs ref: forward (bias, ReLU, residual), backward-weights, backward-data") {
  std::vector<ConvDesc> ds = {
      conv(2, 8, 9, 11, 16, 3, 3, 1, 1, 1, true),     // 3x3, one panel
      conv(1, 5, 7, 30, 40, 3, 3, 1, 1, 1, false),    // 30 pixels a row (3 tiles), K off the panel width
      conv(2, 3, 23, 23, 20, 11, 11, 4, 2, 1, true),  // AlexNet's conv1 form: C = 3, stride 4
      conv(2, 3, 17, 16, 8, 7, 7, 2, 3, 1, true),     // ResNet's conv1 form
      conv(1, 12, 8, 9, 33, 5, 5, 1, 2, 1, true),     // 5x5
      conv(2, 6, 11, 10, 17, 3, 3, 1, 2, 2, true),    // dilation 2 (segments per tap)
      conv(1, 7, 9, 9, 9, 3, 1, 1, 0, 1, false),      // 3x1: padding in h only, none in w
      conv(2, 16, 10, 10, 24, 1, 1, 2, 0, 1, true),   // 1x1 stride 2 (ResNet's downsample)
      conv(1, 4, 6, 6, 5, 3, 3, 1, 0, 1, true),       // unpadded: read in place
      conv(1, 4, 5, 5, 6, 3, 3, 1, 3, 1, false),      // padding beyond the kernel's reach
      conv(3, 9, 1, 13, 48, 1, 3, 1, 1, 1, true),     // a single row
      conv(2, 2, 3, 3, 3, 3, 3, 2, 1, 1, true),       // tiny
      conv(2, 5, 12, 11, 19, 3, 3, 2, 1, 1, true),    // ResNet's strided 3x3 (backward-data by phases)
      conv(1, 4, 9, 10, 6, 5, 3, 3, 2, 1, false),     // stride 3, 5x3
      conv(1, 3, 7, 7, 4, 2, 2, 2, 0, 1, true),       // 2x2 stride 2: one tap per phase
      conv(2, 6, 13, 13, 8, 3, 3, 2, 2, 2, true),     // strided and dilated: backward-data on col2im
      conv(8, 6, 5, 5, 10, 3, 3, 1, 1, 1, true),      // small images: several per item and pass
      conv(9, 4, 3, 4, 7, 3, 1, 1, 1, 1, false),      // several per item, batch not a multiple
      conv(2, 512, 4, 5, 6, 3, 3, 1, 1, 1, true),     // C a multiple of 512: copied with spaced pixels
      conv(1, 512, 4, 4, 3, 1, 1, 2, 0, 1, false),    // the same where nothing pads
  };
  ConvDesc asym = conv(2, 4, 9, 9, 6, 3, 3, 2, 1, 1, true);  // bottom/right padding unlike the top/left
  asym.P = 4, asym.Q = 5;
  ds.push_back(asym);
  ConvDesc asym1 = conv(1, 5, 8, 8, 7, 3, 3, 1, 1, 1, true);  // stride 1, one fewer output row and column
  asym1.P = 7, asym1.Q = 7;
  ds.push_back(asym1);
  Restore restore;
  int paths = 0;
  // Blockings: as tuned; a window per item (no whole-batch copy); input channels in chunks of
  // one and two (panel_bytes below one channel's panel); one pixel per item.
  const native::ConvDirectTuning tunings[] = {native::conv_direct_tuning(), {0, 0, 192}, {int64_t(1) << 30, 1, 192},
                                              {int64_t(1) << 30, 9 * 32 * 4 * 2, 1}};
  for (const char* path : {"avx512", "avx2", "off"}) {  // off: the im2col path, residual included
    if (!native::conv_direct_path_available(path)) continue;
    paths += std::string(path) != "off";
    native::set_conv_direct_path(path);
    CHECK(std::string(native::conv_direct_path()) == path);
    for (const native::ConvDirectTuning& tuning : tunings)
    for (const ConvDesc& base : ds)
      for (int post = 0; post < 3; ++post) {  // 0: plain, 1: ReLU, 2: residual + ReLU
        ConvDesc d = base;
        d.relu = post >= 1;
        d.sum = post == 2;
        CAPTURE(std::string(path));
        CAPTURE(d.str());
        CAPTURE(tuning.batch_bytes);
        CAPTURE(tuning.panel_bytes);
        CAPTURE(tuning.item_pixels);
        native::set_conv_direct_tuning(tuning);
        const bool gemm = d.R == 1 && d.S == 1 && d.stride_h == 1 && d.pad_h == 0;
        REQUIRE(native::conv_direct_fwd_applies(d) == (!gemm && std::string(path) != "off"));
        REQUIRE(native::supports_conv(d));
        ConvDesc dd = d;
        dd.dtype = DType::float64;
        dd.relu = dd.sum = false;
        const auto x = rand_vec(d.src_elems(), 4), w = rand_vec(d.wei_elems(), 5), b = rand_vec(d.K, 6),
                   res = rand_vec(d.dst_elems(), 7), gy = rand_vec(d.dst_elems(), 8);
        std::vector<double> y(size_t(d.dst_elems())), gx(size_t(d.src_elems()));
        ref::conv2d_fwd<double>(dd, x.data(), w.data(), d.has_bias ? b.data() : nullptr, y.data());
        for (size_t i = 0; i < y.size(); ++i) {
          if (d.sum) y[i] += res[i];
          if (d.relu) y[i] = std::max(y[i], 0.0);
        }
        ref::conv2d_bwd_data<double>(dd, gy.data(), w.data(), gx.data());
        std::vector<double> gw(size_t(d.wei_elems())), gb(size_t(d.K));
        ref::conv2d_bwd_weights<double>(dd, x.data(), gy.data(), gw.data(), gb.data());
        const auto xf = to_float(x), wf = to_float(w), bf = to_float(b), gyf = to_float(gy);
        auto forward = [&] {
          std::vector<float> out = d.sum ? to_float(res) : std::vector<float>(size_t(d.dst_elems()), -7.f);
          native::conv2d_fwd(d, xf.data(), wf.data(), bf.data(), out.data());
          return out;
        };
        auto backward = [&] {
          std::vector<float> out(size_t(d.src_elems()), -7.f);
          native::conv2d_bwd_data(d, gyf.data(), wf.data(), out.data());
          return out;
        };
        auto weights = [&] {
          std::vector<float> out(size_t(d.wei_elems() + d.K), -7.f);
          native::conv2d_bwd_weights(d, xf.data(), gyf.data(), out.data(),
                                     d.has_bias ? out.data() + d.wei_elems() : nullptr);
          return out;
        };
        const int nt = num_threads();
        set_num_threads(1);
        const auto y1 = forward(), gx1 = backward(), gw1 = weights();
        set_num_threads(2);
        const auto y2 = forward(), gx2 = backward(), gw2 = weights();
        set_num_threads(nt);
        const double tol = 2e-6 * std::sqrt(double(d.C * d.R * d.S + d.K * d.R * d.S));
        check_close(y2, y, tol, "dst");
        check_close(gx2, gx, tol, "diff_src");
        const double wtol = 2e-6 * std::sqrt(double(d.N * d.P * d.Q));
        check_close(std::vector<float>(gw2.begin(), gw2.begin() + d.wei_elems()), gw, wtol, "diff_wei");
        if (d.has_bias) check_close(std::vector<float>(gw2.begin() + d.wei_elems(), gw2.end()), gb, wtol, "diff_bias");
        CHECK(gw1 == gw2);
        CHECK(y1 == y2);
        CHECK(gx1 == gx2);
      }
  }
  // Without AVX-512 or AVX2 (or under KILN_CPU_ISA=portable) there is no tile: only the im2col
  // path ran above.
  if (paths == 0) CHECK(std::string(native::conv_direct_path()) == "off");
}

TEST_CASE("native direct conv: which shapes take it") {
  Restore restore;
  native::set_conv_direct_path("auto");
  ConvDesc d = conv(2, 8, 9, 9, 16, 3, 3, 1, 1, 1, true);
  if (!native::conv_direct_path_available("avx512") && !native::conv_direct_path_available("avx2")) {
    CHECK(std::string(native::conv_direct_path()) == "off");
    CHECK_FALSE(native::conv_direct_fwd_applies(d));
    return;
  }
  CHECK(native::conv_direct_fwd_applies(d));
  CHECK(native::conv_direct_bwd_data_applies(d));
  ConvDesc s2 = conv(2, 8, 9, 9, 16, 3, 3, 2, 1, 1, true);
  CHECK(native::conv_direct_fwd_applies(s2));
  CHECK(native::conv_direct_bwd_data_applies(s2));  // by phases
  ConvDesc s2d = conv(2, 8, 13, 13, 16, 3, 3, 2, 2, 2, true);
  CHECK_FALSE(native::conv_direct_bwd_data_applies(s2d));  // strided and dilated: col2im path
  ConvDesc one = conv(2, 8, 9, 9, 16, 1, 1, 1, 0, 1, true);
  CHECK_FALSE(native::conv_direct_fwd_applies(one));  // a plain GEMM
  ConvDesc nchw = d;
  nchw.nhwc = false;
  CHECK_FALSE(native::conv_direct_fwd_applies(nchw));
  nchw.sum = true;
  CHECK_FALSE(native::supports_conv(nchw));  // the residual post-op is channels-last only
  ConvDesc grouped = conv(2, 8, 9, 9, 16, 3, 3, 1, 1, 1, true);
  grouped.groups = 2;
  CHECK_FALSE(native::conv_direct_fwd_applies(grouped));
  ConvDesc bf = d;
  bf.dtype = DType::bfloat16;
  const bool bf16_tile = native::cpu_isa().avx512_bf16 && native::cpu_isa().avx512bw && native::cpu_isa().avx512vl &&
                         native::conv_direct_path_available("avx512");
  CHECK(native::conv_direct_bf16_applies(bf) == bf16_tile);
  ConvDesc odd = bf;
  odd.C = 3;  // runs as 4 channels, the fourth zero
  CHECK(native::conv_direct_bf16_applies(odd) == bf16_tile);
  odd.K = 5;  // backward-data's channel pairs are dy's: K even
  CHECK_FALSE(native::conv_direct_bwd_data_bf16_applies(odd));
  native::set_conv_direct_path("off");
  CHECK_FALSE(native::conv_direct_fwd_applies(d));
  CHECK_FALSE(native::conv_direct_bf16_applies(bf));
  CHECK(std::string(native::conv_direct_path()) == "off");
  CHECK_THROWS_KILN(native::set_conv_direct_path("sse9"), "unknown path");
  CHECK_THROWS_KILN(native::set_conv_direct_tuning({-1, 0, 192}), "set_conv_direct_tuning");
  CHECK_THROWS_KILN(native::set_conv_direct_tuning({0, 0, 0}), "item_pixels at least 1");
}

TEST_CASE("native direct conv: packed weights kept under weights_key, and dropped when the weights change") {
  Restore restore;
  native::set_conv_direct_path("auto");
  ConvDesc d = conv(2, 8, 7, 7, 20, 3, 3, 1, 1, 1, true);
  if (!native::conv_direct_fwd_applies(d)) {
    CHECK(std::string(native::conv_direct_path()) == "off");
    return;
  }
  const auto x = to_float(rand_vec(d.src_elems(), 1)), b = to_float(rand_vec(d.K, 3));
  auto w = to_float(rand_vec(d.wei_elems(), 2));
  auto forward = [&](uint64_t key) {
    ConvDesc k = d;
    k.weights_key = key;
    std::vector<float> y(size_t(d.dst_elems()));
    native::conv2d_fwd(k, x.data(), w.data(), b.data(), y.data());
    return y;
  };
  const auto want = forward(0);
  const uint64_t key = 0x5eed0001;
  for (int call = 0; call < 3; ++call) CHECK(forward(key) == want);  // packed, admitted, then kept
  // Written behind the key's back (a caller writing through data_ptr): the probes see it.
  for (float& v : w) v *= -0.5f;
  const auto changed = forward(0);
  CHECK(changed != want);
  CHECK(forward(key) == changed);
  CHECK(forward(key) == changed);
  // A new key for new values; the old key again after its values came back.
  for (float& v : w) v *= -2.f;
  CHECK(forward(key + 1) == want);
  CHECK(forward(key) == want);
}
