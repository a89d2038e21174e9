// cuDNN's recurrent layer (see rnn.h), on the v8 RNN API (cuDNN >= 8.0; not deprecated in 9).
// One call is one cuDNN layer: numLayers 1, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
// CUDNN_RNN_ALGO_STANDARD (the only algorithm with projections and per-sequence lengths),
// CUDNN_RNN_DOUBLE_BIAS (kiln's b_ih and b_hh; a layer without biases gets zeros there, as
// PyTorch does), projSize = H unless the lstm projects. Data is time-major and padded
// (CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED with CUDNN_RNN_PADDED_IO_ENABLED), sequence n having
// lengths[n] steps; cuDNN's hy / cy are each sequence's state after its last step, kiln's hn / cn.
// Numerics: float32 data and math, CUDNN_FMA_MATH (no TF32, PyTorch's choice without
// allow_tf32) unless kiln::cudnn::allow_tf32(), then CUDNN_DEFAULT_MATH. float16 (PyTorch's
// choice for half layers): CUDNN_DATA_HALF data, weights and states (cuDNN has no float32 state
// with half data), float32 math precision (the gates and the weight-gradient sums accumulate in
// float32), CUDNN_TENSOR_OP_MATH (tensor cores allowed).
// Weights: kiln keeps w_ih, w_hh, b_ih, b_hh, w_hr apart, cuDNN wants them in one packed weight
// space: cudnnGetRNNWeightParams gives each gate's matrix and bias (linLayerID 0..G-1 the input
// side, G..2G-1 the recurrent side, in kiln's gate order: i f g o for lstm, r z n for gru, whose
// n gate cuDNN also computes as tanh(W_in x + b_in + r (W_hn h + b_hn)); 8 the lstm projection),
// each a row-major block of kiln's layout, so packing is a few device-to-device copies (adjacent
// blocks merged) and the weight gradient the same copies back out of a zeroed gradient space
// cudnnRNNBackwardWeights_v8 adds into (CUDNN_WGRAD_MODE_ADD, the mode cuDNN 8 has).
// Memory: cuDNN's temporary space and every scratch buffer come from the context's workspace
// (handles.h); what the backward needs (packed weights, reserve space, the output y that cuDNN's
// backward reads, the int32 lengths on the device) is one stream-ordered allocation owned by the
// payload. An inference forward (!RnnDesc::training) runs cuDNN's inference mode with everything
// in the workspace and keeps nothing. Null state pointers are never handed to cuDNN: absent h0 /
// c0 / gradients of hn / cn read a zeroed block, unwanted hn / cn / gradients land in scratch.
// Rows past a sequence's end are zeroed by kiln itself in y, in the gradient of dst given to
// cuDNN, and in diff_src, so the contract holds whatever cuDNN does with padding.
// Built with CUDA (the kernels/cuda host rule); compiled empty where cuDNN was not found.
//   ctest -L gpu -R 'oracle_cuda|gpu.test_gpu_ops' (tests/oracle/problems_rnn.cpp, tests/gpu/test_gpu_ops.cpp)
#if defined(KILN_HAVE_CUDNN)

#include "kernels/cuda/cudnn/rnn.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cudnn/handles.h"
#include "kernels/cuda/cudnn/mapping.h"

// The legacy (non-graph) cuDNN API is deprecated in cuDNN 9 but is the one cuDNN 8 has.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kiln::cudnn {

#if CUDNN_VERSION >= 8000

