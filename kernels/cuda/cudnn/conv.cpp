// cuDNN convolution (see conv.h). A Plan per (descriptor, ReLU, device, TF32/benchmark mode) holds
// the cuDNN descriptors and, per direction, the candidate algorithms best first (heuristics or
// timing). A run takes the first candidate whose workspace fits the limit; a candidate cuDNN
// declines at run time (NOT_SUPPORTED) is skipped and the next one remembered, so a wrong
// heuristic costs one failed call, not an error. Algorithm 0 of each direction (implicit GEMM,
// little or no workspace) is always the last resort.
// Mixed precision (mapping.h, ConvTypes): half data convolves in half with float32 accumulation
// on tensor cores. kiln's bias stays float32, cuDNN adds a bias of the data's type: each forward
// call converts the K bias values into workspace with kiln's own CUDA copy kernel (cuDNN's
// cudnnTransformTensor refuses differing data types) and then adds it (fused with the ReLU where
// cudnnConvolutionBiasActivationForward takes the shape). The bias gradient asks cuDNN to sum
// diff_dst straight into kiln's float32 gradient; where cuDNN refuses the descriptors (cuDNN 9
// takes no bfloat16 in cudnnConvolutionBackwardBias, whatever the bias type; remembered per plan)
// kiln's own CUDA reduction sums it (kernels/cuda/native/conv.h), float32 accumulation either way.
// Built with CUDA (the kernels/cuda host rule); compiled empty where cuDNN was not found.
#if defined(KILN_HAVE_CUDNN)

#include "kernels/cuda/cudnn/conv.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cudnn/handles.h"
#include "kernels/cuda/cudnn/mapping.h"
#include "kernels/cuda/native/conv.h"
#include "kernels/cuda/native/copy.h"

// The legacy (non-graph) cuDNN API is deprecated in cuDNN 9 but is the one cuDNN 8 has.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kiln::cudnn {

namespace {

const float kOne = 1.0f, kZero = 0.0f;

// mapping.h names cuDNN's math types by value.
static_assert(int(CUDNN_DEFAULT_MATH) == 0 && int(CUDNN_TENSOR_OP_MATH) == 1 &&
                  int(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) == 2,
              "cudnnMathType_t values changed: update mapping.cpp's math_type_name");
#if CUDNN_VERSION >= 8000
static_assert(int(CUDNN_FMA_MATH) == 3, "cudnnMathType_t values changed: update mapping.cpp's math_type_name");
#endif

struct Candidate {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

struct Choice {
  bool ready = false;
  std::vector<Candidate> candidates;
  size_t first = 0;  // index of the candidate that last ran
};

struct Plan {
  ConvDesc d;
  TensorDesc x, y, bias;
  TensorDesc bias_half;  // [1, K, 1, 1] in the data type: the bias as cuDNN adds it (half data)
  ConvTypes types;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  bool fused_ok = true;  // cudnnConvolutionBiasActivationForward accepted so far
  bool bias_grad_cudnn = true;  // cuDNN has not refused this plan's bias gradient
  Choice fwd, bwd_data, bwd_filter;
  int viable[3] = {-1, -1, -1};  // per direction: heuristics' algorithm count, -1 = not asked
  std::mutex mu;  // guards the Choices and fused_ok
  ~Plan() {
    if (w) (void)cudnnDestroyFilterDescriptor(w);
    if (conv) (void)cudnnDestroyConvolutionDescriptor(conv);
    if (relu) (void)cudnnDestroyActivationDescriptor(relu);
  }
};

std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::unique_ptr<Plan>>& cache() {
  static auto* c = new std::map<std::string, std::unique_ptr<Plan>>();  // leaked: see handles.h
  return *c;
}

bool half(DType t) { return t == DType::float16 || t == DType::bfloat16; }

// float32 keeps float32 products unless TF32 is allowed: CUDNN_FMA_MATH (cuDNN 8) forbids the
// tensor-core TF32 kernels CUDNN_DEFAULT_MATH would permit on Ampere and newer (PyTorch does the
// same). Half types run on tensor cores.
cudnnMathType_t math_for(DType t) {
  if (half(t)) return CUDNN_TENSOR_OP_MATH;
  if (allow_tf32()) return CUDNN_TENSOR_OP_MATH;
#if CUDNN_VERSION >= 8000
  return CUDNN_FMA_MATH;
#else
  return CUDNN_DEFAULT_MATH;
#endif
}

// A candidate's math type must not smuggle TF32 into a float32 run.
bool math_allowed(DType t, cudnnMathType_t m) {
  if (t != DType::float32 || allow_tf32()) return true;
  return m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

std::unique_ptr<Plan> make_plan(const ConvDesc& d) {
  auto p = std::make_unique<Plan>();
  p->d = d;
  const ConvShape s = conv_shape(d);
  const std::string what = "conv2d " + d.str();
  p->x.set(d.dtype, s.x, s.nhwc);
  p->y.set(d.dtype, s.y, s.nhwc);
  p->types = conv_types(d.dtype, allow_tf32());
  if (d.has_bias) p->bias.set(p->types.bias, 1, s.y[1], 1, 1);
  if (d.has_bias && p->types.bias_cast()) p->bias_half.set(p->types.bias_compute, 1, s.y[1], 1, 1);
  KILN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w), what);
  KILN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, data_type(d.dtype), CUDNN_TENSOR_NCHW, s.w[0], s.w[1], s.w[2], s.w[3]),
                   what);
  KILN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv), what);
  KILN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, s.pad[0], s.pad[1], s.stride[0], s.stride[1],
                                                   s.dilation[0], s.dilation[1], CUDNN_CROSS_CORRELATION,
                                                   data_type(p->types.compute)),
                   what);
  KILN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv, s.groups), what);
  p->math = math_for(d.dtype);
  KILN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->math), what);
  KILN_CUDNN_CHECK(cudnnCreateActivationDescriptor(&p->relu), what);
  KILN_CUDNN_CHECK(cudnnSetActivationDescriptor(p->relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0), what);
  // cuDNN must agree on the output size, else every call would fail with BAD_PARAM.
  int n = 0, c = 0, h = 0, wd = 0;
  KILN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x.d, p->w, &n, &c, &h, &wd), what);
  KILN_CHECK(n == s.y[0] && c == s.y[1] && h == s.y[2] && wd == s.y[3], "cudnn conv2d: cuDNN's output [", n, ", ", c,
             ", ", h, ", ", wd, "] differs from the descriptor's (", d.str(), ")");
  return p;
}

