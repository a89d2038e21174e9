// The `ref` backend on the CPU: kiln's naive reference kernels (kernels/cpu/ref), templated on the
// element type, instantiated here for float and double (elementwise ops also for the integers). They are the oracle of every other
// kernel (tests/oracle runs each registered candidate against them in double), so they are
// registered with the lowest priority: `auto` takes them only where nothing else applies.
// Which descriptors they take is the native kernels' supports() where the two agree on the
// problem (the ref kernels compute everything those accept in float and double).
#include <type_traits>

#include "engine/backends/supports.h"
#include "engine/dispatch.h"
#include "kernels/common/dtype.h"
#include "kernels/cpu/native/concat.h"
#include "kernels/cpu/native/index.h"
#include "kernels/cpu/native/loss.h"
#include "kernels/cpu/native/multi_tensor.h"
#include "kernels/cpu/native/norm.h"
#include "kernels/cpu/native/optim.h"
#include "kernels/cpu/native/pool.h"
#include "kernels/cpu/native/reduce.h"
#include "kernels/cpu/native/shape.h"
#include "kernels/cpu/ref/concat.h"
#include "kernels/cpu/ref/conv.h"
#include "kernels/cpu/ref/elementwise.h"
#include "kernels/cpu/ref/gemm.h"
#include "kernels/cpu/ref/index.h"
#include "kernels/cpu/ref/linear.h"
#include "kernels/cpu/ref/loss.h"
#include "kernels/cpu/ref/multi_tensor.h"
#include "kernels/cpu/ref/norm.h"
#include "kernels/cpu/ref/optim.h"
#include "kernels/cpu/ref/pool.h"
#include "kernels/cpu/ref/reduce.h"
#include "kernels/cpu/ref/rnn.h"
#include "kernels/cpu/ref/shape.h"

namespace kiln {
namespace {


// --- elementwise
template <class T>
void ref_unary_t(const UnaryDesc& d, const void* s, void* o) {
  ref::unary<T>(d, static_cast<const T*>(s), static_cast<T*>(o));
}
template <class T>
void ref_binary_t(const BinaryDesc& d, const void* a, const void* b, void* o) {
  ref::binary<T>(d, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(o));
}
// Calls f(T{}) for the integer dtypes.
template <class F>
void visit_integral(DType t, F&& f) {
  if (t == DType::int32) f(int32_t{});
  else if (t == DType::int64) f(int64_t{});
  else f(uint8_t{});
}
void ref_unary(const UnaryDesc& d, const void* s, void* o) {
  if (is_integral(d.dtype))
    return visit_integral(d.dtype, [&](auto t) {
      using T = decltype(t);
      ref::int_unary<T>(d, static_cast<const T*>(s), static_cast<T*>(o));
    });
  d.dtype == DType::float64 ? ref_unary_t<double>(d, s, o) : ref_unary_t<float>(d, s, o);
}
void ref_binary(const BinaryDesc& d, const void* a, const void* b, void* o) {
  if (is_integral(d.dtype))
    return visit_integral(d.dtype, [&](auto t) {
      using T = decltype(t);
      ref::int_binary<T>(d, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(o));
    });
  d.dtype == DType::float64 ? ref_binary_t<double>(d, a, b, o) : ref_binary_t<float>(d, a, b, o);
}
bool ref_supports_unary(const UnaryDesc& d) {
  return takes_float(d) || (is_integral(d.dtype) && integer_unary_op(d.op));
}
bool ref_supports_binary(const BinaryDesc& d) {
  return takes_float(d) || (is_integral(d.dtype) && integer_binary_op(d.op));
}
void ref_compare(const CompareDesc& d, const void* a, const void* b, void* o) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::compare<T>(d, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<bool*>(o));
  });
}
void ref_copy(const CopyDesc& d, const void* s, void* o) {
  visit_dtype(d.src_dtype, [&](auto st) {
    visit_dtype(d.dst_dtype, [&](auto ot) {
      ref::copy(d, static_cast<const decltype(st)*>(s), static_cast<decltype(ot)*>(o));
    });
  });
}
void ref_fill(const FillDesc& d, void* o) {
  visit_dtype(d.dtype, [&](auto t) { ref::fill(d, static_cast<decltype(t)*>(o)); });
}
void ref_random(const RandomDesc& d, void* o) {
  visit_dtype(d.dtype, [&](auto t) { ref::random(d, static_cast<decltype(t)*>(o)); });
}

