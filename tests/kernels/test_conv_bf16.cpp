// Native bfloat16 convolution (kernels/cpu/native/conv_bf16.h: channels-last, groups == 1, im2col
// + the bfloat16 GEMM): forward (bias, fused ReLU, residual post-op), backward-data and
// backward-weights (+ the float32 bias gradient) against the reference in double on the same
// bfloat16 inputs, on every bfloat16 GEMM path this CPU has. Odd C*R*S (the last k pair half
// zero), 1x1 with and without im2col, strides, padding, dilation, batch 1, k blocks and im2col
// chunks crossed.
//   ctest --test-dir build -R kernels.test_conv_bf16
#include "tests/support/testing.h"

#include <cmath>
#include <random>

#include "engine/backend_preference.h"
#include "engine/ops/conv.h"
#include "kernels/common/conv.h"
#include "kernels/common/half.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/native/gemm_bf16.h"
#include "kernels/cpu/ref/conv.h"

using namespace kiln;
using native::Bf16GemmPath;

namespace {

struct PathGuard {
  Bf16GemmPath prev = native::bf16_gemm_path();
  int threads = num_threads();
  ~PathGuard() {
    native::set_bf16_gemm_path(prev);
    set_num_threads(threads);
  }
};

std::vector<BFloat16> make(int64_t n, std::mt19937& rng) {
  std::vector<BFloat16> v(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : v) x = BFloat16(u(rng));
  return v;
}

std::vector<double> to_double(const std::vector<BFloat16>& v, bool absolute = false) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = absolute ? std::fabs(double(float(v[i]))) : double(float(v[i]));
  return out;
}

// got (bfloat16 or float32 values) against want, with `scale` the same pass on absolute values:
// float32 sums of `terms` products are within (terms + 4) 2^-24 scale; a bfloat16 result is then
// rounded once (half an ulp: 2^-8 relative at worst).
template <class T>
void check_close(const char* what, const std::vector<T>& got, const std::vector<double>& want,
                 const std::vector<double>& scale, int64_t terms, bool rounded) {
  CAPTURE(what);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double facc = double(terms + 4) * std::ldexp(1.0, -24) * scale[i];
    const double tol = facc + (rounded ? std::ldexp(1.0, -8) * (std::fabs(want[i]) + facc) : 0.0);
    const double g = double(float(got[i]));
    if (!(std::fabs(g - want[i]) <= tol) && ++bad <= 3)
      FAIL_CHECK(what << " at " << i << ": got " << g << " want " << want[i] << " tol " << tol);
  }
  CHECK(bad == 0);
}