Plan& plan_for(const ConvDesc& d, int device) {
  std::string key = d.str();
  key += d.relu ? " relu" : "";
  key += " dev" + std::to_string(device);
  key += allow_tf32() ? " tf32" : "";
  key += benchmark() ? " bench" : "";
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto& slot = cache()[key];
  if (!slot) slot = make_plan(d);
  return *slot;
}

// Fills `c` from perf results (best first), keeping successful ones whose math type is allowed and
// whose memory fits, then algorithm 0 as the last resort.
template <class Perf>
void fill_choice(Choice& c, const Perf* perf, int count, DType t, bool check_memory) {
  c.candidates.clear();
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (!math_allowed(t, perf[i].mathType)) continue;
    if (check_memory && perf[i].memory > workspace_limit()) continue;
    c.candidates.push_back({int(perf[i].algo), perf[i].mathType});
  }
  bool has0 = false;
  for (const Candidate& k : c.candidates) has0 |= k.algo == 0;
  if (!has0) c.candidates.push_back({0, CUDNN_DEFAULT_MATH});
  c.first = 0;
  c.ready = true;
}

bool is_bad_param(cudnnStatus_t s) {
#if CUDNN_VERSION >= 90000
  return int(s) / 1000 == int(CUDNN_STATUS_BAD_PARAM) / 1000;
#else
  return s == CUDNN_STATUS_BAD_PARAM;
#endif
}