// --- indexing
void ref_gather(const GatherDesc& d, const void* s, const int64_t* idx, void* o) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::gather<T>(d, static_cast<const T*>(s), idx, static_cast<T*>(o));
  });
}
void ref_scatter(const ScatterDesc& d, const void* s, const int64_t* idx, void* o) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::scatter<T>(d, static_cast<const T*>(s), idx, static_cast<T*>(o));
  });
}
void ref_where(const WhereDesc& d, const void* c, const void* a, const void* b, void* o) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::where<T>(d, static_cast<const bool*>(c), static_cast<const T*>(a), static_cast<const T*>(b),
                  static_cast<T*>(o));
  });
}
void ref_sort(const SortDesc& d, const void* s, void* v, int64_t* idx) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>) ref::sort<T>(d, static_cast<const T*>(s), static_cast<T*>(v), idx);
  });
}
void ref_cumsum(const ScanDesc& d, const void* s, void* o) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>) ref::cumsum<T>(d, static_cast<const T*>(s), static_cast<T*>(o));
  });
}

// --- reduce
template <class T>
void ref_reduce_t(const ReduceDesc& d, const void* s, void* o, int64_t* idx) {
  ref::reduce<T>(d, static_cast<const T*>(s), static_cast<T*>(o), idx);
}
void ref_reduce(const ReduceDesc& d, const void* s, void* o, int64_t* idx) {
  if (d.dtype == DType::int64) return ref_reduce_t<int64_t>(d, s, o, idx);
  d.dtype == DType::float64 ? ref_reduce_t<double>(d, s, o, idx) : ref_reduce_t<float>(d, s, o, idx);
}
void ref_index_scatter(const IndexScatterDesc& d, const void* s, const int64_t* idx, void* o) {
  if (d.dtype == DType::float64)
    ref::index_scatter<double>(d, static_cast<const double*>(s), idx, static_cast<double*>(o));
  else
    ref::index_scatter<float>(d, static_cast<const float*>(s), idx, static_cast<float*>(o));
}

// --- linalg

void ref_gemm(const GemmDesc& d, const void* a, const void* b, void* c) {
  if (d.dtype == DType::float64)
    ref::gemm<double>(d, static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(c));
  else
    ref::gemm<float>(d, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(c));
}

bool ref_supports_linear(const LinearDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::float64) && d.n >= 0 && d.ic >= 0 && d.oc >= 0;
}

template <class T>
const T* cp(const void* p) {
  return static_cast<const T*>(p);
}
template <class T>
T* mp(void* p) {
  return static_cast<T*>(p);
}

void ref_linear_fwd(const LinearDesc& d, const void* src, const void* wei, const void* bias, void* dst) {
  if (d.dtype == DType::float64)
    ref::linear_fwd<double>(d, cp<double>(src), cp<double>(wei), cp<double>(bias), mp<double>(dst));
  else
    ref::linear_fwd<float>(d, cp<float>(src), cp<float>(wei), cp<float>(bias), mp<float>(dst));
}

void ref_linear_bwd_data(const LinearDesc& d, const void* diff_dst, const void* wei, void* diff_src) {
  if (d.dtype == DType::float64)
    ref::linear_bwd_data<double>(d, cp<double>(diff_dst), cp<double>(wei), mp<double>(diff_src));
  else
    ref::linear_bwd_data<float>(d, cp<float>(diff_dst), cp<float>(wei), mp<float>(diff_src));
}

void ref_linear_bwd_weights(const LinearDesc& d, const void* src, const void* diff_dst, void* diff_wei,
                                   void* diff_bias) {
  if (d.dtype == DType::float64)
    ref::linear_bwd_weights<double>(d, cp<double>(src), cp<double>(diff_dst), mp<double>(diff_wei),
                                    mp<double>(diff_bias));
  else
    ref::linear_bwd_weights<float>(d, cp<float>(src), cp<float>(diff_dst), mp<float>(diff_wei), mp<float>(diff_bias));
}