namespace {

// The padding fill of y, on the host in the data's type (static: whether cuDNN copies it or keeps
// the pointer, it stays valid). All bits zero: 0 as float and as half alike.
double kPaddingFill = 0.0;

// Bytes per element of the problem's data (float32 or float16): activations, states, weights.
size_t esize(const RnnDesc& d) { return element_size(d.dtype); }
bool is_f16(const RnnDesc& d) { return d.dtype == DType::float16; }
cudnnDataType_t data_type(const RnnDesc& d) { return is_f16(d) ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT; }

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

const char* rnn_unsupported(const RnnDesc& d) {
  if (d.dtype != DType::float32 && d.dtype != DType::float16)
    return "float32 and float16 only (the engine runs bfloat16 layers in float32)";
  if (d.reverse)
    return "a reverse layer: cuDNN's unidirectional layer runs every sequence from t = 0, not from its own last step";
  if (d.P > 0 && d.mode != RnnMode::lstm) return "a projection exists for lstm only";
  for (int64_t v : {d.T, d.N, d.I, d.H, d.P, d.T * d.N * std::max(d.I, d.H), d.G() * d.H * std::max(d.I, d.H)})
    if (!fits_int32(v)) return "a size beyond int32";
  return nullptr;
}

void check_supported(const RnnDesc& d, const char* op) {
  const char* why = rnn_unsupported(d);
  KILN_CHECK(!why, "cudnn ", op, ": ", why, " (", d.str(), ")");
}

cudnnRNNMode_t cell_mode(RnnMode m) {
  switch (m) {
    case RnnMode::rnn_tanh: return CUDNN_RNN_TANH;
    case RnnMode::rnn_relu: return CUDNN_RNN_RELU;
    case RnnMode::lstm: return CUDNN_LSTM;
    case RnnMode::gru: return CUDNN_GRU;
  }
  return CUDNN_RNN_TANH;
}

// Device memory that outlives the call (the payload's), stream-ordered like launch.h's Scratch
// (which host C++ cannot use): cudaMallocAsync / cudaFreeAsync on the allocating stream, or
// cudaMalloc and a free after a stream synchronisation where the device has no memory pools.
class DeviceMemory {
 public:
  DeviceMemory(size_t bytes, cudaStream_t stream, const std::string& what) : stream_(stream) {
    if (bytes == 0) return;
#if CUDART_VERSION >= 11020
    cudaError_t e = cudaMallocAsync(&ptr_, bytes, stream);
    if (e == cudaErrorNotSupported) {
      (void)cudaGetLastError();
      sync_free_ = true;
      e = cudaMalloc(&ptr_, bytes);
    }
#else
    sync_free_ = true;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
#endif
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
      ptr_ = nullptr;
      detail::throw_cuda(e, "cudaMallocAsync",
                         ::kiln::detail::concat(what, ": ", bytes, " bytes of state saved for the backward"), __FILE__,
                         __LINE__);
    }
  }
  ~DeviceMemory() {
    if (!ptr_) return;
#if CUDART_VERSION >= 11020
    if (!sync_free_) {
      (void)cudaFreeAsync(ptr_, stream_);
      return;
    }
#endif
    (void)cudaStreamSynchronize(stream_);
    (void)cudaFree(ptr_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool sync_free_ = false;
};

// Byte offsets of the pieces of one buffer, each 256-byte aligned (cuDNN's spaces and kiln's
// float blocks alike).
class Carve {
 public:
  size_t add(size_t bytes) {
    const size_t at = total_;
    total_ += align256(bytes);
    return at;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

// The cuDNN descriptors of one problem and its lengths (RAII; the dropout descriptor, required
// by cudnnSetRNNDescriptor_v8 and unused by one layer, must outlive the RNN descriptor).
struct Descs {
  cudnnDropoutDescriptor_t dropout = nullptr;
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t h = nullptr, c = nullptr;
  Descs() = default;
  ~Descs() {
    if (x) (void)cudnnDestroyRNNDataDescriptor(x);
    if (y) (void)cudnnDestroyRNNDataDescriptor(y);
    if (h) (void)cudnnDestroyTensorDescriptor(h);
    if (c) (void)cudnnDestroyTensorDescriptor(c);
    if (rnn) (void)cudnnDestroyRNNDescriptor(rnn);
    if (dropout) (void)cudnnDestroyDropoutDescriptor(dropout);
  }
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
};

void make_descs(Context& ctx, const RnnDesc& d, const std::vector<int>& seq, const std::string& what, Descs& s) {
  const int T = int(d.T), N = int(d.N), I = int(d.I), H = int(d.H), Ho = int(d.hout());
  KILN_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&s.dropout), what);
  KILN_CUDNN_CHECK(cudnnSetDropoutDescriptor(s.dropout, ctx.dnn, 0.0f, nullptr, 0, 0), what, " (no dropout)");
  KILN_CUDNN_CHECK(cudnnCreateRNNDescriptor(&s.rnn), what);
  const cudnnMathType_t math = is_f16(d) ? CUDNN_TENSOR_OP_MATH : allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  const cudnnDataType_t data = data_type(d);
  KILN_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(s.rnn, CUDNN_RNN_ALGO_STANDARD, cell_mode(d.mode), CUDNN_RNN_DOUBLE_BIAS,
                                            CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, data, CUDNN_DATA_FLOAT, math,
                                            I, H, Ho, 1, s.dropout, CUDNN_RNN_PADDED_IO_ENABLED),
                   what, " (math type ", math_type_name(int(math)), ")");
  KILN_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&s.x), what);
  KILN_CUDNN_CHECK(cudnnSetRNNDataDescriptor(s.x, data, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, N, I,
                                             seq.data(), &kPaddingFill),
                   what, " (x [", T, ", ", N, ", ", I, "])");
  KILN_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&s.y), what);
  KILN_CUDNN_CHECK(cudnnSetRNNDataDescriptor(s.y, data, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, N, Ho,
                                             seq.data(), &kPaddingFill),
                   what, " (y [", T, ", ", N, ", ", Ho, "])");
  // h [layers * directions = 1, N, Hout]; c [1, N, H] (lstm; the other cells ignore it).
  const int hdim[3] = {1, N, Ho}, hstride[3] = {N * Ho, Ho, 1};
  const int cdim[3] = {1, N, H}, cstride[3] = {N * H, H, 1};
  KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s.h), what);
  KILN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(s.h, data, 3, hdim, hstride), what, " (h [1, ", N, ", ", Ho,
                   "])");
  KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s.c), what);
  KILN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(s.c, data, 3, cdim, cstride), what, " (c [1, ", N, ", ", H,
                   "])");
}