void check_problem(const ConvDesc& d) {
  CAPTURE(d.str());
  REQUIRE(native::supports_conv(d));
  std::mt19937 rng(uint32_t(d.src_elems() * 31 + d.K));
  const auto src = make(d.src_elems(), rng), wei = make(d.wei_elems(), rng), dd = make(d.dst_elems(), rng);
  std::vector<float> bias(static_cast<size_t>(d.K));
  for (float& b : bias) b = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  std::vector<double> b64(bias.begin(), bias.end()), babs(bias.size());
  for (size_t i = 0; i < bias.size(); ++i) babs[i] = std::fabs(b64[i]);
  ConvDesc d64 = d;
  d64.dtype = DType::float64;
  const auto s64 = to_double(src), w64 = to_double(wei), dd64 = to_double(dd);
  const auto sa = to_double(src, true), wa = to_double(wei, true), dda = to_double(dd, true);

  // Forward: C*R*S products (+ the bias).
  std::vector<BFloat16> dst(static_cast<size_t>(d.dst_elems()));
  native::conv2d_fwd(d, src.data(), wei.data(), d.has_bias ? bias.data() : nullptr, dst.data());
  std::vector<double> want(dst.size()), scale(dst.size());
  ref::conv2d_fwd<double>(d64, s64.data(), w64.data(), d.has_bias ? b64.data() : nullptr, want.data());
  ConvDesc dabs = d64;
  dabs.relu = false;
  ref::conv2d_fwd<double>(dabs, sa.data(), wa.data(), d.has_bias ? babs.data() : nullptr, scale.data());
  check_close("forward", dst, want, scale, d.C * d.R * d.S + 1, true);

  // The residual post-op: dst holds a bfloat16 residual on entry, added before the ReLU.
  ConvDesc ds_ = d;
  ds_.sum = true;
  REQUIRE(native::supports_conv(ds_));
  const auto res = make(d.dst_elems(), rng);
  std::vector<BFloat16> dsum = res;
  native::conv2d_fwd(ds_, src.data(), wei.data(), d.has_bias ? bias.data() : nullptr, dsum.data());
  ConvDesc ds64 = d64;
  ds64.sum = true;
  std::vector<double> want_sum = to_double(res), scale_sum = to_double(res, true);
  ref::conv2d_fwd<double>(ds64, s64.data(), w64.data(), d.has_bias ? b64.data() : nullptr, want_sum.data());
  ConvDesc dsabs = ds64;
  dsabs.relu = false;
  ref::conv2d_fwd<double>(dsabs, sa.data(), wa.data(), d.has_bias ? babs.data() : nullptr, scale_sum.data());
  check_close("forward + residual", dsum, want_sum, scale_sum, d.C * d.R * d.S + 2, true);

  // Backward-data: K*R*S products per input element.
  ConvDesc db = d;
  db.relu = false;
  ConvDesc db64 = d64;
  db64.relu = false;
  std::vector<BFloat16> ds(static_cast<size_t>(d.src_elems()));
  native::conv2d_bwd_data(db, dd.data(), wei.data(), ds.data());
  std::vector<double> ds_want(ds.size()), ds_scale(ds.size());
  ref::conv2d_bwd_data<double>(db64, dd64.data(), w64.data(), ds_want.data());
  ref::conv2d_bwd_data<double>(db64, dda.data(), wa.data(), ds_scale.data());
  check_close("backward-data", ds, ds_want, ds_scale, d.K * d.R * d.S, true);

  // Backward-weights: N*P*Q products per weight; the bias gradient float32 sums of N*P*Q terms.
  std::vector<BFloat16> dw(static_cast<size_t>(d.wei_elems()));
  std::vector<float> dbias(static_cast<size_t>(d.K));
  native::conv2d_bwd_weights(db, src.data(), dd.data(), dw.data(), d.has_bias ? dbias.data() : nullptr);
  std::vector<double> dw_want(dw.size()), dw_scale(dw.size()), dbias_want(dbias.size()), dbias_scale(dbias.size());
  ref::conv2d_bwd_weights<double>(db64, s64.data(), dd64.data(), dw_want.data(), dbias_want.data());
  ref::conv2d_bwd_weights<double>(db64, sa.data(), dda.data(), dw_scale.data(), dbias_scale.data());
  const int64_t npq = d.N * d.P * d.Q;
  check_close("backward-weights", dw, dw_want, dw_scale, npq, true);
  if (d.has_bias) check_close("bias gradient", dbias, dbias_want, dbias_scale, npq, false);
  // Only one of the two wanted.
  if (d.has_bias) {
    std::vector<float> dbias2(static_cast<size_t>(d.K), -7.f);
    native::conv2d_bwd_weights(db, src.data(), dd.data(), nullptr, dbias2.data());
    CHECK(dbias2 == dbias);
  }
  std::vector<BFloat16> dw2(dw.size());
  native::conv2d_bwd_weights(db, src.data(), dd.data(), dw2.data(), nullptr);
  for (size_t i = 0; i < dw.size(); ++i) REQUIRE(dw2[i].bits == dw[i].bits);
}

}  // namespace

TEST_CASE("native bf16 convolution takes channels-last, groups == 1 only") {
  ConvDesc d = parse_conv_problem("mb2ic4ih9oc6kh3ph1", DType::bfloat16, true);
  d.nhwc = true;
  CHECK(native::supports_conv(d));
  d.nhwc = false;
  CHECK_FALSE(native::supports_conv(d));  // NCHW bfloat16: the op layer converts to float32
  ConvDesc g = parse_conv_problem("g2mb2ic4ih9oc6kh3ph1", DType::bfloat16, true);
  g.nhwc = true;
  CHECK_FALSE(native::supports_conv(g));
  ConvDesc h = parse_conv_problem("mb2ic4ih9oc6kh3ph1", DType::float16, true);
  h.nhwc = true;
  CHECK_FALSE(native::supports_conv(h));
}

