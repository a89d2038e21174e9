// The cudnn backend's pure logic, on the CPU (cuDNN itself needs a GPU: tests/gpu/test_cudnn.cpp):
// the row-major -> column-major GEMM mapping, run through a small column-major reference with
// cuBLAS's semantics and compared with kiln's row-major ref GEMM over transposes, padded leading
// dimensions, batches and alpha/beta; and which descriptors map to cuDNN parameters (and which
// are declined, with the reason). Compiled into a test only when KILN_HAVE_CUDNN.
//   ctest --test-dir build -R cudnn_mapping
#include "tests/support/testing.h"

#ifdef KILN_HAVE_CUDNN

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/dispatch.h"
#include "kernels/cpu/ref/gemm.h"
#include "kernels/cuda/cudnn/mapping.h"

using namespace kiln;

namespace {

// cuBLAS's gemm(StridedBatched) on the host, column-major: C = alpha op(A) op(B) + beta C,
// op(A) m x k, op(B) k x n, element (i, j) of a column-major X at X[i + j * ld].
void colmajor_gemm(const cudnn::BlasGemm& g, double alpha, double beta, const double* a, const double* b, double* c) {
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const double* ab = a + bi * g.stride_a;
    const double* bb = b + bi * g.stride_b;
    double* cb = c + bi * g.stride_c;
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const double av = g.trans_a ? ab[p + i * g.lda] : ab[i + p * g.lda];
          const double bv = g.trans_b ? bb[j + p * g.ldb] : bb[p + j * g.ldb];
          acc += av * bv;
        }
        double& cv = cb[i + j * g.ldc];
        cv = beta == 0 ? alpha * acc : alpha * acc + beta * cv;
      }
  }
}

GemmDesc gemm_desc(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t pad, int64_t batch, double alpha,
                   double beta) {
  GemmDesc d;
  d.trans_a = ta;
  d.trans_b = tb;
  d.m = m;
  d.n = n;
  d.k = k;
  d.lda = (ta ? m : k) + pad;
  d.ldb = (tb ? k : n) + pad;
  d.ldc = n + pad;
  d.alpha = alpha;
  d.beta = beta;
  d.batch = batch;
  d.stride_a = (ta ? k : m) * d.lda + 3;
  d.stride_b = (tb ? n : k) * d.ldb + 1;
  d.stride_c = m * d.ldc + 2;
  return d;
}

ConvDesc conv(int64_t n, int64_t c, int64_t h, int64_t k, int64_t r, int64_t stride, int64_t pad) {
  ConvDesc d;
  d.N = n;
  d.C = c;
  d.H = d.W = h;
  d.K = k;
  d.R = d.S = r;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  d.set_output_size();
  return d;
}

}  // namespace

TEST_CASE("cudnn mapping: row-major GEMM equals cuBLAS column-major with operands swapped") {
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {3, 5, 7}, {7, 2, 1}, {4, 9, 6}})
        for (int64_t pad : {0, 3})
          for (int64_t batch : {1, 3})
            for (double beta : {0.0, 0.5}) {
              const GemmDesc d = gemm_desc(ta, tb, m, n, k, pad, batch, 1.5, beta);
              CAPTURE(d.str());
              REQUIRE(cudnn::gemm_unsupported(d) == nullptr);
              std::vector<double> a(size_t(d.stride_a * batch + 8)), b(size_t(d.stride_b * batch + 8)),
                  c0(size_t(d.stride_c * batch + 8));
              for (auto* v : {&a, &b, &c0})
                for (double& x : *v) x = u(gen);
              std::vector<double> want = c0, got = c0;
              ref::gemm<double>(d, a.data(), b.data(), want.data());
              const cudnn::BlasGemm g = cudnn::to_column_major(d);
              CHECK(g.first_is_b);
              colmajor_gemm(g, d.alpha, d.beta, b.data(), a.data(), got.data());
              for (size_t i = 0; i < want.size(); ++i) REQUIRE(std::abs(got[i] - want[i]) < 1e-12);
            }
}