// kiln's separate weight tensors, in the order the copies walk them.
enum Tensor5 { kWih, kWhh, kBih, kBhh, kWhr, kTensors };

// Where each gate's matrix and bias sit in cuDNN's weight space (byte offsets).
struct Layout {
  size_t mat[8] = {}, bias[8] = {};  // linLayerID 0..2G-1
  size_t proj = 0;                   // linLayerID 8 (lstm with P > 0)
};

size_t elems_of(cudnnTensorDescriptor_t t, const std::string& what) {
  cudnnDataType_t dt{};
  int nb = 0, dims[8] = {}, strides[8] = {};
  KILN_CUDNN_CHECK(cudnnGetTensorNdDescriptor(t, 8, &dt, &nb, dims, strides), what);
  size_t n = 1;
  for (int i = 0; i < nb; ++i) n *= size_t(dims[i]);
  return n;
}

Layout weight_layout(Context& ctx, const RnnDesc& d, cudnnRNNDescriptor_t rnn, char* space, size_t bytes,
                     const std::string& what) {
  Layout L;
  TensorDesc m, b;
  const int G = int(d.G());
  const size_t H = size_t(d.H), I = size_t(d.I), Ho = size_t(d.hout()), P = size_t(d.P), es = esize(d);
  auto place = [&](void* p, size_t want, int id, const char* kind) {
    KILN_CHECK(p, what, ": cudnnGetRNNWeightParams gave no ", kind, " for linLayerID ", id);
    const size_t off = size_t(static_cast<char*>(p) - space);
    KILN_CHECK(off % es == 0 && off + want * es <= bytes, what, ": the ", kind, " of linLayerID ", id, " at byte ", off,
               " (", want, " elements) is outside the weight space of ", bytes, " bytes");
    return off;
  };
  for (int id = 0; id < 2 * G; ++id) {
    void* mp = nullptr;
    void* bp = nullptr;
    KILN_CUDNN_CHECK(cudnnGetRNNWeightParams(ctx.dnn, rnn, 0, bytes, space, id, m.d, &mp, b.d, &bp), what,
                     " (linLayerID ", id, ")");
    const size_t want = H * (id < G ? I : Ho);
    const size_t got_m = elems_of(m.d, what), got_b = elems_of(b.d, what);
    KILN_CHECK(got_m == want && got_b == H, what, ": cuDNN's linLayerID ", id, " has a ", got_m,
               "-element matrix and a ", got_b, "-element bias, kiln's gate ", want, " and ", H);
    L.mat[id] = place(mp, want, id, "matrix");
    L.bias[id] = place(bp, H, id, "bias");
  }
  if (d.P > 0) {
    void* mp = nullptr;
    void* bp = nullptr;  // the projection has no bias (cuDNN leaves it null); asked as PyTorch asks
    KILN_CUDNN_CHECK(cudnnGetRNNWeightParams(ctx.dnn, rnn, 0, bytes, space, 2 * G, m.d, &mp, b.d, &bp), what,
                     " (linLayerID ", 2 * G, ", the projection)");
    const size_t got = elems_of(m.d, what);
    KILN_CHECK(got == P * H, what, ": cuDNN's projection has ", got, " elements, kiln's w_hr ", P * H);
    L.proj = place(mp, P * H, 2 * G, "projection");
  }
  return L;
}

