// The cudnn backend on a real GPU, what the oracle (tests/oracle, every cudnn candidate against
// ref in float64 where a device exists) does not cover: cuDNN's timed algorithm selection, TF32,
// half-precision GEMM and convolution on tensor cores, what cuDNN declines, errors that name the
// call, the workspace limit and a non-default stream. Skipped without a device (tests/gpu/main.cpp).
// Tolerances, with their reasons:
//  - float32: float32 accumulation in an order cuDNN picks (FFT/Winograd algorithms transform
//    the data first): rtol 1e-4 plus 2e-5 sqrt(reduction length) absolute (convolution), GEMM
//    1e-5 relative and 1e-5 k absolute (cuBLAS without TF32 sums plain products).
//  - TF32: inputs rounded to 10 mantissa bits: rtol/atol 1e-2 relative to the reduction size.
//  - float16: inputs exact (rounded before the ref), float32 accumulation, output rounded to 11
//    bits (rel 4.9e-4), split reductions may round partial sums: rtol 1e-2.
//  - bfloat16: as float16 with 8 mantissa bits (rel 3.9e-3): rtol 3e-2.
//   ctest --test-dir build -L gpu -R cudnn --output-on-failure
#include <doctest/doctest.h>

#if defined(KILN_HAVE_CUDNN)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/cpu/ref/conv.h"
#include "kernels/cpu/ref/gemm.h"
#include "kernels/cuda/cudnn/conv.h"
#include "kernels/cuda/cudnn/gemm.h"
#include "kernels/cuda/cudnn/handles.h"
#include "kernels/cuda/cudnn/norm.h"
#include "kernels/cuda/cudnn/pool.h"
#include "kernels/cuda/runtime.h"
#include "tests/support/testing.h"

using namespace kiln;