TEST_CASE("cudnn mapping: GEMM descriptors cuBLAS cannot take are declined") {
  GemmDesc d = gemm_desc(false, false, 4, 5, 6, 0, 1, 1, 0);
  CHECK(cudnn::gemm_unsupported(d) == nullptr);
  d.dtype = DType::float64;
  CHECK(std::string(cudnn::gemm_unsupported(d)).find("dtype") != std::string::npos);
  d = gemm_desc(false, false, 4, 5, 6, 0, 1, 1, 0);
  d.ldb = 4;  // < n: cuBLAS's lda >= rows of its first operand
  CHECK(cudnn::gemm_unsupported(d) != nullptr);
  d = gemm_desc(false, false, 4, 5, 6, 0, 2, 1, 0);
  d.stride_c = 0;
  CHECK(cudnn::gemm_unsupported(d) != nullptr);
  d = gemm_desc(false, false, int64_t(1) << 31, 5, 6, 0, 1, 1, 0);
  CHECK(cudnn::gemm_unsupported(d) != nullptr);
  d = gemm_desc(true, false, 4, 5, 6, 0, 1, 1, 0);
  d.dtype = DType::bfloat16;
  CHECK(cudnn::gemm_unsupported(d) == nullptr);
}

TEST_CASE("cudnn mapping: convolution shapes and what cuDNN cannot express") {
  ConvDesc d = conv(2, 6, 9, 4, 3, 2, 1);
  d.groups = 2;
  d.dilation_h = 2;
  d.set_output_size();
  d.nhwc = true;
  REQUIRE(cudnn::conv_unsupported(d) == nullptr);
  const cudnn::ConvShape s = cudnn::conv_shape(d);
  CHECK(s.x[0] == 2);
  CHECK(s.x[1] == 6);
  CHECK(s.x[2] == 9);
  CHECK(s.x[3] == 9);
  CHECK(s.w[0] == 4);
  CHECK(s.w[1] == 3);  // C / groups
  CHECK(s.w[2] == 3);
  CHECK(s.y[1] == 4);
  CHECK(s.y[2] == d.P);
  CHECK(s.y[3] == d.Q);
  CHECK(s.pad[0] == 1);
  CHECK(s.stride[1] == 2);
  CHECK(s.dilation[0] == 2);
  CHECK(s.dilation[1] == 1);
  CHECK(s.groups == 2);
  CHECK(s.nhwc);

  ConvDesc e = conv(1, 3, 8, 4, 3, 2, 1);
  e.P += 1;  // an output size only asymmetric padding gives (transposed convolution's extra row)
  CHECK(std::string(cudnn::conv_unsupported(e)).find("symmetric") != std::string::npos);
  e = conv(1, 3, 8, 4, 3, 1, 1);
  e.dtype = DType::bfloat16;
  CHECK(cudnn::conv_unsupported(e) == nullptr);
  e.has_bias = true;  // kiln's half convolutions take a float32 bias: converted in workspace
  CHECK(cudnn::conv_unsupported(e) == nullptr);
  e.dtype = DType::float16;
  CHECK(cudnn::conv_unsupported(e) == nullptr);
  e.relu = true;
  CHECK(cudnn::conv_unsupported(e) == nullptr);
  e.sum = true;  // the residual post-op is not mapped: the op layer runs conv, add and ReLU apart
  CHECK(std::string(cudnn::conv_unsupported(e)).find("sum post-op") != std::string::npos);
  e.sum = false;
  e.relu = false;
  e.dtype = DType::float32;
  CHECK(cudnn::conv_unsupported(e) == nullptr);
  e.dtype = DType::float64;
  CHECK(cudnn::conv_unsupported(e) != nullptr);
  e = conv(1, 3, 8, 4, 3, 1, 1);
  e.groups = 2;
  CHECK(cudnn::conv_unsupported(e) != nullptr);
  e = conv(70000, 128, 200, 4, 3, 1, 1);  // > 2^31 input elements
  CHECK(std::string(cudnn::conv_unsupported(e)).find("int32") != std::string::npos);
}