// The blocks between kiln's tensors and the weight space: f(tensor, byte offset in kiln's tensor,
// byte offset in the space, bytes). Each tensor's gates in order, so adjacent blocks merge.
template <class F>
void for_each_block(const RnnDesc& d, const Layout& L, F f) {
  const size_t G = size_t(d.G()), H = size_t(d.H), I = size_t(d.I), Ho = size_t(d.hout()), es = esize(d);
  for (size_t k = 0; k < G; ++k) f(kWih, k * H * I * es, L.mat[k], H * I * es);
  for (size_t k = 0; k < G; ++k) f(kWhh, k * H * Ho * es, L.mat[G + k], H * Ho * es);
  for (size_t k = 0; k < G; ++k) f(kBih, k * H * es, L.bias[k], H * es);
  for (size_t k = 0; k < G; ++k) f(kBhh, k * H * es, L.bias[G + k], H * es);
  if (d.P > 0) f(kWhr, 0, L.proj, size_t(d.P) * H * es);
}

struct Copy {
  char* dst;
  const char* src;
  size_t bytes;
};

void add_copy(std::vector<Copy>& v, char* dst, const char* src, size_t bytes) {
  if (!v.empty() && v.back().dst + v.back().bytes == dst && v.back().src + v.back().bytes == src)
    v.back().bytes += bytes;
  else
    v.push_back({dst, src, bytes});
}

void run_copies(Context& ctx, const std::vector<Copy>& v, const std::string& what, const char* why) {
  for (const Copy& c : v)
    KILN_CUDNN_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, ctx.stream), what, " (", why,
                          ")");
}

// Zeroes the rows t >= seq[n] of a time-major [T, N, width] buffer of the problem's type: one
// strided memset per sequence shorter than T.
void zero_padding(Context& ctx, void* buf, const std::vector<int>& seq, const RnnDesc& d, int64_t width,
                  const std::string& what) {
  const size_t es = esize(d);
  char* p = static_cast<char*>(buf);
  for (int64_t n = 0; n < d.N; ++n) {
    const int64_t len = seq[size_t(n)];
    if (len >= d.T) continue;
    KILN_CUDNN_CUDA_CHECK(cudaMemset2DAsync(p + size_t((len * d.N + n) * width) * es, size_t(d.N * width) * es, 0,
                                            size_t(width) * es, size_t(d.T - len), ctx.stream),
                          what, " (zeroing sequence ", n, " past its length ", len, ")");
  }
}

// lengths (device, int64) as cuDNN's host int32 array; every sequence T long without them.
std::vector<int> host_lengths(Context& ctx, const RnnDesc& d, const int64_t* lengths, const std::string& what) {
  std::vector<int> seq(size_t(d.N), int(d.T));
  if (!d.has_lengths) return seq;
  KILN_CHECK(lengths, what, ": has_lengths without a lengths pointer");
  std::vector<int64_t> h(size_t(d.N));
  KILN_CUDNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), lengths, h.size() * sizeof(int64_t), cudaMemcpyDefault, ctx.stream),
                        what, " (lengths to the host)");
  KILN_CUDNN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream), what, " (lengths to the host)");
  for (size_t n = 0; n < h.size(); ++n) {
    KILN_CHECK(h[n] >= 1 && h[n] <= d.T, what, ": lengths[", n, "] = ", h[n], " is outside [1, ", d.T, "]");
    seq[n] = int(h[n]);
  }
  return seq;
}

// What the forward leaves for the backward.
struct State {
  RnnDesc d;
  Descs descs;
  std::vector<int> seq;  // per-sequence lengths, host copy
  bool padded = false;   // some sequence shorter than T
  size_t weight_bytes = 0, reserve_bytes = 0;
  Layout layout;
  std::unique_ptr<DeviceMemory> mem;  // weight space | reserve space | y | int32 lengths
  char* weights = nullptr;
  void* reserve = nullptr;
  void* y = nullptr;  // [T, N, Hout] in the problem's type, padding zero
  int32_t* dev_seq = nullptr;
  // cudnnRNNBackwardData_v8 rewrites the reserve space: a second backward recomputes instead.
  mutable std::atomic<bool> consumed{false};
};