// --- conv
template <class T>
void ref_fwd_t(const ConvDesc& d, const void* s, const void* w, const void* b, void* o) {
  ref::conv2d_fwd<T>(d, static_cast<const T*>(s), static_cast<const T*>(w), static_cast<const T*>(b),
                     static_cast<T*>(o));
}
template <class T>
void ref_bwd_data_t(const ConvDesc& d, const void* dd, const void* w, void* ds) {
  ref::conv2d_bwd_data<T>(d, static_cast<const T*>(dd), static_cast<const T*>(w), static_cast<T*>(ds));
}
template <class T>
void ref_bwd_weights_t(const ConvDesc& d, const void* s, const void* dd, void* dw, void* db) {
  ref::conv2d_bwd_weights<T>(d, static_cast<const T*>(s), static_cast<const T*>(dd), static_cast<T*>(dw),
                             static_cast<T*>(db));
}
void ref_fwd(const ConvDesc& d, const void* s, const void* w, const void* b, void* o) {
  d.dtype == DType::float64 ? ref_fwd_t<double>(d, s, w, b, o) : ref_fwd_t<float>(d, s, w, b, o);
}
void ref_bwd_data(const ConvDesc& d, const void* dd, const void* w, void* ds) {
  d.dtype == DType::float64 ? ref_bwd_data_t<double>(d, dd, w, ds) : ref_bwd_data_t<float>(d, dd, w, ds);
}
void ref_bwd_weights(const ConvDesc& d, const void* s, const void* dd, void* dw, void* db) {
  d.dtype == DType::float64 ? ref_bwd_weights_t<double>(d, s, dd, dw, db) : ref_bwd_weights_t<float>(d, s, dd, dw, db);
}

// --- pool
void ref_pool_fwd(const PoolDesc& d, const void* s, void* o, int64_t* idx) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::pool_fwd<T>(d, static_cast<const T*>(s), static_cast<T*>(o), idx);
  });
}
void ref_pool_bwd(const PoolDesc& d, const void* g, const int64_t* idx, void* o) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::pool_bwd<T>(d, static_cast<const T*>(g), idx, static_cast<T*>(o));
  });
}
void ref_adaptive_fwd(const AdaptivePoolDesc& d, const void* s, void* o, int64_t* idx) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::adaptive_pool_fwd<T>(d, static_cast<const T*>(s), static_cast<T*>(o), idx);
  });
}
void ref_adaptive_bwd(const AdaptivePoolDesc& d, const void* g, const int64_t* idx, void* o) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::adaptive_pool_bwd<T>(d, static_cast<const T*>(g), idx, static_cast<T*>(o));
  });
}
void ref_lrn_fwd(const LrnDesc& d, const void* s, void* o, void* sc) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::lrn_fwd<T>(d, static_cast<const T*>(s), static_cast<T*>(o), static_cast<T*>(sc));
  });
}
void ref_lrn_bwd(const LrnDesc& d, const void* s, const void* y, const void* sc, const void* g, void* o) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::lrn_bwd<T>(d, static_cast<const T*>(s), static_cast<const T*>(y), static_cast<const T*>(sc),
                    static_cast<const T*>(g), static_cast<T*>(o));
  });
}

