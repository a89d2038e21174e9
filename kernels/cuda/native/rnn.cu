// kiln's own CUDA recurrent layer (declared in rnn.h). The per-step passes are the host+device
// functions of kernels/common/rnn.h, one grid-stride kernel each; the GEMMs kiln's own
// (gemm.h). Scratch and saved state are stream-ordered device memory (launch.h's Scratch).
// Test (emulated): ctest --test-dir build -R oracle_emu
#include "kernels/cuda/native/rnn.h"

#include <memory>

#include "kernels/common/rnn_driver.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/native/gemm.h"
#include "kernels/cuda/native/grid.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

template <class A>
KILN_GLOBAL void pass_kernel(A a, int64_t count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    rnn::apply(a, i);
}

template <class T>
KILN_GLOBAL void fill_kernel(T* p, int64_t n, T v) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

template <class T>
KILN_GLOBAL void copy_kernel(T* dst, const T* src, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// The CUDA side of the driver (kernels/common/rnn_driver.h).
struct CudaDev {
  template <class T>
  rnn::Buffer<T> alloc(int64_t n) {
    auto s = std::make_shared<Scratch>(size_t(n) * sizeof(T), current_stream());
    rnn::Buffer<T> b;
    b.ptr = s->as<T>();
    b.keep = std::move(s);
    return b;
  }
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc) {
    sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  }
  template <class A>
  void pass(const A& a, int64_t count) {
    if (count > 0) KILN_LAUNCH((pass_kernel<A>), dim3(grid::blocks_for(count)), dim3(grid::kThreads), 0, current_stream(), a, count);
  }
  void copy(float* dst, const float* src, int64_t n) {
    if (n > 0)
      KILN_LAUNCH((copy_kernel<float>), dim3(grid::blocks_for(n)), dim3(grid::kThreads), 0, current_stream(), dst, src, n);
  }
  void fill(float* p, int64_t n, float v) {
    if (n > 0)
      KILN_LAUNCH((fill_kernel<float>), dim3(grid::blocks_for(n)), dim3(grid::kThreads), 0, current_stream(), p, n, v);
  }
};

struct State {
  RnnDesc d;
  rnn::Saved<float> saved;
};

}  // namespace

bool supports_rnn(const RnnDesc& d) { return d.dtype == DType::float32; }

void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, void* dst, void* hn, void* cn) {
  CudaDev dev;
  auto state = std::make_shared<State>();
  state->d = d;
  state->saved = rnn::alloc_saved<float>(dev, d);
  auto f = [](const void* p) { return static_cast<const float*>(p); };
  const rnn::FwdArgs<float> a{f(src), f(h0), f(c0), f(w_ih), f(w_hh), f(b_ih), f(b_hh), f(w_hr), lengths,
                              static_cast<float*>(dst), static_cast<float*>(hn), static_cast<float*>(cn)};
  rnn::forward(dev, d, a, state->saved);
  payload.state = std::move(state);
}

void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void* diff_w_hr) {
  CudaDev dev;
  auto state = std::static_pointer_cast<const State>(payload.state);
  rnn::Buffer<float> out;
  if (!state || !same_problem(state->d, d)) {
    // No forward state of this problem: recompute it (outputs into scratch).
    KernelPayload own;
    out = dev.alloc<float>(d.dst_elems() + d.state_elems() + d.cell_elems());
    rnn_fwd(d, own, src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, out.ptr, out.ptr + d.dst_elems(),
            d.mode == RnnMode::lstm ? out.ptr + d.dst_elems() + d.state_elems() : nullptr);
    state = std::static_pointer_cast<const State>(own.state);
  }
  auto f = [](const void* p) { return static_cast<const float*>(p); };
  auto o = [](void* p) { return static_cast<float*>(p); };
  const rnn::BwdArgs<float> a{f(src),      f(w_ih),     f(w_hh),     f(w_hr),      lengths,     f(diff_dst),
                              f(diff_hn),  f(diff_cn),  o(diff_src), o(diff_h0),   o(diff_c0),  o(diff_w_ih),
                              o(diff_w_hh), o(diff_b_ih), o(diff_b_hh), o(diff_w_hr)};
  rnn::backward(dev, d, a, state->saved);
}

KILN_CUDA_NAMESPACE_END
