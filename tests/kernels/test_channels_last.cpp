// Channels-last (NHWC) ops: the NHWC convolution kernels of every CPU backend against the NCHW ref in
// double (forward, backward-data, backward-weights), the memory-format rules of the op (a
// channels-last input gives a channels-last output; NHWC-less kernels fall back to NCHW), and
// gradients through channels-last ops by finite differences.
//   ctest --test-dir build -R test_conv_nhwc
#include "tests/support/testing.h"

#include <cmath>
#include <functional>

#include "engine/dispatch.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "kernels/common/conv.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/ref/conv.h"

using namespace kiln;

namespace {

ConvDesc desc(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t stride, int64_t pad,
              int64_t dil, bool bias) {
  ConvDesc d;
  d.N = N, d.C = C, d.H = H, d.W = W, d.K = K, d.R = R, d.S = R;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  d.dilation_h = d.dilation_w = dil;
  d.has_bias = bias;
  d.set_output_size();
  return d;
}

std::vector<double> rand_vec(int64_t n, uint64_t seed) { return test::make_input({n}, seed).to_vector(); }

// [N, C, H, W] (NCHW order) -> the same elements in NHWC order.
std::vector<double> to_nhwc(const std::vector<double>& v, int64_t N, int64_t C, int64_t H, int64_t W) {
  std::vector<double> o(v.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) o[size_t(((n * H + h) * W + w) * C + c)] = v[size_t(((n * C + c) * H + h) * W + w)];
  return o;
}

std::vector<ConvDesc> shapes() {
  return {
      desc(2, 5, 7, 6, 4, 3, 1, 1, 1, true),    // 3x3 same
      desc(3, 4, 9, 9, 6, 3, 2, 1, 1, false),   // strided
      desc(2, 16, 5, 6, 8, 1, 1, 0, 1, true),   // 1x1 direct: one GEMM over the batch
      desc(2, 8, 9, 9, 4, 1, 2, 0, 1, true),    // 1x1 strided (ResNet's downsample)
      desc(1, 3, 12, 10, 5, 5, 3, 2, 1, true),  // kernel 5, stride 3
      desc(2, 3, 9, 9, 4, 3, 1, 2, 2, false),   // dilation 2
      desc(1, 32, 40, 40, 8, 3, 1, 1, 1, true), // more rows than one column chunk holds
  };
}

}  // namespace

TEST_CASE("NHWC kernels: ref NHWC equals ref NCHW; native NHWC matches it in float32") {
  for (ConvDesc d : shapes()) {
    CAPTURE(d.str());
    ConvDesc dd = d;
    dd.dtype = DType::float64;
    auto x = rand_vec(d.src_elems(), 1), w = rand_vec(d.wei_elems(), 2), b = rand_vec(d.K, 3);
    auto gy = rand_vec(d.dst_elems(), 4);
    std::vector<double> y(size_t(d.dst_elems())), gx(size_t(d.src_elems())), gw(size_t(d.wei_elems())), gb(size_t(d.K));
    ref::conv2d_fwd<double>(dd, x.data(), w.data(), b.data(), y.data());
    ref::conv2d_bwd_data<double>(dd, gy.data(), w.data(), gx.data());
    ref::conv2d_bwd_weights<double>(dd, x.data(), gy.data(), gw.data(), gb.data());

    // The same problem channels-last: activations permuted, weights and bias as they are.
    ConvDesc dn = dd;
    dn.nhwc = true;
    auto xn = to_nhwc(x, d.N, d.C, d.H, d.W), gyn = to_nhwc(gy, d.N, d.K, d.P, d.Q);
    std::vector<double> yn(y.size()), gxn(gx.size()), gwn(gw.size()), gbn(gb.size());
    ref::conv2d_fwd<double>(dn, xn.data(), w.data(), b.data(), yn.data());
    ref::conv2d_bwd_data<double>(dn, gyn.data(), w.data(), gxn.data());
    ref::conv2d_bwd_weights<double>(dn, xn.data(), gyn.data(), gwn.data(), gbn.data());
    const auto y_expect = to_nhwc(y, d.N, d.K, d.P, d.Q), gx_expect = to_nhwc(gx, d.N, d.C, d.H, d.W);
    CHECK(yn == y_expect);
    CHECK(gxn == gx_expect);
    for (size_t i = 0; i < gw.size(); ++i) REQUIRE(std::abs(gwn[i] - gw[i]) < 1e-12);
    for (size_t i = 0; i < gb.size(); ++i) REQUIRE(std::abs(gbn[i] - gb[i]) < 1e-12);

    ConvDesc df = d;
    df.nhwc = true;
    REQUIRE(native::supports_conv(df));
    std::vector<float> xf(xn.begin(), xn.end()), wf(w.begin(), w.end()), bf(b.begin(), b.end()),
        gyf(gyn.begin(), gyn.end());
    std::vector<float> yf(y.size()), gxf(gx.size()), gwf(gw.size()), gbf(gb.size());
    native::conv2d_fwd(df, xf.data(), wf.data(), bf.data(), yf.data());
    native::conv2d_bwd_data(df, gyf.data(), wf.data(), gxf.data());
    native::conv2d_bwd_weights(df, xf.data(), gyf.data(), gwf.data(), gbf.data());
    const double tol = 1e-4 * std::max(1.0, std::sqrt(double(d.N * d.P * d.Q)) / 16);
    auto close = [tol](const std::vector<float>& a, const std::vector<double>& e, const char* what) {
      for (size_t i = 0; i < a.size(); ++i)
        if (!(std::abs(a[i] - e[i]) <= tol * (1 + std::abs(e[i])))) {
          FAIL_CHECK(what << " differs at " << i << ": " << a[i] << " vs " << e[i]);
          return;
        }
    };
    close(yf, y_expect, "dst");
    close(gxf, gx_expect, "diff_src");
    close(gwf, gw, "diff_wei");
    close(gbf, gb, "diff_bias");
  }
}

