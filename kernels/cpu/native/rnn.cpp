#include "kernels/cpu/native/rnn.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "kernels/common/parallel.h"
#include "kernels/common/rnn_driver.h"
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/native/rnn_gates.h"
#include "kernels/cpu/native/thread_buffer.h"

namespace kiln::native {
namespace {

// The CPU side of the driver: host memory, kiln's sgemm, passes split over the OpenMP team (the
// two gate passes by rows and column blocks, rnn_gates.h).
struct CpuDev {
  // When set, the next alloc hands out this buffer instead of fresh memory (once: a second
  // buffer would overlap it), up to kReuseMax elements: a thread keeps at most 64 MiB after an
  // inference; a larger state is allocated per call (its compute dwarfs the page faults).
  ThreadBuffer<float>* reuse = nullptr;
  static constexpr int64_t kReuseMax = int64_t(16) << 20;

  template <class T>
  rnn::Buffer<T> alloc(int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      ThreadBuffer<float>* r = reuse;
      reuse = nullptr;
      if (r && n <= kReuseMax) {
        rnn::Buffer<T> b;
        b.ptr = r->get(size_t(n));
        return b;
      }
    }
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
  void pass(const rnn::StepFwd<float>& a, int64_t) { rnn_gates_fwd(a); }
  void pass(const rnn::StepBwd<float>& a, int64_t) { rnn_gates_bwd(a); }
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

// Runs the forward and returns what it saved. An inference forward (!d.training) saves into this
// thread's buffer, reused from call to call (the saved arrays are ~145 MB for lstm-h1024-t25 at
// batch 128, and fresh memory costs its page faults on every call): valid until this thread's
// next inference forward. A training forward's state outlives the call, in memory of its own.
std::shared_ptr<State> run_forward(const RnnDesc& d, const void* src, const void* h0, const void* c0,
                                   const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh,
                                   const void* w_hr, const int64_t* lengths, void* dst, void* hn, void* cn) {
  thread_local ThreadBuffer<float> inference_state("rnn_fwd (native): inference state");
  CpuDev dev;
  if (!d.training) dev.reuse = &inference_state;
  auto state = std::make_shared<State>();
  state->d = d;
  state->saved = rnn::alloc_saved<float>(dev, d);
  rnn::forward(dev, d, fwd_args(src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, dst, hn, cn), state->saved);
  return state;
}

}  // namespace

bool supports_rnn(const RnnDesc& d) { return d.dtype == DType::float32; }

void rnn_fwd(const RnnDesc& d, KernelPayload& payload, const void* src, const void* h0, const void* c0,
             const void* w_ih, const void* w_hh, const void* b_ih, const void* b_hh, const void* w_hr,
             const int64_t* lengths, void* dst, void* hn, void* cn) {
  auto state = run_forward(d, src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, dst, hn, cn);
  // Inference keeps nothing (its state lives in the thread's buffer, which the next call overwrites).
  if (d.training) payload.state = std::move(state);
  else payload.state.reset();
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
    const int64_t n = d.dst_elems() + d.state_elems() + d.cell_elems();
    rnn::Buffer<float> out = dev.alloc<float>(n);
    state = run_forward(d, src, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, lengths, out.ptr, out.ptr + d.dst_elems(),
                        d.mode == RnnMode::lstm ? out.ptr + d.dst_elems() + d.state_elems() : nullptr);
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