TEST_CASE("cudnn mapping: convolution types of mixed precision") {
  // float32: float32 everywhere, no tensor cores unless TF32 is allowed.
  cudnn::ConvTypes f = cudnn::conv_types(DType::float32, false);
  CHECK(f.data == DType::float32);
  CHECK(f.compute == DType::float32);
  CHECK(f.bias == DType::float32);
  CHECK_FALSE(f.bias_cast());
  CHECK_FALSE(f.tensor_ops);
  CHECK(cudnn::conv_types(DType::float32, true).tensor_ops);
  // Half data: float32 accumulation (PSEUDO_HALF), float32 bias in kiln's API converted to the
  // data type for cuDNN's add, tensor cores always.
  for (DType t : {DType::float16, DType::bfloat16}) {
    CAPTURE(dtype_name(t));
    for (bool tf32 : {false, true}) {
      const cudnn::ConvTypes h = cudnn::conv_types(t, tf32);
      CHECK(h.data == t);
      CHECK(h.compute == DType::float32);
      CHECK(h.bias == DType::float32);
      CHECK(h.bias_compute == t);
      CHECK(h.bias_cast());
      CHECK(h.tensor_ops);
    }
  }
  CHECK(std::string(cudnn::math_type_name(1)) == "CUDNN_TENSOR_OP_MATH");
  CHECK(std::string(cudnn::math_type_name(3)) == "CUDNN_FMA_MATH");
  CHECK(cudnn::math_uses_tensor_cores(1));
  CHECK(cudnn::math_uses_tensor_cores(2));
  CHECK_FALSE(cudnn::math_uses_tensor_cores(0));
  CHECK_FALSE(cudnn::math_uses_tensor_cores(3));
}

TEST_CASE("cudnn mapping: average pooling maps, max pooling and ceil-mode windows do not") {
  PoolDesc d;
  d.alg = PoolAlg::avg;
  d.n = 2;
  d.c = 3;
  d.ih = 10;
  d.iw = 11;
  d.kh = 3;
  d.kw = 2;
  d.sh = 2;
  d.sw = 3;
  d.ph = 1;
  d.pw = 0;
  d.oh = pool_output_size(d.ih, d.kh, d.ph, d.sh, 1, false);
  d.ow = pool_output_size(d.iw, d.kw, d.pw, d.sw, 1, false);
  REQUIRE(cudnn::pool_unsupported(d) == nullptr);
  cudnn::PoolShape s = cudnn::pool_shape(d);
  CHECK(s.mode == cudnn::PoolMode::avg_include_pad);
  CHECK(s.window[0] == 3);
  CHECK(s.window[1] == 2);
  CHECK(s.stride[1] == 3);
  CHECK(s.pad[0] == 1);
  CHECK(s.y[2] == d.oh);
  d.count_include_pad = false;
  CHECK(cudnn::pool_shape(d).mode == cudnn::PoolMode::avg_exclude_pad);

  PoolDesc c = d;  // ceil mode adding a last, clipped window
  c.ceil_mode = true;
  c.oh = pool_output_size(c.ih, c.kh, c.ph, c.sh, 1, true);
  c.ow = pool_output_size(c.iw, c.kw, c.pw, c.sw, 1, true);
  REQUIRE((c.oh != d.oh || c.ow != d.ow));
  CHECK(cudnn::pool_unsupported(c) != nullptr);
  PoolDesc m = d;
  m.alg = PoolAlg::max;
  CHECK(std::string(cudnn::pool_unsupported(m)).find("index") != std::string::npos);
  PoolDesc o = d;
  o.divisor_override = 4;
  CHECK(cudnn::pool_unsupported(o) != nullptr);
  o = d;
  o.dh = 2;
  CHECK(cudnn::pool_unsupported(o) != nullptr);
}