// Runs the first candidate that works (see the file comment). ws_size(algo, &bytes) queries the
// workspace; run(algo, ws, bytes) does the work and returns cuDNN's status.
template <class WsSize, class Run>
void run_candidates(Context& ctx, Plan& p, Choice& c, const char* op, WsSize ws_size, Run run) {
  const Choice snap = [&] {
    std::lock_guard<std::mutex> lock(p.mu);
    return c;
  }();
  const size_t start = snap.first;
  const std::vector<Candidate>& cands = snap.candidates;
  cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
  for (size_t k = 0; k < cands.size(); ++k) {
    const size_t i = (start + k) % cands.size();
    size_t bytes = 0;
    cudnnStatus_t s = ws_size(cands[i].algo, &bytes);
    if (s != CUDNN_STATUS_SUCCESS) {
      if (is_not_supported(s) || is_bad_param(s)) {
        last = s;
        continue;
      }
      detail::throw_cudnn(s, "cudnnGetConvolution*WorkspaceSize", ::kiln::detail::concat(op, " ", p.d.str(), " algo ", cands[i].algo),
                          __FILE__, __LINE__);
    }
    if (bytes > workspace_limit()) continue;
    void* ws = workspace(ctx, bytes);
    s = run(cands[i].algo, ws, bytes);
    if (s == CUDNN_STATUS_SUCCESS) {
      if (i != start) {
        std::lock_guard<std::mutex> lock(p.mu);
        c.first = i;
      }
      return;
    }
    // A candidate refusing these parameters (NOT_SUPPORTED, BAD_PARAM) hands over to the next;
    // if every one refuses, the last status is reported below.
    if (!is_not_supported(s) && !is_bad_param(s))
      detail::throw_cudnn(s, op, ::kiln::detail::concat(p.d.str(), " algo ", cands[i].algo), __FILE__, __LINE__);
    last = s;
  }
  KILN_THROW("cudnn ", op, ": no cuDNN algorithm ran ", p.d.str(), " within the ", workspace_limit() >> 20,
             " MiB workspace (last status ", cudnnGetErrorString(last), ")");
}

// The largest workspace any algorithm of a direction needs, capped by the limit (what timing
// mode hands to cudnnFind*AlgorithmEx).
template <class WsSize>
size_t find_workspace(int algo_count, WsSize ws_size) {
  size_t most = 0;
  for (int a = 0; a < algo_count; ++a) {
    size_t b = 0;
    if (ws_size(a, &b) == CUDNN_STATUS_SUCCESS && b <= workspace_limit()) most = std::max(most, b);
  }
  return most;
}

void choose_fwd(Context& ctx, Plan& p, const void* src, const void* wei, void* dst) {
  constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  cudnnConvolutionFwdAlgoPerf_t perf[kCount];
  int n = 0;
  const std::string what = "conv2d_fwd " + p.d.str();
  auto ws_size = [&](int a, size_t* b) {
    return cudnnGetConvolutionForwardWorkspaceSize(ctx.dnn, p.x.d, p.w, p.conv, p.y.d, cudnnConvolutionFwdAlgo_t(a), b);
  };
  // Timing mode; a failed timing run (out of memory for its buffers...) falls back to heuristics.
  bool timed = false;
  if (benchmark()) {
    const size_t bytes = find_workspace(kCount, ws_size);
    void* ws = workspace(ctx, bytes);
    timed = cudnnFindConvolutionForwardAlgorithmEx(ctx.dnn, p.x.d, src, p.w, wei, p.conv, p.y.d, dst, kCount, &n,
                                                   perf, ws, bytes) == CUDNN_STATUS_SUCCESS;
  }
  if (!timed)
    KILN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx.dnn, p.x.d, p.w, p.conv, p.y.d, kCount, &n, perf), what);
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.fwd.ready) fill_choice(p.fwd, perf, n, p.d.dtype, timed);
}

void choose_bwd_data(Context& ctx, Plan& p, const void* diff_dst, const void* wei, void* diff_src) {
  constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  cudnnConvolutionBwdDataAlgoPerf_t perf[kCount];
  int n = 0;
  const std::string what = "conv2d_bwd_data " + p.d.str();
  auto ws_size = [&](int a, size_t* b) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.dnn, p.w, p.y.d, p.conv, p.x.d,
                                                        cudnnConvolutionBwdDataAlgo_t(a), b);
  };
  // Timing mode; a failed timing run (out of memory for its buffers...) falls back to heuristics.
  bool timed = false;
  if (benchmark()) {
    const size_t bytes = find_workspace(kCount, ws_size);
    void* ws = workspace(ctx, bytes);
    timed = cudnnFindConvolutionBackwardDataAlgorithmEx(ctx.dnn, p.w, wei, p.y.d, diff_dst, p.conv, p.x.d, diff_src,
                                                        kCount, &n, perf, ws, bytes) == CUDNN_STATUS_SUCCESS;
  }
  if (!timed)
    KILN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.dnn, p.w, p.y.d, p.conv, p.x.d, kCount, &n, perf),
                     what);
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.bwd_data.ready) fill_choice(p.bwd_data, perf, n, p.d.dtype, timed);
}