// The forward. Training (d.training): into a new State that keeps the packed weights, the
// reserve space and y (then copied to dst by the caller; dst unused here). Inference: cuDNN's
// inference mode, weights and lengths in the workspace, y straight into dst, nothing kept (the
// State returned holds only host bookkeeping). hn / cn may be null: scratch takes them.
std::shared_ptr<State> forward(Context& ctx, const RnnDesc& d, const std::string& what, const void* src, const void* h0,
                               const void* c0, const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh,
                               const void* w_hr, const int64_t* lengths, void* dst, void* hn, void* cn) {
  auto s = std::make_shared<State>();
  s->d = d;
  s->seq = host_lengths(ctx, d, lengths, what);
  for (int v : s->seq) s->padded = s->padded || v < d.T;
  make_descs(ctx, d, s->seq, what, s->descs);
  const cudnnForwardMode_t mode = d.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  KILN_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(ctx.dnn, s->descs.rnn, &s->weight_bytes), what);
  size_t temp_bytes = 0, reserve_bytes = 0;
  KILN_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(ctx.dnn, s->descs.rnn, mode, s->descs.x, &temp_bytes, &reserve_bytes),
                   what);
  if (d.training) s->reserve_bytes = reserve_bytes;
  const bool lstm = d.mode == RnnMode::lstm;
  const size_t es = esize(d);
  const size_t y_bytes = size_t(d.dst_elems()) * es, seq_bytes = size_t(d.N) * sizeof(int32_t);
  const size_t state_bytes = size_t(d.state_elems()) * es, cell_bytes = size_t(d.N * d.H) * es;
  const bool need_zeros = !h0 || (lstm && !c0);
  // Kept for the backward (training) or in the workspace with the call's scratch.
  Carve keep, plan;
  Carve& held = d.training ? keep : plan;
  const size_t at_w = held.add(s->weight_bytes), at_seq = held.add(seq_bytes);
  const size_t at_r = d.training ? keep.add(s->reserve_bytes) : 0, at_y = d.training ? keep.add(y_bytes) : 0;
  const size_t at_temp = plan.add(temp_bytes);
  const size_t at_zeros = need_zeros ? plan.add(cell_bytes) : 0;  // H >= Hout: serves h and c
  const size_t at_hy = hn ? 0 : plan.add(state_bytes);
  const size_t at_cy = lstm && !cn ? plan.add(cell_bytes) : 0;
  if (d.training) s->mem = std::make_unique<DeviceMemory>(keep.total(), ctx.stream, what);
  char* ws = static_cast<char*>(workspace(ctx, plan.total(), true));
  char* held_base = d.training ? s->mem->get() : ws;
  s->weights = held_base + at_w;
  s->dev_seq = reinterpret_cast<int32_t*>(held_base + at_seq);
  if (d.training) {
    s->reserve = s->mem->get() + at_r;
    s->y = s->mem->get() + at_y;
  }
  void* y = d.training ? s->y : dst;

  static_assert(sizeof(int) == sizeof(int32_t), "cuDNN's lengths are int on the host, int32_t on the device");
  // From pageable memory: cudaMemcpyAsync returns once the source is staged.
  KILN_CUDNN_CUDA_CHECK(cudaMemcpyAsync(s->dev_seq, s->seq.data(), seq_bytes, cudaMemcpyHostToDevice, ctx.stream),
                        what, " (lengths to the device)");
  s->layout = weight_layout(ctx, d, s->descs.rnn, s->weights, s->weight_bytes, what);
  if (!b_ih || !b_hh)
    KILN_CUDNN_CUDA_CHECK(cudaMemsetAsync(s->weights, 0, s->weight_bytes, ctx.stream), what, " (zero biases)");
  const char* from[kTensors] = {static_cast<const char*>(w_ih), static_cast<const char*>(w_hh),
                                static_cast<const char*>(b_ih), static_cast<const char*>(b_hh),
                                static_cast<const char*>(w_hr)};
  std::vector<Copy> copies;
  for_each_block(d, s->layout, [&](int t, size_t kiln_off, size_t space_off, size_t bytes) {
    if (from[t]) add_copy(copies, s->weights + space_off, from[t] + kiln_off, bytes);
  });
  run_copies(ctx, copies, what, "packing the weights");

  if (need_zeros)
    KILN_CUDNN_CUDA_CHECK(cudaMemsetAsync(ws + at_zeros, 0, cell_bytes, ctx.stream), what, " (zero state)");
  const void* hx = h0 ? h0 : ws + at_zeros;
  const void* cx = lstm ? (c0 ? c0 : ws + at_zeros) : nullptr;
  void* hy = hn ? hn : ws + at_hy;
  void* cy = lstm ? (cn ? cn : ws + at_cy) : nullptr;
  KILN_CUDNN_CHECK(cudnnRNNForward(ctx.dnn, s->descs.rnn, mode, s->dev_seq, s->descs.x, src, s->descs.y, y, s->descs.h,
                                   hx, hy, s->descs.c, cx, cy, s->weight_bytes, s->weights, temp_bytes, ws + at_temp,
                                   s->reserve_bytes, s->reserve),
                   what);
  if (s->padded) zero_padding(ctx, y, s->seq, d, d.hout(), what);
  return s;
}

}  // namespace