TEST_CASE("cudnn mapping: LRN, softmax, batch norm and activations") {
  LrnDesc l;
  l.n = 2;
  l.c = 7;
  l.inner = 15;
  l.size = 5;
  l.alpha = 2e-4;
  REQUIRE(cudnn::lrn_unsupported(l) == nullptr);
  const cudnn::LrnParams p = cudnn::lrn_params(l);
  CHECK(p.n == 5);
  CHECK(p.alpha == 2e-4);  // cuDNN divides by the window itself, as kiln's formula does
  CHECK(p.x[1] == 7);
  CHECK(p.x[2] == 15);
  l.size = 4;
  CHECK(cudnn::lrn_unsupported(l) != nullptr);
  l.size = 17;
  CHECK(cudnn::lrn_unsupported(l) != nullptr);
  l.size = 3;
  l.k = 0;
  CHECK(cudnn::lrn_unsupported(l) != nullptr);

  SoftmaxDesc sm;
  sm.outer = 3;
  sm.dim = 10;
  sm.inner = 4;
  CHECK(cudnn::softmax_unsupported(sm) == nullptr);
  sm.dtype = DType::float64;
  CHECK(cudnn::softmax_unsupported(sm) != nullptr);

  BatchNormDesc bn;
  bn.N = 4;
  bn.C = 3;
  bn.S = 5;
  CHECK(cudnn::batch_norm_fwd_unsupported(bn) == nullptr);
  CHECK(cudnn::batch_norm_bwd_unsupported(bn) == nullptr);
  bn.training = false;
  CHECK(cudnn::batch_norm_fwd_unsupported(bn) == nullptr);
  CHECK(cudnn::batch_norm_bwd_unsupported(bn) != nullptr);
  bn.training = true;
  // Half data with float32 scale, shift and statistics (cudnnDeriveBNTensorDescriptor's rule).
  for (DType t : {DType::bfloat16, DType::float16}) {
    bn.dtype = t;
    CHECK(cudnn::batch_norm_fwd_unsupported(bn) == nullptr);
    CHECK(cudnn::batch_norm_bwd_unsupported(bn) == nullptr);
    CHECK(cudnn::bn_param_dtype(t) == DType::float32);
  }
  CHECK(cudnn::bn_param_dtype(DType::float32) == DType::float32);
  bn.dtype = DType::float64;
  CHECK(cudnn::batch_norm_fwd_unsupported(bn) != nullptr);

  UnaryDesc u;
  u.op = UnaryOp::relu;
  u.loop.ndim = 1;
  u.loop.noperands = 2;
  u.loop.sizes[0] = 33;
  u.loop.strides[0][0] = u.loop.strides[1][0] = 1;
  CHECK(cudnn::unary_unsupported(u) == nullptr);
  u.op = UnaryOp::gelu;
  CHECK(cudnn::unary_unsupported(u) != nullptr);
  u.op = UnaryOp::tanh;
  u.loop.strides[1][0] = 2;
  CHECK(cudnn::unary_unsupported(u) != nullptr);
  CHECK(cudnn::act_mode(UnaryOp::sigmoid) == cudnn::ActMode::sigmoid);

  BinaryDesc b;
  b.op = BinaryOp::relu_bwd;
  b.loop.ndim = 1;
  b.loop.noperands = 3;
  b.loop.sizes[0] = 7;
  b.loop.strides[0][0] = b.loop.strides[1][0] = b.loop.strides[2][0] = 1;
  CHECK(cudnn::binary_unsupported(b) == nullptr);
  b.loop.strides[2][0] = 0;  // broadcast
  CHECK(cudnn::binary_unsupported(b) != nullptr);
  b.loop.strides[2][0] = 1;
  b.op = BinaryOp::sigmoid_bwd;
  CHECK(cudnn::binary_unsupported(b) != nullptr);
}

// `auto` on a GPU: every op cuDNN/cuBLAS serves has a cudnn candidate ranked above kiln's own
// CUDA kernel (which takes what cuDNN declines).
template <class Op>
void check_cudnn_first() {
  CAPTURE(std::string(Op::name));
  int cudnn = -1, native = -1;
  for (const auto& c : op_table<Op>().all()) {
    if (c->device != DeviceType::cuda) continue;
    if (backend_name(c->backend) == "cudnn") cudnn = c->priority;
    if (backend_name(c->backend) == "native") native = c->priority;
  }
  CHECK(cudnn >= 0);
  CHECK(native >= 0);
  CHECK(cudnn > native);
}

TEST_CASE("cudnn mapping: cudnn ranks first among the CUDA candidates of each op it serves") {
  check_cudnn_first<kernel_op::gemm>();
  check_cudnn_first<kernel_op::conv2d_fwd>();
  check_cudnn_first<kernel_op::conv2d_bwd_data>();
  check_cudnn_first<kernel_op::conv2d_bwd_weights>();
  check_cudnn_first<kernel_op::pool_fwd>();
  check_cudnn_first<kernel_op::pool_bwd>();
  check_cudnn_first<kernel_op::lrn_fwd>();
  check_cudnn_first<kernel_op::lrn_bwd>();
  check_cudnn_first<kernel_op::batch_norm_fwd>();
  check_cudnn_first<kernel_op::batch_norm_bwd>();
  check_cudnn_first<kernel_op::softmax_fwd>();
  check_cudnn_first<kernel_op::softmax_bwd>();
  check_cudnn_first<kernel_op::unary>();
  check_cudnn_first<kernel_op::binary>();
}

#else

TEST_CASE("cudnn mapping: built without cuDNN") {
  kiln::test::skip_not_built("cuDNN", "kiln was built without cuDNN (KILN_HAVE_CUDNN is off): no mapping to check");
}

#endif