// --- norm
void ref_bn_fwd(const BatchNormDesc& d, const void* src, const void* wei, const void* bias, void* rm, void* rv,
                void* dst, void* sm, void* si) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::batch_norm_fwd<T>(d, static_cast<const T*>(src), static_cast<const T*>(wei), static_cast<const T*>(bias),
                           static_cast<T*>(rm), static_cast<T*>(rv), static_cast<T*>(dst), static_cast<T*>(sm),
                           static_cast<T*>(si));
  });
}
void ref_bn_bwd(const BatchNormDesc& d, const void* src, const void* dy, const void* wei, const void* sm,
                const void* si, void* dx, void* dw, void* db) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::batch_norm_bwd<T>(d, static_cast<const T*>(src), static_cast<const T*>(dy), static_cast<const T*>(wei),
                           static_cast<const T*>(sm), static_cast<const T*>(si), static_cast<T*>(dx),
                           static_cast<T*>(dw), static_cast<T*>(db));
  });
}
void ref_dropout_fwd(const DropoutDesc& d, const void* src, void* dst, uint8_t* mask) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::dropout_fwd<T>(d, static_cast<const T*>(src), static_cast<T*>(dst), mask);
  });
}
void ref_dropout_bwd(const DropoutDesc& d, const void* dy, const uint8_t* mask, void* dx) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::dropout_bwd<T>(d, static_cast<const T*>(dy), mask, static_cast<T*>(dx));
  });
}
void ref_softmax_fwd(const SoftmaxDesc& d, const void* src, void* dst) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::softmax_fwd<T>(d, static_cast<const T*>(src), static_cast<T*>(dst));
  });
}
void ref_softmax_bwd(const SoftmaxDesc& d, const void* y, const void* dy, void* dx) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::softmax_bwd<T>(d, static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx));
  });
}

// --- recurrent
void ref_rnn_fwd(const RnnDesc& d, const void* src, const void* h0, const void* c0, const void* w_ih, const void* w_hh,
                 const void* b_ih, const void* b_hh, const void* w_hr, const int64_t* lengths, void* dst, void* hn,
                 void* cn) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto c = [](const void* p) { return static_cast<const T*>(p); };
    ref::rnn_fwd<T>(d, c(src), c(h0), c(c0), c(w_ih), c(w_hh), c(b_ih), c(b_hh), c(w_hr), lengths,
                    static_cast<T*>(dst), static_cast<T*>(hn), static_cast<T*>(cn));
  });
}
void ref_rnn_bwd(const RnnDesc& d, const void* src, const void* h0, const void* c0, const void* w_ih, const void* w_hh,
                 const void* b_ih, const void* b_hh, const void* w_hr, const int64_t* lengths, const void* diff_dst,
                 const void* diff_hn, const void* diff_cn, void* diff_src, void* diff_h0, void* diff_c0,
                 void* diff_w_ih, void* diff_w_hh, void* diff_b_ih, void* diff_b_hh, void* diff_w_hr) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto c = [](const void* p) { return static_cast<const T*>(p); };
    auto o = [](void* p) { return static_cast<T*>(p); };
    ref::rnn_bwd<T>(d, c(src), c(h0), c(c0), c(w_ih), c(w_hh), c(b_ih), c(b_hh), c(w_hr), lengths, c(diff_dst),
                    c(diff_hn), c(diff_cn), o(diff_src), o(diff_h0), o(diff_c0), o(diff_w_ih), o(diff_w_hh),
                    o(diff_b_ih), o(diff_b_hh), o(diff_w_hr));
  });
}

// --- loss
void ref_ce_fwd(const ClassLossDesc& d, const void* src, const int64_t* target, void* dst, void* lse) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::cross_entropy_fwd<T>(d, static_cast<const T*>(src), target, static_cast<T*>(dst), static_cast<T*>(lse));
  });
}
void ref_ce_bwd(const ClassLossDesc& d, const void* src, const int64_t* target, const void* lse, const void* dy,
                void* dx) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::cross_entropy_bwd<T>(d, static_cast<const T*>(src), target, static_cast<const T*>(lse),
                              static_cast<const T*>(dy), static_cast<T*>(dx));
  });
}
void ref_nll_fwd(const ClassLossDesc& d, const void* src, const int64_t* target, void* dst) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::nll_fwd<T>(d, static_cast<const T*>(src), target, static_cast<T*>(dst));
  });
}
void ref_nll_bwd(const ClassLossDesc& d, const int64_t* target, const void* dy, void* dx) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::nll_bwd<T>(d, target, static_cast<const T*>(dy), static_cast<T*>(dx));
  });
}
void ref_point_fwd(const PointLossDesc& d, const void* x, const void* t, const void* pw, void* dst) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::point_loss_fwd<T>(d, static_cast<const T*>(x), static_cast<const T*>(t), static_cast<const T*>(pw),
                           static_cast<T*>(dst));
  });
}
void ref_point_bwd(const PointLossDesc& d, const void* x, const void* t, const void* pw, const void* dy, void* dx,
                   void* dt) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::point_loss_bwd<T>(d, static_cast<const T*>(x), static_cast<const T*>(t), static_cast<const T*>(pw),
                           static_cast<const T*>(dy), static_cast<T*>(dx), static_cast<T*>(dt));
  });
}