TEST_CASE("conv2d op: a channels-last input gives a channels-last output on every CPU backend") {
  std::vector<std::string> backends = {"native"};
  if (op_table<kernel_op::conv2d_fwd>().has("onednn",
                                                                                             DeviceType::cpu))
    backends.push_back("onednn");
  for (const ConvDesc& d : shapes()) {
    for (const std::string& be : backends) {
      CAPTURE(d.str());
      CAPTURE(be);
      Tensor x = test::make_input({d.N, d.C, d.H, d.W}, 5, DType::float32);
      Tensor w = test::make_input({d.K, d.C, d.R, d.S}, 6, DType::float32);
      Tensor b = test::make_input({d.K}, 7, DType::float32);
      Tensor gy = test::make_input({d.N, d.K, d.P, d.Q}, 8, DType::float32);
      auto run = [&](const Tensor& xin, Tensor& gx, Tensor& gw, Tensor& gb) {
        const DType t = xin.dtype();
        Tensor xi = xin.detach().requires_grad_(true), wi = w.to(t).detach().requires_grad_(true),
               bi = b.to(t).detach().requires_grad_(true);
        Tensor y = ops::conv2d(xi, wi, d.has_bias ? bi : Tensor(), {d.stride_h, d.stride_w}, {d.pad_h, d.pad_w},
                               {d.dilation_h, d.dilation_w});
        y.backward(gy.to(t));
        gx = xi.grad(), gw = wi.grad();
        if (d.has_bias) gb = bi.grad();
        return y;
      };
      Tensor gx0, gw0, gb0, gx1, gw1, gb1;
      Tensor y0, y1;
      {
        BackendGuard g("ref", true);
        y0 = run(x.to(DType::float64), gx0, gw0, gb0);
      }
      {
        BackendGuard g(be);  // not strict: copies and reductions have no oneDNN kernel
        y1 = run(x.contiguous(MemoryFormat::channels_last), gx1, gw1, gb1);
      }
      CHECK(y1.suggest_memory_format() == MemoryFormat::channels_last);
      CHECK(gx1.suggest_memory_format() == MemoryFormat::channels_last);
      const double tol = 2e-4 * std::max(1.0, std::sqrt(double(d.N * d.P * d.Q)) / 16);
      CHECK_CLOSE(y1, y0, tol, tol);
      CHECK_CLOSE(gx1, gx0, tol, tol);
      CHECK_CLOSE(gw1, gw0, tol, tol);
      if (d.has_bias) CHECK_CLOSE(gb1, gb0, tol, tol);
    }
  }
}

TEST_CASE("conv2d op: grouped channels-last convolution falls back to NCHW kernels and stays correct") {
  BackendGuard g("native", true);
  Tensor x = test::make_input({2, 4, 6, 6}, 1, DType::float32).contiguous(MemoryFormat::channels_last);
  Tensor w = test::make_input({6, 2, 3, 3}, 2, DType::float32);
  Tensor y = ops::conv2d(x, w, Tensor(), 1, 1, 1, 2);
  CHECK(y.suggest_memory_format() == MemoryFormat::contiguous);
  Tensor ref = ops::conv2d(x.contiguous(), w, Tensor(), 1, 1, 1, 2);
  CHECK_CLOSE(y, ref, 0, 0);
}

TEST_CASE("channels-last gradients by finite differences: conv, bias add and ReLU keep the layout") {
  BackendGuard g("ref", true);
  Tensor x = test::make_input({2, 3, 5, 5}, 11).contiguous(MemoryFormat::channels_last).requires_grad_(true);
  Tensor w = test::make_input({4, 3, 3, 3}, 12).requires_grad_(true);
  Tensor b = test::make_input({4}, 13).requires_grad_(true);
  Tensor y = ops::conv2d(x, w, b, 1, 1);
  CHECK(y.suggest_memory_format() == MemoryFormat::channels_last);
  Tensor r = ops::relu(y + y);
  CHECK(r.suggest_memory_format() == MemoryFormat::channels_last);
  // gradcheck perturbs copies of the inputs: keep them channels-last inside.
  CHECK_GRAD(
      [](const std::vector<Tensor>& in) {
        Tensor xc = in[0].contiguous(MemoryFormat::channels_last);
        return ops::relu(ops::conv2d(xc, in[1], in[2], 1, 1) * 2.0);
      },
      (std::vector<Tensor>{x, w, b}));
}