void choose_bwd_filter(Context& ctx, Plan& p, const void* src, const void* diff_dst, void* diff_wei) {
  constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  cudnnConvolutionBwdFilterAlgoPerf_t perf[kCount];
  int n = 0;
  const std::string what = "conv2d_bwd_weights " + p.d.str();
  auto ws_size = [&](int a, size_t* b) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.dnn, p.x.d, p.y.d, p.conv, p.w,
                                                          cudnnConvolutionBwdFilterAlgo_t(a), b);
  };
  // Timing mode; a failed timing run (out of memory for its buffers...) falls back to heuristics.
  bool timed = false;
  if (benchmark()) {
    const size_t bytes = find_workspace(kCount, ws_size);
    void* ws = workspace(ctx, bytes);
    timed = cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx.dnn, p.x.d, src, p.y.d, diff_dst, p.conv, p.w,
                                                          diff_wei, kCount, &n, perf, ws, bytes) == CUDNN_STATUS_SUCCESS;
  }
  if (!timed)
    KILN_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.dnn, p.x.d, p.y.d, p.conv, p.w, kCount, &n, perf), what);
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.bwd_filter.ready) fill_choice(p.bwd_filter, perf, n, p.d.dtype, timed);
}

enum Dir { kFwd = 0, kBwdData = 1, kBwdFilter = 2 };

// Whether cuDNN's heuristics list at least one algorithm for a direction of this plan (cached):
// the supports_* functions ask, so a shape no algorithm takes falls back to kiln's own kernels
// instead of failing at run time.
template <class Perf>
int count_viable(const Perf* perf, int n, DType t) {
  int ok = 0;
  for (int i = 0; i < n; ++i) ok += perf[i].status == CUDNN_STATUS_SUCCESS && math_allowed(t, perf[i].mathType);
  return ok;
}

bool viable(const ConvDesc& desc, Dir dir) {
  try {
    Context& ctx = context();
    ConvDesc d = desc;
    if (dir != kFwd) d.relu = false;
    Plan& p = plan_for(d, ctx.device);
    {
      std::lock_guard<std::mutex> lock(p.mu);
      if (p.viable[dir] >= 0) return p.viable[dir] > 0;
    }
    int ok = 0, n = 0;
    if (dir == kFwd) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      if (cudnnGetConvolutionForwardAlgorithm_v7(ctx.dnn, p.x.d, p.w, p.conv, p.y.d, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                 &n, perf) == CUDNN_STATUS_SUCCESS)
        ok = count_viable(perf, n, d.dtype);
    } else if (dir == kBwdData) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      if (cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.dnn, p.w, p.y.d, p.conv, p.x.d,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n,
                                                      perf) == CUDNN_STATUS_SUCCESS)
        ok = count_viable(perf, n, d.dtype);
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.dnn, p.x.d, p.y.d, p.conv, p.w,
                                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n,
                                                        perf) == CUDNN_STATUS_SUCCESS)
        ok = count_viable(perf, n, d.dtype);
    }
    std::lock_guard<std::mutex> lock(p.mu);
    p.viable[dir] = ok;
    return ok > 0;
  } catch (const Error&) {
    return false;  // no handle, no device, a descriptor cuDNN rejects: not ours to run
  }
}

bool ready(Plan& p, Choice& c) {
  std::lock_guard<std::mutex> lock(p.mu);
  return c.ready;
}

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

// n contiguous values from one dtype to another on the current stream: kiln's own CUDA copy
// kernel (cuDNN converts no data types outside its compute calls).
void convert(DType from, DType to, int64_t n, const void* src, void* dst, const ConvDesc& d) {
  CopyDesc c;
  c.src_dtype = from;
  c.dst_dtype = to;
  c.loop.ndim = 1;
  c.loop.noperands = 2;
  c.loop.sizes[0] = n;
  c.loop.strides[0][0] = c.loop.strides[1][0] = 1;
  KILN_CHECK(cuda::supports_copy(c), "cudnn conv2d: no CUDA copy from ", dtype_name(from), " to ", dtype_name(to),
             " for the bias (", d.str(), ")");
  cuda::copy(c, src, dst);
}

}  // namespace

bool supports_conv(const ConvDesc& d) { return conv_unsupported(d) == nullptr && device_supports(d.dtype); }
bool supports_conv_fwd(const ConvDesc& d) { return supports_conv(d) && viable(d, kFwd); }
bool supports_conv_bwd_data(const ConvDesc& d) { return supports_conv(d) && viable(d, kBwdData); }
bool supports_conv_bwd_weights(const ConvDesc& d) { return supports_conv(d) && viable(d, kBwdFilter); }

void clear_conv_cache() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  cache().clear();
}