namespace {

std::vector<double> random_values(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(gen);
  return v;
}

double round_to(DType t, double v) {
  if (t == DType::float16) return double(float(Half(float(v))));
  if (t == DType::bfloat16) return double(float(BFloat16(float(v))));
  return double(float(v));
}

// A device buffer of n elements of dtype t; upload() rounds the host values to t in place (so
// the ref sees exactly what the GPU sees), download() reads them back as double.
struct DevBuf {
  void* p = nullptr;
  size_t n = 0;
  DType t = DType::float32;
  DevBuf(size_t count, DType type) : n(count), t(type) {
    REQUIRE(cudaMalloc(&p, std::max<size_t>(1, n * element_size(t))) == cudaSuccess);
    REQUIRE(cudaMemset(p, 0xff, std::max<size_t>(1, n * element_size(t))) == cudaSuccess);  // NaN garbage
  }
  DevBuf(std::vector<double>& host, DType type) : DevBuf(host.size(), type) { upload(host); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void upload(std::vector<double>& host) {
    REQUIRE(host.size() == n);
    std::vector<char> bytes(n * element_size(t));
    for (size_t i = 0; i < n; ++i) {
      host[i] = round_to(t, host[i]);
      if (t == DType::float32)
        reinterpret_cast<float*>(bytes.data())[i] = float(host[i]);
      else if (t == DType::float16)
        reinterpret_cast<Half*>(bytes.data())[i] = Half(float(host[i]));
      else
        reinterpret_cast<BFloat16*>(bytes.data())[i] = BFloat16(float(host[i]));
    }
    REQUIRE(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<double> download() const {
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<char> bytes(n * element_size(t));
    REQUIRE(cudaMemcpy(bytes.data(), p, bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<double> out(n);
    for (size_t i = 0; i < n; ++i) {
      if (t == DType::float32)
        out[i] = reinterpret_cast<const float*>(bytes.data())[i];
      else if (t == DType::float16)
        out[i] = float(reinterpret_cast<const Half*>(bytes.data())[i]);
      else
        out[i] = float(reinterpret_cast<const BFloat16*>(bytes.data())[i]);
    }
    return out;
  }
};

// "" when |got - want| <= atol + rtol |want| everywhere, else the worst element.
std::string compare(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol) {
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double excess = std::abs(got[i] - want[i]) - (atol + rtol * std::abs(want[i]));
    if (!(excess <= worst)) {  // NaN counts
      worst = std::isnan(excess) ? INFINITY : excess;
      at = i;
      if (std::isnan(excess)) break;
    }
  }
  if (worst <= 0) return "";
  std::ostringstream os;
  os << "element " << at << ": got " << got[at] << ", want " << want[at] << " (rtol " << rtol << ", atol " << atol
     << ")";
  return os.str();
}
#define CHECK_NEAR_ALL(got, want, rtol, atol)                          \
  do {                                                                 \
    const std::string kiln_m_ = compare((got), (want), (rtol), (atol)); \
    CHECK_MESSAGE(kiln_m_.empty(), kiln_m_);                           \
  } while (0)

double rtol_for(DType t) { return t == DType::float32 ? 1e-4 : (t == DType::float16 ? 1e-2 : 3e-2); }
// Absolute slack for a reduction over `terms` products of values in [-1, 1].
double atol_for(DType t, double terms) {
  // Winograd/FFT algorithms transform the operands first, spreading the rounding of the largest
  // values onto every output: an absolute term growing like the typical output, sqrt(terms).
  if (t == DType::float32) return 1e-5 + 2e-5 * std::sqrt(terms);
  return rtol_for(t) * std::sqrt(terms);
}

bool device_has(DType t) { return cudnn::device_supports(t); }

// ---------------------------------------------------------------- GEMM

void check_gemm(GemmDesc d, double rtol, double atol) {
  CAPTURE(d.str());
  REQUIRE(cudnn::supports_gemm(d));
  const size_t na = size_t(d.stride_a * (d.batch - 1) + (d.trans_a ? d.k : d.m) * d.lda);
  const size_t nb = size_t(d.stride_b * (d.batch - 1) + (d.trans_b ? d.n : d.k) * d.ldb);
  const size_t nc = size_t(d.stride_c * (d.batch - 1) + d.m * d.ldc);
  std::vector<double> a = random_values(na, 1), b = random_values(nb, 2), c = random_values(nc, 3);
  DevBuf da(a, d.dtype), db(b, d.dtype), dc(c, d.dtype);
  std::vector<double> want = c;
  ref::gemm<double>(d, a.data(), b.data(), want.data());
  cudnn::gemm(d, da.p, db.p, dc.p);
  CHECK_NEAR_ALL(dc.download(), want, rtol, atol);
}

GemmDesc gemm_desc(DType t, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch, double beta) {
  GemmDesc d;
  d.dtype = t;
  d.trans_a = ta;
  d.trans_b = tb;
  d.m = m;
  d.n = n;
  d.k = k;
  d.lda = (ta ? m : k) + 1;
  d.ldb = (tb ? k : n) + 2;
  d.ldc = n + 3;
  d.alpha = 0.75;
  d.beta = beta;
  d.batch = batch;
  d.stride_a = (ta ? k : m) * d.lda;
  d.stride_b = (tb ? n : k) * d.ldb;
  d.stride_c = m * d.ldc;
  return d;
}

// ---------------------------------------------------------------- convolution

ConvDesc conv_desc(DType t, int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t stride,
                   int64_t pad, int64_t dilation, int64_t groups, bool bias, bool nhwc, bool relu = false) {
  ConvDesc d;
  d.dtype = t;
  d.N = n;
  d.C = c;
  d.H = h;
  d.W = w;
  d.K = k;
  d.R = d.S = r;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  d.dilation_h = d.dilation_w = dilation;
  d.groups = groups;
  d.has_bias = bias;
  d.nhwc = nhwc;
  d.relu = relu;
  d.set_output_size();
  return d;
}

void check_conv(const ConvDesc& d) {
  CAPTURE(d.str());
  CAPTURE(d.relu);
  REQUIRE(cudnn::supports_conv(d));
  ConvDesc plain = d;
  plain.relu = false;
  REQUIRE(cudnn::supports_conv_fwd(d));  // cuDNN's heuristics have a forward algorithm for each case
  // ... and both backward ones in NCHW. With NHWC activations and kiln's KCRS (NCHW-format)
  // weights, cuDNN 9.19 on an H200 lists none for backward-data nor backward-weights: the
  // queries decline, the op layer runs those passes in NCHW (engine/ops/conv.cpp pick_layout),
  // and a direct call must not hand back a wrong answer (below).
  const bool bwd_data = cudnn::supports_conv_bwd_data(plain), bwd_weights = cudnn::supports_conv_bwd_weights(plain);
  if (!d.nhwc) {
    REQUIRE(bwd_data);
    REQUIRE(bwd_weights);
  } else if (!bwd_data || !bwd_weights) {
    // doctest prints a const char* as a pointer: strings only.
    MESSAGE(d.str() << ": cuDNN declines" << std::string(bwd_data ? "" : " backward-data")
                    << std::string(bwd_weights ? "" : " backward-weights"));
  }
  // A declined direction called anyway: a kiln::Error, or (should cuDNN run it after all) the
  // right answer; anything else fails.
  auto run_declined = [&](const std::string& what, auto&& call, auto&& verify) {
    try {
      call();
      MESSAGE(d.str() << ": " << what << " declined by the query but ran; compared");
      verify();
    } catch (const kiln::Error& e) {
      MESSAGE(d.str() << ": " << what << " declined, and calling it throws: " << std::string(e.what()));
    }
  };
  const DType t = d.dtype;
  std::vector<double> x = random_values(size_t(d.src_elems()), 11), w = random_values(size_t(d.wei_elems()), 12),
                      b = random_values(size_t(d.K), 13), dy = random_values(size_t(d.dst_elems()), 14);
  DevBuf gx(x, t), gw(w, t), gdy(dy, t), gb(b, DType::float32);
  const double rtol = rtol_for(t);

  // forward
  std::vector<double> y(size_t(d.dst_elems()));
  ref::conv2d_fwd<double>(d, x.data(), w.data(), d.has_bias ? b.data() : nullptr, y.data());
  DevBuf gy(size_t(d.dst_elems()), t);
  cudnn::conv2d_fwd(d, gx.p, gw.p, d.has_bias ? gb.p : nullptr, gy.p);
  CHECK_NEAR_ALL(gy.download(), y, rtol, atol_for(t, double(d.C / d.groups * d.R * d.S)));

  ConvDesc bd = d;
  bd.relu = false;
  // backward-data
  std::vector<double> dx(size_t(d.src_elems()));
  ref::conv2d_bwd_data<double>(bd, dy.data(), w.data(), dx.data());
  DevBuf gdx(size_t(d.src_elems()), t);
  auto call_data = [&] { cudnn::conv2d_bwd_data(bd, gdy.p, gw.p, gdx.p); };
  auto check_data = [&] { CHECK_NEAR_ALL(gdx.download(), dx, rtol, atol_for(t, double(d.K / d.groups * d.R * d.S))); };
  if (bwd_data) {
    call_data();
    check_data();
  } else {
    run_declined("backward-data", call_data, check_data);
  }

  // backward-weights (+ bias)
  std::vector<double> dw(size_t(d.wei_elems())), dbias(size_t(d.K));
  ref::conv2d_bwd_weights<double>(bd, x.data(), dy.data(), dw.data(), d.has_bias ? dbias.data() : nullptr);
  DevBuf gdw(size_t(d.wei_elems()), t), gdb(size_t(d.K), DType::float32);
  auto call_weights = [&] { cudnn::conv2d_bwd_weights(bd, gx.p, gdy.p, gdw.p, d.has_bias ? gdb.p : nullptr); };
  auto check_weights = [&] {
    CHECK_NEAR_ALL(gdw.download(), dw, rtol, atol_for(t, double(d.N * d.P * d.Q)));
    if (d.has_bias) CHECK_NEAR_ALL(gdb.download(), dbias, 1e-4, atol_for(DType::float32, double(d.N * d.P * d.Q)));
  };
  if (bwd_weights) {
    call_weights();
    check_weights();
  } else {
    run_declined("backward-weights", call_weights, check_weights);
  }

  // only the bias gradient (cudnnConvolutionBackwardBias, or kiln's reduction: no filter algorithm)
  if (d.has_bias) {
    DevBuf gdb2(size_t(d.K), DType::float32);
    cudnn::conv2d_bwd_weights(bd, gx.p, gdy.p, nullptr, gdb2.p);
    CHECK_NEAR_ALL(gdb2.download(), dbias, 1e-4, atol_for(DType::float32, double(d.N * d.P * d.Q)));
  }
}

std::vector<ConvDesc> conv_cases(DType t) {
  // The half types' float32 bias (converted for cuDNN's add, its gradient summed in float32) is
  // checked in test_gpu_amp.cpp, with half tolerances.
  const bool bias = t == DType::float32;
  std::vector<ConvDesc> v;
  for (bool nhwc : {false, true}) {
    v.push_back(conv_desc(t, 2, 3, 9, 11, 4, 3, 1, 1, 1, 1, bias, nhwc));         // odd sizes, pad 1
    v.push_back(conv_desc(t, 3, 8, 12, 12, 16, 3, 2, 1, 1, 1, bias, nhwc, true));  // stride 2, fused relu
    v.push_back(conv_desc(t, 2, 6, 10, 7, 9, 3, 1, 2, 2, 3, bias, nhwc));          // dilation 2, groups 3
    v.push_back(conv_desc(t, 2, 16, 7, 7, 32, 1, 1, 0, 1, 1, bias, nhwc, true));   // 1x1
    v.push_back(conv_desc(t, 1, 3, 31, 29, 8, 5, 2, 2, 1, 1, bias, nhwc));         // 5x5
    v.push_back(conv_desc(t, 2, 8, 9, 9, 8, 3, 1, 1, 1, 8, bias, nhwc));           // depthwise
  }
  return v;
}

}  // namespace

TEST_CASE("cudnn gemm: TF32 when allowed, float16 and bfloat16 with float32 accumulation") {
  cudnn::set_allow_tf32(true);
  check_gemm(gemm_desc(DType::float32, false, true, 64, 96, 256, 2, 0), 1e-2, 1e-2 * 16);
  cudnn::set_allow_tf32(false);
  for (DType t : {DType::float16, DType::bfloat16}) {
    if (!device_has(t)) {
      kiln::test::skip_not_built(std::string("cuDNN ") + dtype_name(t), "this device does not offer it");
      continue;
    }
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        check_gemm(gemm_desc(t, ta, tb, 17, 40, 129, 2, 0.5), rtol_for(t), rtol_for(t) * std::sqrt(129.0));
  }
}

// The oracle runs cuDNN's heuristic choice; here the algorithms its timing mode picks.
TEST_CASE("cudnn conv: float32 forward and backward, NCHW and NHWC, algorithms chosen by timing") {
  cudnn::set_allow_tf32(false);
  cudnn::set_benchmark(true);
  for (const ConvDesc& d : conv_cases(DType::float32)) check_conv(d);
  cudnn::set_benchmark(false);
}

TEST_CASE("cudnn conv: float16 and bfloat16 on tensor cores") {
  for (DType t : {DType::float16, DType::bfloat16}) {
    if (!device_has(t)) {
      kiln::test::skip_not_built(std::string("cuDNN ") + dtype_name(t), "this device does not offer it");
      continue;
    }
    for (const ConvDesc& d : conv_cases(t)) check_conv(d);
  }
}

TEST_CASE("cudnn conv: what cuDNN cannot express is declined, and calling it anyway is an Error") {
  ConvDesc d = conv_desc(DType::float32, 1, 3, 8, 8, 4, 3, 2, 1, 1, 1, true, false);
  d.P += 1;  // asymmetric bottom padding (transposed convolution's output_padding)
  CHECK_FALSE(cudnn::supports_conv(d));
  CHECK_THROWS_WITH_AS(cudnn::conv2d_fwd(d, nullptr, nullptr, nullptr, nullptr),
                       doctest::Contains("symmetric"), kiln::Error);
  // Half data with kiln's float32 bias is offered; a residual sum post-op is not mapped to cuDNN
  // (declined, and an Error when called).
  ConvDesc h = conv_desc(DType::float16, 1, 3, 8, 8, 4, 3, 1, 1, 1, 1, true, false);
  if (device_has(DType::float16)) CHECK(cudnn::supports_conv(h));
  h.sum = true;
  CHECK_FALSE(cudnn::supports_conv(h));
  CHECK_THROWS_WITH_AS(cudnn::conv2d_fwd(h, nullptr, nullptr, nullptr, nullptr), doctest::Contains("sum post-op"),
                       kiln::Error);
}

TEST_CASE("cudnn declines what kiln's contract asks and cuDNN cannot give: eval batch-norm backward, max pooling") {
  BatchNormDesc b;
  b.N = 4, b.C = 5, b.S = 21;
  b.training = false;  // cuDNN's backward recomputes batch statistics
  CHECK_FALSE(cudnn::supports_batch_norm_bwd(b));
  PoolDesc m;
  m.alg = PoolAlg::max;  // kiln's max pooling returns PyTorch's indices, cuDNN's none
  m.n = 2, m.c = 5, m.ih = 11, m.iw = 9, m.kh = m.kw = 3, m.sh = m.sw = 2, m.ph = m.pw = 1;
  m.oh = pool_output_size(m.ih, 3, 1, 2, 1, false);
  m.ow = pool_output_size(m.iw, 3, 1, 2, 1, false);
  CHECK_FALSE(cudnn::supports_pool(m));
}

TEST_CASE("cudnn: library errors name the call and cuDNN's status; workspace limit") {
  cudnn::TensorDesc t;
  CHECK_THROWS_WITH_AS(t.set(DType::float32, -1, 2, 3, 4), doctest::Contains("cudnnSetTensor4dDescriptor"),
                       kiln::Error);
  cudnn::Context& ctx = cudnn::context();
  CHECK(ctx.dnn != nullptr);
  CHECK(ctx.blas != nullptr);
  CHECK(cudnn::workspace(ctx, 1000) != nullptr);
  CHECK(ctx.workspace_bytes >= 1000);
  CHECK_THROWS_WITH_AS(cudnn::workspace(ctx, cudnn::workspace_limit() + 1), doctest::Contains("KILN_CUDNN_WORKSPACE_MB"),
                       kiln::Error);
}

TEST_CASE("cudnn: a non-default current stream gets its own handles and orders the work") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  kiln::cuda::set_current_stream(reinterpret_cast<kiln::cuda::Stream>(s));
  CHECK(cudnn::context().stream == s);
  check_gemm(gemm_desc(DType::float32, true, false, 31, 17, 45, 2, 0), 1e-5, 1e-5 * 45);
  check_conv(conv_desc(DType::float32, 2, 4, 9, 9, 6, 3, 1, 1, 1, 1, true, true, true));
  kiln::cuda::set_current_stream(nullptr);
  CHECK(cudnn::context().stream == nullptr);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  cudaStreamDestroy(s);
}

#else  // !KILN_HAVE_CUDNN

#include "tests/support/testing.h"

TEST_CASE("cudnn: this build has no cuDNN") {
#if defined(KILN_EMU_DEVICE)
  kiln::test::skip_not_built("cuDNN", "the emulated device has none (its cases run with tools/gpu-check on a GPU)");
#else
  kiln::test::skip_not_built("cuDNN", "kiln was built without cuDNN (KILN_WITH_CUDNN, or not found beside CUDA)");
#endif
}

#endif  // KILN_HAVE_CUDNN