// --- batch norm, pooling and cat on channels-last inputs

namespace {

// Runs `f` on a channels-last copy of x under `backend` and on the NCHW float64 copy under ref;
// checks the output keeps the layout and that outputs and input gradients agree.
void check_cl_op(const std::string what, const std::string& backend, const Tensor& x0,
                 const std::function<Tensor(const Tensor&)>& f, double tol) {
  CAPTURE(what);
  CAPTURE(backend);
  Tensor gy;
  Tensor x_ref = x0.to(DType::float64).detach().requires_grad_(true);
  Tensor y_ref;
  {
    BackendGuard g("ref", true);
    y_ref = f(x_ref);
    gy = test::make_input(y_ref.sizes(), 99);
    y_ref.backward(gy);
  }
  Tensor x = x0.contiguous(MemoryFormat::channels_last).detach().requires_grad_(true);
  Tensor y;
  {
    BackendGuard g(backend);
    y = f(x);
    CHECK(y.suggest_memory_format() == MemoryFormat::channels_last);
    y.backward(gy.to(x.dtype()).contiguous(MemoryFormat::channels_last));
  }
  CHECK(x.grad().suggest_memory_format() == MemoryFormat::channels_last);
  CHECK_CLOSE(y, y_ref, tol, tol);
  CHECK_CLOSE(x.grad(), x_ref.grad(), tol, tol);
}

std::vector<std::string> cpu_backends() {
  std::vector<std::string> b = {"native", "ref"};
  if (op_table<kernel_op::conv2d_fwd>().has("onednn", DeviceType::cpu))
    b.push_back("onednn");
  return b;
}

}  // namespace

TEST_CASE("channels-last batch norm (train and eval), pooling and cat agree with NCHW ref") {
  const Tensor x = test::make_input({3, 5, 7, 6}, 21, DType::float32);
  const Tensor w = test::make_input({5}, 22, DType::float32), b = test::make_input({5}, 23, DType::float32);
  for (const std::string& be : cpu_backends()) {
    const DType t = be == "ref" ? DType::float64 : DType::float32;
    const double tol = t == DType::float64 ? 1e-10 : 2e-5;
    Tensor xin = x.to(t);
    for (bool training : {true, false}) {
      CAPTURE(training);
      check_cl_op("batch_norm", be, xin, [&](const Tensor& v) {
        Tensor rm = zeros({5}, v.dtype()) + 0.1, rv = ones({5}, v.dtype()) * 1.5;
        return ops::batch_norm(v, w.to(v.dtype()), b.to(v.dtype()), rm, rv, training);
      }, tol);
    }
    check_cl_op("max_pool 3x3 s2 p1", be, xin, [](const Tensor& v) { return ops::max_pool2d(v, {3, 3}, {2, 2}, {1, 1}); }, tol);
    check_cl_op("max_pool 2x2 ceil", be, xin, [](const Tensor& v) { return ops::max_pool2d(v, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true); }, tol);
    check_cl_op("max_pool 2x3 dilated", be, xin, [](const Tensor& v) { return ops::max_pool2d(v, {2, 3}, {1, 2}, {1, 1}, {2, 1}); }, tol);
    check_cl_op("avg_pool 3x3 s2 p1", be, xin, [](const Tensor& v) { return ops::avg_pool2d(v, {3, 3}, {2, 2}, {1, 1}); }, tol);
    check_cl_op("avg_pool exclude pad ceil", be, xin, [](const Tensor& v) { return ops::avg_pool2d(v, {3, 2}, {1, 1}, {1, 1}, true, false); }, tol);
    check_cl_op("avg_pool divisor", be, xin, [](const Tensor& v) { return ops::avg_pool2d(v, {2, 2}, {2, 2}, {0, 0}, false, true, 3); },
                tol);
    check_cl_op("cat", be, xin, [](const Tensor& v) { return ops::cat({ops::relu(v), v * 2.0, v}, 1); }, tol);
  }
}

TEST_CASE("channels-last max pooling keeps PyTorch's tie, -inf and NaN rules") {
  // One image, 2 channels, 2x2 input pooled to 1x1: channel 0 ties (first tap wins), channel 1
  // holds a NaN at tap 2 (NaN wins, its index reported).
  const double nan = std::nan("");
  Tensor x = from_vector(std::vector<double>{3, 3, 1, 2, 1, 2, nan, 0}, {1, 2, 2, 2});
  for (const std::string& be : {std::string("native"), std::string("ref")}) {
    BackendGuard g(be, true);
    ops::ValuesIndices r = ops::max_pool2d_with_indices(x.contiguous(MemoryFormat::channels_last), {2, 2});
    CHECK(r.indices.to_vector() == std::vector<double>{0, 2});
    auto v = r.values.to_vector();
    CHECK(v[0] == 3);
    CHECK(std::isnan(v[1]));
  }
}
