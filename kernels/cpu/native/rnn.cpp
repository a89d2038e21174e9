#include "kernels/cpu/native/rnn.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/common/parallel.h"
#include "kernels/common/rnn_driver.h"
#include "kernels/cpu/native/gemm.h"

namespace kiln::native {
namespace {

// The CPU side of the driver: host memory, kiln's sgemm, passes split over the OpenMP team.
struct CpuDev {
  template <class T>
  rnn::Buffer<T> alloc(int64_t n) {
    const size_t bytes = (size_t(n) * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p) throw std::bad_alloc();
    rnn::Buffer<T> b;
    b.keep = std::shared_ptr<void>(p, std::free);
    b.ptr = static_cast<T*>(p);
    return b;
  }
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc) {
    sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  }
  template <class A>
  void pass(const A& a, int64_t count) {
    parallel_for(0, count, 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) rnn::apply(a, i);
    });
  }
  void copy(float* dst, const float* src, int64_t n) { std::memcpy(dst, src, size_t(n) * sizeof(float)); }
  void fill(float* p, int64_t n, float v) {
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  }
};

// What rnn_fwd leaves for rnn_bwd: the saved arrays and the descriptor they belong to.
struct State {
  RnnDesc d;
  rnn::Saved<float> saved;
};

rnn::FwdArgs<float> fwd_args(const void* src, const void* h0, const void* c0, const void* w_ih, const void* w_hh,
                             const void* b_ih, const void* b_hh, const void* w_hr, const int64_t* lengths, void* dst,
                             void* hn, void* cn) {
  auto f = [](const void* p) { return static_cast<const float*>(p); };
  return {f(src), f(h0), f(c0), f(w_ih), f(w_hh), f(b_ih), f(b_hh), f(w_hr), lengths, static_cast<float*>(dst),
          static_cast<float*>(hn), static_cast<float*>(cn)};
}

}  // namespace

bool supports_rnn(const RnnDesc& d) { return d.dtype == DType::float32; }

void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, void* dst, void* hn, void* cn) {
  CpuDev dev;
  auto state = std::make_shared<State>();
  state->d = d;
  state->saved = rnn::alloc_saved<float>(dev, d);
  rnn::forward(dev, d, fwd_args(src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, dst, hn, cn), state->saved);
  payload.state = std::move(state);
}

void rnn_bwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, const void* diff_dst, const void* diff_hn, const void* diff_cn, void* diff_src,
             void* diff_h0, void* diff_c0, void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh,
             void* diff_w_hr) {
  CpuDev dev;
  auto state = std::static_pointer_cast<const State>(payload.state);
  if (!state || !same_problem(state->d, d)) {
    // No forward state of this problem: recompute it (outputs into scratch).
    KernelPayload own;
    const int64_t n = d.dst_elems() + d.state_elems() + d.cell_elems();
    rnn::Buffer<float> out = dev.alloc<float>(n);
    rnn_fwd(d, own, src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, out.ptr, out.ptr + d.dst_elems(),
            d.mode == RnnMode::lstm ? out.ptr + d.dst_elems() + d.state_elems() : nullptr);
    state = std::static_pointer_cast<const State>(own.state);
  }
  auto f = [](const void* p) { return static_cast<const float*>(p); };
  auto o = [](void* p) { return static_cast<float*>(p); };
  const rnn::BwdArgs<float> a{f(src),     f(w_ih),       f(w_hh),       f(w_hr),     lengths,
                              f(diff_dst), f(diff_hn),    f(diff_cn),    o(diff_src), o(diff_h0),
                              o(diff_c0),  o(diff_w_ih),  o(diff_w_hh),  o(diff_b_ih), o(diff_b_hh),
                              o(diff_w_hr)};
  rnn::backward(dev, d, a, state->saved);
}

}  // namespace kiln::native