// --- optim
void ref_sgd(const SGDStepDesc& d, void* p, const void* g, void* b) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::sgd_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(b));
  });
}
void ref_adam(const AdamStepDesc& d, void* p, const void* g, void* m, void* v) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::adam_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(m), static_cast<T*>(v));
  });
}
void ref_lars(const LarsStepDesc& d, void* p, const void* g, void* b) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::lars_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(b));
  });
}
void ref_sum_squares(const VecDesc& d, const void* x, double* out) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::sum_squares<T>(d, static_cast<const T*>(x), out);
  });
}
void ref_scale(const VecDesc& d, void* x) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::scale<T>(d, static_cast<T*>(x));
  });
}

void ref_multi_step(const MultiTensorDesc& d, const TensorListEntry* entries) {
  visit_float(d.dtype, [&](auto tag) { ref::multi_tensor_step<decltype(tag)>(d, entries); });
}

void ref_multi_sum_squares(const MultiTensorDesc& d, const TensorListEntry* entries, bool of_grad, double* out) {
  visit_float(d.dtype, [&](auto tag) { ref::multi_tensor_sum_squares<decltype(tag)>(d, entries, of_grad, out); });
}

// --- shape
void ref_concat(const ConcatDesc& d, const void* const* srcs, void* dst) {
  // Copies: the element type only needs the right size.
  switch (element_size(d.dtype)) {
    case 8: return ref::concat<int64_t>(d, srcs, dst);
    case 4: return ref::concat<int32_t>(d, srcs, dst);
    case 2: return ref::concat<int16_t>(d, srcs, dst);
    default: return ref::concat<int8_t>(d, srcs, dst);
  }
}
void ref_sum(const SumDesc& d, const void* const* srcs, void* dst) {
  visit_float(d.dtype, [&](auto t) { ref::sum<decltype(t)>(d, srcs, dst); });
}

void ref_pad_fwd(const PadDesc& d, const void* s, void* o) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::pad_fwd<T>(d, static_cast<const T*>(s), static_cast<T*>(o));
  });
}
void ref_pad_bwd(const PadDesc& d, const void* g, void* o) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::pad_bwd<T>(d, static_cast<const T*>(g), static_cast<T*>(o));
  });
}
void ref_upsample_fwd(const UpsampleDesc& d, const void* s, void* o) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::upsample_fwd<T>(d, static_cast<const T*>(s), static_cast<T*>(o));
  });
}
void ref_upsample_bwd(const UpsampleDesc& d, const void* g, void* o) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    ref::upsample_bwd<T>(d, static_cast<const T*>(g), static_cast<T*>(o));
  });
}

}  // namespace