bool supports_rnn(const RnnDesc& d) { return rnn_unsupported(d) == nullptr; }

void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, void* dst, void* hn, void* cn) {
  check_supported(d, "rnn_fwd");
  const std::string what = "cudnn rnn_fwd " + d.str();
  Context& ctx = context();
  std::shared_ptr<State> s = forward(ctx, d, what, src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, dst, hn, cn);
  if (!d.training) return;  // no backward follows: y went to dst, nothing is kept
  KILN_CUDNN_CUDA_CHECK(cudaMemcpyAsync(dst, s->y, size_t(d.dst_elems()) * esize(d), cudaMemcpyDefault, ctx.stream), what,
                        " (y to dst)");
  payload.state = std::move(s);
}

void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void* diff_w_hr) {
  check_supported(d, "rnn_bwd");
  const std::string what = "cudnn rnn_bwd " + d.str();
  KILN_CHECK(d.training, what, ": a backward of an inference descriptor");
  Context& ctx = context();
  std::shared_ptr<const State> s = std::static_pointer_cast<const State>(payload.state);
  if (!s || !same_problem(s->d, d) || s->consumed.exchange(true))
    s = forward(ctx, d, what + " (recomputing the forward)", src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths,
                nullptr, nullptr, nullptr);

  size_t temp_bytes = 0, reserve_bytes = 0;
  KILN_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(ctx.dnn, s->descs.rnn, CUDNN_FWD_MODE_TRAINING, s->descs.x, &temp_bytes,
                                             &reserve_bytes),
                   what);
  KILN_CHECK(reserve_bytes == s->reserve_bytes, what, ": cuDNN asks for a reserve space of ", reserve_bytes,
             " bytes, the forward's has ", s->reserve_bytes);
  const bool lstm = d.mode == RnnMode::lstm;
  void* dw_out[kTensors] = {diff_w_ih, diff_w_hh, diff_b_ih, diff_b_hh, diff_w_hr};
  const bool want_weights = std::any_of(dw_out, dw_out + kTensors, [](void* p) { return p != nullptr; });
  const size_t es = esize(d);
  const size_t state_bytes = size_t(d.state_elems()) * es, cell_bytes = size_t(d.N * d.H) * es;
  const size_t src_bytes = size_t(d.src_elems()) * es, dst_bytes = size_t(d.dst_elems()) * es;
  const bool need_zeros = !h0 || !diff_hn || (lstm && (!c0 || !diff_cn));
  const bool own_dy = !diff_dst || s->padded;
  Carve plan;
  const size_t at_temp = plan.add(temp_bytes);
  const size_t at_dw = want_weights ? plan.add(s->weight_bytes) : 0;
  const size_t at_zeros = need_zeros ? plan.add(cell_bytes) : 0;  // H >= Hout: serves h and c
  const size_t at_dhx = diff_h0 ? 0 : plan.add(state_bytes);
  const size_t at_dcx = lstm && !diff_c0 ? plan.add(cell_bytes) : 0;
  const size_t at_dx = diff_src ? 0 : plan.add(src_bytes);
  const size_t at_dy = own_dy ? plan.add(dst_bytes) : 0;
  char* ws = static_cast<char*>(workspace(ctx, plan.total(), true));

  if (need_zeros)
    KILN_CUDNN_CUDA_CHECK(cudaMemsetAsync(ws + at_zeros, 0, cell_bytes, ctx.stream), what, " (zero state)");
  const void* zeros = ws + at_zeros;
  // dst's gradient: rows past a sequence's end are zero in kiln's contract (dst is constant
  // there), so cuDNN gets a copy with them zeroed.
  const void* dy = diff_dst;
  if (own_dy) {
    char* buf = ws + at_dy;
    if (diff_dst) {
      KILN_CUDNN_CUDA_CHECK(cudaMemcpyAsync(buf, diff_dst, dst_bytes, cudaMemcpyDefault, ctx.stream), what,
                            " (diff_dst)");
      zero_padding(ctx, buf, s->seq, d, d.hout(), what);
    } else {
      KILN_CUDNN_CUDA_CHECK(cudaMemsetAsync(buf, 0, dst_bytes, ctx.stream), what, " (zero diff_dst)");
    }
    dy = buf;
  }
  const void* hx = h0 ? h0 : zeros;
  const void* cx = lstm ? (c0 ? c0 : zeros) : nullptr;
  const void* dhy = diff_hn ? diff_hn : zeros;
  const void* dcy = lstm ? (diff_cn ? diff_cn : zeros) : nullptr;
  void* dhx = diff_h0 ? diff_h0 : ws + at_dhx;
  void* dcx = lstm ? (diff_c0 ? diff_c0 : ws + at_dcx) : nullptr;
  void* dx = diff_src ? diff_src : ws + at_dx;
  KILN_CUDNN_CHECK(cudnnRNNBackwardData_v8(ctx.dnn, s->descs.rnn, s->dev_seq, s->descs.y, s->y, dy, s->descs.x, dx,
                                           s->descs.h, hx, dhy, dhx, s->descs.c, cx, dcy, dcx, s->weight_bytes,
                                           s->weights, temp_bytes, ws + at_temp, s->reserve_bytes, s->reserve),
                   what);
  // src past a sequence's end reaches nothing: its gradient is zero whatever cuDNN left there.
  if (diff_src && s->padded) zero_padding(ctx, diff_src, s->seq, d, d.I, what);
  if (!want_weights) return;

  // After the data gradient (which leaves in the reserve space what this call reads).
  char* dweights = ws + at_dw;
  KILN_CUDNN_CUDA_CHECK(cudaMemsetAsync(dweights, 0, s->weight_bytes, ctx.stream), what, " (zero weight gradient)");
  KILN_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(ctx.dnn, s->descs.rnn, CUDNN_WGRAD_MODE_ADD, s->dev_seq, s->descs.x, src,
                                              s->descs.h, hx, s->descs.y, s->y, s->weight_bytes, dweights, temp_bytes,
                                              ws + at_temp, s->reserve_bytes, s->reserve),
                   what);
  std::vector<Copy> copies;
  for_each_block(d, s->layout, [&](int t, size_t kiln_off, size_t space_off, size_t bytes) {
    if (dw_out[t]) add_copy(copies, static_cast<char*>(dw_out[t]) + kiln_off, dweights + space_off, bytes);
  });
  run_copies(ctx, copies, what, "unpacking the weight gradient");
}

#else  // cuDNN 7: no v8 RNN API

bool supports_rnn(const RnnDesc&) { return false; }

void rnn_fwd(const RnnDesc& d, KernelPayload&, const void*, const void*, const void*, const void*, const void*,
             const void*, const void*, const void*, const int64_t*, void*, void*, void*) {
  KILN_THROW("cudnn rnn_fwd: needs cuDNN 8 or later, built with ", CUDNN_VERSION, " (", d.str(), ")");
}

void rnn_bwd(const RnnDesc& d, KernelPayload&, const void*, const void*, const void*, const void*, const void*,
             const void*, const void*, const void*, const int64_t*, const void*, const void*, const void*, void*,
             void*, void*, void*, void*, void*, void*, void*) {
  KILN_THROW("cudnn rnn_bwd: needs cuDNN 8 or later, built with ", CUDNN_VERSION, " (", d.str(), ")");
}

#endif  // CUDNN_VERSION >= 8000

}  // namespace kiln::cudnn

#endif  // KILN_HAVE_CUDNN