TEST_CASE("native bf16 convolution matches the reference, three passes, every bf16 GEMM path") {
  PathGuard guard;
  const char* const problems[] = {
      "mb2ic3ih9iw11oc5kh3kw3ph1pw1",        // odd sizes, C*R*S = 27 (odd k)
      "mb1ic4ih7oc6kh1",                     // batch 1, 1x1: one GEMM, no im2col
      "mb2ic37ih6oc13kh1",                   // 1x1 with odd C
      "mb2ic5ih8oc7kh1sh2",                  // 1x1 stride 2: im2col
      "mb2ic3ih9iw11oc5kh5kw3sh2sw2ph2pw1",  // non-square kernel, stride 2
      "mb2ic4ih10oc6kh3sh2ph1",              // even input, stride 2
      "mb2ic3ih11oc5kh3ph2dh2",              // dilation 2
      "mb1ic16ih5oc16kh3ph1",                // 16 channels
      "mb3ic33ih12oc40kh3ph1",               // k = 297, edge tiles in m and n
      "mb1ic64ih14oc70kh3ph1",               // k = 576: two k blocks
      "mb2ic1024ih3iw4oc6kh3ph1",            // C a multiple of 1024: the direct tile's spaced copy
  };
  std::vector<Bf16GemmPath> paths;
  for (Bf16GemmPath p : {Bf16GemmPath::avx512_bf16, Bf16GemmPath::widen})
    if (native::bf16_gemm_path_available(p)) paths.push_back(p);
  // The direct vdpbf16ps tile where it applies (AVX512_BF16, C even), and the im2col path.
  struct DirectGuard {
    ~DirectGuard() { native::set_conv_direct_path("auto"); }
  } direct_guard;
  for (const char* direct : {"auto", "off"})
  for (Bf16GemmPath p : paths) {
    native::set_conv_direct_path(direct);
    CAPTURE(std::string(direct));
    native::set_bf16_gemm_path(p);
    const std::string path_name = native::bf16_gemm_path_name(p);
    CAPTURE(path_name);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      CAPTURE(threads);
      for (const char* s : problems)
        for (bool bias : {true, false})
          for (bool relu : {false, true}) {
            if (relu && !bias) continue;
            ConvDesc d = parse_conv_problem(s, DType::bfloat16, bias);
            d.nhwc = true;
            d.relu = relu;
            check_problem(d);
          }
    }
  }
}

TEST_CASE("native bf16 convolution: im2col chunks crossed") {
  PathGuard guard;
  // M * R*S*C = 4096 * 576 columns of bfloat16: more than one 2M-element chunk.
  ConvDesc d = parse_conv_problem("mb4ic64ih32oc8kh3ph1", DType::bfloat16, true);
  d.nhwc = true;
  check_problem(d);
}

TEST_CASE("conv2d op on native: bfloat16 channels-last forward and backward near float64") {
  // The op layer hands bfloat16 channels-last problems to the native kernels as they are (bias
  // and its gradient float32 inside), and the result stays bfloat16 and channels-last.
  for (const char* s : {"mb2ic5ih9oc7kh3ph1", "mb1ic8ih6oc4kh1"}) {
    CAPTURE(s);
    const ConvDesc d = parse_conv_problem(s, DType::float64, true);
    Tensor x = test::make_input({d.N, d.C, d.H, d.W}, 11).to(DType::bfloat16);
    Tensor w = test::make_input({d.K, d.C, d.R, d.S}, 12).to(DType::bfloat16);
    Tensor b = test::make_input({d.K}, 13).to(DType::bfloat16);
    Tensor gy = test::make_input({d.N, d.K, d.P, d.Q}, 14).to(DType::bfloat16);
    auto run = [&](DType t, MemoryFormat f, Tensor& gx, Tensor& gw, Tensor& gb) {
      Tensor xi = x.to(t).contiguous(f).detach().requires_grad_(true);
      Tensor wi = w.to(t).detach().requires_grad_(true), bi = b.to(t).detach().requires_grad_(true);
      Tensor y = ops::conv2d(xi, wi, bi, {d.stride_h, d.stride_w}, {d.pad_h, d.pad_w});
      y.backward(gy.to(t).contiguous(f));
      gx = xi.grad(), gw = wi.grad(), gb = bi.grad();
      return y;
    };
    Tensor gx0, gw0, gb0, gx1, gw1, gb1, y0, y1;
    {
      BackendGuard g("ref", true);
      y0 = run(DType::float64, MemoryFormat::contiguous, gx0, gw0, gb0);
    }
    {
      BackendGuard g("native");
      y1 = run(DType::bfloat16, MemoryFormat::channels_last, gx1, gw1, gb1);
    }
    CHECK(y1.dtype() == DType::bfloat16);
    CHECK(y1.suggest_memory_format() == MemoryFormat::channels_last);
    CHECK(gw1.dtype() == DType::bfloat16);
    // Inputs are the same bfloat16 values; sums of <= 72 products of magnitude < 1 in float32,
    // each result rounded to bfloat16 once (half an ulp: 2^-8 relative), plus the gradient's own
    // rounding on the way in.
    CHECK_CLOSE(y1.to(DType::float64), y0, 1e-2, 1e-2);
    CHECK_CLOSE(gx1.to(DType::float64), gx0, 1e-2, 1e-2);
    CHECK_CLOSE(gw1.to(DType::float64), gw0, 1e-2, 2e-2);
    CHECK_CLOSE(gb1.to(DType::float64), gb0, 1e-2, 2e-2);
  }
}