void register_cpu_ref(BackendRegistrar& r) {
  r.add<kernel_op::unary>(ref_supports_unary, ref_unary);
  r.add<kernel_op::binary>(ref_supports_binary, ref_binary);
  r.add<kernel_op::compare>(nullptr, ref_compare);
  r.add<kernel_op::copy>(nullptr, ref_copy);
  r.add<kernel_op::fill>(nullptr, ref_fill);
  r.add<kernel_op::random>(nullptr, ref_random);
  r.add<kernel_op::reduce>(native::supports_reduce, ref_reduce);
  r.add<kernel_op::index_scatter>(takes_float<IndexScatterDesc>, ref_index_scatter);
  r.add<kernel_op::gather>(nullptr, ref_gather);
  r.add<kernel_op::scatter>(nullptr, ref_scatter);
  r.add<kernel_op::where>(nullptr, ref_where);
  r.add<kernel_op::sort>(native::supports_sort, ref_sort);
  r.add<kernel_op::cumsum>(native::supports_cumsum, ref_cumsum);

  r.add<kernel_op::gemm>(takes_float<GemmDesc>, ref_gemm);
  r.add<kernel_op::linear_fwd>(ref_supports_linear, ref_linear_fwd);
  r.add<kernel_op::linear_bwd_data>(ref_supports_linear, ref_linear_bwd_data);
  r.add<kernel_op::linear_bwd_weights>(ref_supports_linear, ref_linear_bwd_weights);

  r.add<kernel_op::conv2d_fwd>(takes_float<ConvDesc>, ref_fwd);
  r.add<kernel_op::conv2d_bwd_data>(takes_float<ConvDesc>, ref_bwd_data);
  r.add<kernel_op::conv2d_bwd_weights>(takes_float<ConvDesc>, ref_bwd_weights);

  r.add<kernel_op::pool_fwd>(native::supports_pool, ref_pool_fwd);
  r.add<kernel_op::pool_bwd>(native::supports_pool, ref_pool_bwd);
  r.add<kernel_op::adaptive_pool_fwd>(native::supports_adaptive_pool, ref_adaptive_fwd);
  r.add<kernel_op::adaptive_pool_bwd>(native::supports_adaptive_pool, ref_adaptive_bwd);
  r.add<kernel_op::lrn_fwd>(native::supports_lrn, ref_lrn_fwd);
  r.add<kernel_op::lrn_bwd>(native::supports_lrn, ref_lrn_bwd);

  r.add<kernel_op::batch_norm_fwd>(native::supports_batch_norm, ref_bn_fwd);
  r.add<kernel_op::batch_norm_bwd>(native::supports_batch_norm, ref_bn_bwd);
  r.add<kernel_op::dropout_fwd>(native::supports_dropout, ref_dropout_fwd);
  r.add<kernel_op::dropout_bwd>(native::supports_dropout, ref_dropout_bwd);
  r.add<kernel_op::softmax_fwd>(native::supports_softmax, ref_softmax_fwd);
  r.add<kernel_op::softmax_bwd>(native::supports_softmax, ref_softmax_bwd);

  r.add<kernel_op::cross_entropy_fwd>(native::supports_class_loss, ref_ce_fwd);
  r.add<kernel_op::cross_entropy_bwd>(native::supports_class_loss, ref_ce_bwd);
  r.add<kernel_op::nll_fwd>(native::supports_class_loss, ref_nll_fwd);
  r.add<kernel_op::nll_bwd>(native::supports_class_loss, ref_nll_bwd);
  r.add<kernel_op::point_loss_fwd>(native::supports_point_loss, ref_point_fwd);
  r.add<kernel_op::point_loss_bwd>(native::supports_point_loss, ref_point_bwd);

  r.add<kernel_op::rnn_fwd>(takes_float<RnnDesc>, ref_rnn_fwd);
  r.add<kernel_op::rnn_bwd>(takes_float<RnnDesc>, ref_rnn_bwd);

  r.add<kernel_op::sgd_step>(native::supports_optim_sgd, ref_sgd);
  r.add<kernel_op::adam_step>(native::supports_optim_adam, ref_adam);
  r.add<kernel_op::lars_step>(native::supports_optim_lars, ref_lars);
  r.add<kernel_op::sum_squares>(native::supports_optim_vec, ref_sum_squares);
  r.add<kernel_op::scale>(native::supports_optim_vec, ref_scale);
  r.add<kernel_op::multi_tensor_step>(native::supports_multi_tensor, ref_multi_step);
  r.add<kernel_op::multi_tensor_sum_squares>(native::supports_multi_tensor, ref_multi_sum_squares);

  r.add<kernel_op::concat>(native::supports_concat, ref_concat);
  r.add<kernel_op::sum>(native::supports_sum, ref_sum);
  r.add<kernel_op::pad_fwd>(native::supports_pad, ref_pad_fwd);
  r.add<kernel_op::pad_bwd>(native::supports_pad, ref_pad_bwd);
  r.add<kernel_op::upsample_fwd>(native::supports_upsample, ref_upsample_fwd);
  r.add<kernel_op::upsample_bwd>(native::supports_upsample, ref_upsample_bwd);
}

}  // namespace kiln