void conv2d_fwd(const ConvDesc& d, const void* src, const void* wei, const void* bias, void* dst) {
  const char* why = conv_unsupported(d);
  KILN_CHECK(!why, "cudnn conv2d_fwd: ", why, " (", d.str(), ")");
  KILN_CHECK(!d.has_bias || bias, "cudnn conv2d_fwd: has_bias without a bias pointer (", d.str(), ")");
  Context& ctx = context();
  Plan& p = plan_for(d, ctx.device);
  if (!ready(p, p.fwd)) choose_fwd(ctx, p, src, wei, dst);
  // Half data: the float32 bias goes to the data type behind the algorithm's workspace (both
  // live while the fused call runs); bias_desc/bias_ptr are what cuDNN adds.
  const bool cast_bias = d.has_bias && p.types.bias_cast();
  const size_t bias_bytes = cast_bias ? align256(size_t(d.K) * element_size(p.types.bias_compute)) : 0;
  const cudnnTensorDescriptor_t bias_desc = cast_bias ? p.bias_half.d : p.bias.d;
  const void* bias_ptr = bias;
  const bool want_fused = d.has_bias && d.relu;
  bool fused_done = false;
  run_candidates(
      ctx, p, p.fwd, "cudnnConvolutionForward",
      [&](int a, size_t* b) {
        return cudnnGetConvolutionForwardWorkspaceSize(ctx.dnn, p.x.d, p.w, p.conv, p.y.d,
                                                       cudnnConvolutionFwdAlgo_t(a), b);
      },
      [&](int a, void* ws, size_t bytes) {
        const auto algo = cudnnConvolutionFwdAlgo_t(a);
        if (cast_bias) {
          // Stream order keeps this safe: the conversion is queued before the call reading it.
          char* base = static_cast<char*>(workspace(ctx, align256(bytes) + bias_bytes, true));
          ws = base;
          void* half_bias = base + align256(bytes);
          convert(p.types.bias, p.types.bias_compute, d.K, bias, half_bias, d);
          bias_ptr = half_bias;
        }
        bool fused = false;
        if (want_fused) {
          std::lock_guard<std::mutex> lock(p.mu);
          fused = p.fused_ok;
        }
        if (fused) {
          // z = dst with alpha2 = 0: cuDNN reads no z; y = relu(conv + bias) in one pass.
          const cudnnStatus_t s = cudnnConvolutionBiasActivationForward(
              ctx.dnn, &kOne, p.x.d, src, p.w, wei, p.conv, algo, ws, bytes, &kZero, p.y.d, dst, bias_desc, bias_ptr,
              p.relu, p.y.d, dst);
          if (s == CUDNN_STATUS_SUCCESS) {
            fused_done = true;
            return s;
          }
          // Any refusal (NOT_SUPPORTED, or BAD_PARAM for an algorithm the fused call does not
          // take) sends this shape to the three-call path from now on; that path reports real
          // errors itself.
          std::lock_guard<std::mutex> lock(p.mu);
          p.fused_ok = false;
        }
        return cudnnConvolutionForward(ctx.dnn, &kOne, p.x.d, src, p.w, wei, p.conv, algo, ws, bytes, &kZero, p.y.d,
                                       dst);
      });
  if (fused_done) return;
  const std::string what = "conv2d_fwd " + d.str();
  if (d.has_bias) KILN_CUDNN_CHECK(cudnnAddTensor(ctx.dnn, &kOne, bias_desc, bias_ptr, &kOne, p.y.d, dst), what);
  if (d.relu) KILN_CUDNN_CHECK(cudnnActivationForward(ctx.dnn, p.relu, &kOne, p.y.d, dst, &kZero, p.y.d, dst), what);
}

void conv2d_bwd_data(const ConvDesc& d, const void* diff_dst, const void* wei, void* diff_src) {
  const char* why = conv_unsupported(d);
  KILN_CHECK(!why, "cudnn conv2d_bwd_data: ", why, " (", d.str(), ")");
  Context& ctx = context();
  ConvDesc bd = d;
  bd.relu = false;  // backward descriptors never carry the post-op; share the plan
  Plan& p = plan_for(bd, ctx.device);
  if (!ready(p, p.bwd_data)) choose_bwd_data(ctx, p, diff_dst, wei, diff_src);
  run_candidates(
      ctx, p, p.bwd_data, "cudnnConvolutionBackwardData",
      [&](int a, size_t* b) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.dnn, p.w, p.y.d, p.conv, p.x.d,
                                                            cudnnConvolutionBwdDataAlgo_t(a), b);
      },
      [&](int a, void* ws, size_t bytes) {
        return cudnnConvolutionBackwardData(ctx.dnn, &kOne, p.w, wei, p.y.d, diff_dst, p.conv,
                                            cudnnConvolutionBwdDataAlgo_t(a), ws, bytes, &kZero, p.x.d, diff_src);
      });
}

void conv2d_bwd_weights(const ConvDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias) {
  const char* why = conv_unsupported(d);
  KILN_CHECK(!why, "cudnn conv2d_bwd_weights: ", why, " (", d.str(), ")");
  if (!diff_wei && !diff_bias) return;
  Context& ctx = context();
  ConvDesc bd = d;
  bd.relu = false;
  Plan& p = plan_for(bd, ctx.device);
  if (diff_wei) {
    if (!ready(p, p.bwd_filter)) choose_bwd_filter(ctx, p, src, diff_dst, diff_wei);
    run_candidates(
        ctx, p, p.bwd_filter, "cudnnConvolutionBackwardFilter",
        [&](int a, size_t* b) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.dnn, p.x.d, p.y.d, p.conv, p.w,
                                                                cudnnConvolutionBwdFilterAlgo_t(a), b);
        },
        [&](int a, void* ws, size_t bytes) {
          return cudnnConvolutionBackwardFilter(ctx.dnn, &kOne, p.x.d, src, p.y.d, diff_dst, p.conv,
                                                cudnnConvolutionBwdFilterAlgo_t(a), ws, bytes, &kZero, p.w, diff_wei);
        });
  }
  if (diff_bias) {
    KILN_CHECK(d.has_bias, "cudnn conv2d_bwd_weights: a bias gradient without has_bias (", d.str(), ")");
    // diff_dst (any data type) summed in float32 into the float32 bias descriptor. Summing half
    // data into a half scratch instead would round the gradient to the data type; kiln's own
    // reduction keeps float32 where cuDNN declines.
    bool use_cudnn = false;
    {
      std::lock_guard<std::mutex> lock(p.mu);
      use_cudnn = p.bias_grad_cudnn;
    }
    if (use_cudnn) {
      const cudnnStatus_t s =
          cudnnConvolutionBackwardBias(ctx.dnn, &kOne, p.y.d, diff_dst, &kZero, p.bias.d, diff_bias);
      if (s == CUDNN_STATUS_SUCCESS) return;
      if (!is_not_supported(s) && !is_bad_param(s))
        detail::throw_cudnn(s, "cudnnConvolutionBackwardBias", "conv2d_bwd_weights (bias) " + d.str(), __FILE__,
                            __LINE__);
      std::lock_guard<std::mutex> lock(p.mu);
      p.bias_grad_cudnn = false;
    }
    KILN_CHECK(cuda::supports_conv_bias_grad(bd), "cudnn conv2d_bwd_weights: cuDNN declined the bias gradient and ",
               "kiln's CUDA reduction does not take ", d.str());
    cuda::conv2d_bias_grad(bd, diff_dst, diff_bias);
  }
}

ConvAlgoUsed conv_algo_used(const ConvDesc& desc, int direction) {
  KILN_CHECK(direction >= 0 && direction <= 2, "cudnn conv_algo_used: direction ", direction, " not 0, 1 or 2");
  Context& ctx = context();
  ConvDesc d = desc;
  if (direction != kFwd) d.relu = false;
  Plan& p = plan_for(d, ctx.device);
  cudnnMathType_t dm = CUDNN_DEFAULT_MATH;
  KILN_CUDNN_CHECK(cudnnGetConvolutionMathType(p.conv, &dm), "conv_algo_used ", d.str());
  std::lock_guard<std::mutex> lock(p.mu);
  const Choice& c = direction == kFwd ? p.fwd : direction == kBwdData ? p.bwd_data : p.bwd_filter;
  ConvAlgoUsed u;
  u.descriptor_math = int(dm);
  u.fused = direction == kFwd && d.has_bias && d.relu && p.fused_ok;
  u.bias_grad_cudnn = p.bias_grad_cudnn;
  if (c.ready && c.first < c.candidates.size()) {
    u.algo = c.candidates[c.first].algo;
    u.math = int(c.candidates[c.first].math);
  }
  return u;
}

}  // namespace kiln::cudnn

#endif  // KILN_HAVE_CUDNN
