#include "kernels/cpu/native/elementwise.h"

#include <type_traits>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/ref/elementwise.h"

namespace kiln::native {
namespace {

constexpr int64_t kGrain = 32768;

template <class F>
void with_unary_op(UnaryOp op, F&& f) {
#define KILN_CASE(name) case UnaryOp::name: return f(std::integral_constant<UnaryOp, UnaryOp::name>{});
  switch (op) {
    KILN_CASE(identity) KILN_CASE(neg) KILN_CASE(abs) KILN_CASE(sign) KILN_CASE(exp) KILN_CASE(log)
    KILN_CASE(sqrt) KILN_CASE(rsqrt) KILN_CASE(square) KILN_CASE(reciprocal) KILN_CASE(sin) KILN_CASE(cos)
    KILN_CASE(relu) KILN_CASE(leaky_relu) KILN_CASE(sigmoid) KILN_CASE(tanh) KILN_CASE(gelu)
    KILN_CASE(pow_scalar) KILN_CASE(add_scalar) KILN_CASE(mul_scalar) KILN_CASE(clamp_min)
  }
#undef KILN_CASE
  KILN_THROW("native unary: unknown op ", int(op));
}

template <class F>
void with_binary_op(BinaryOp op, F&& f) {
#define KILN_CASE(name) case BinaryOp::name: return f(std::integral_constant<BinaryOp, BinaryOp::name>{});
  switch (op) {
    KILN_CASE(add) KILN_CASE(sub) KILN_CASE(mul) KILN_CASE(div) KILN_CASE(maximum) KILN_CASE(minimum)
    KILN_CASE(pow) KILN_CASE(eq) KILN_CASE(ne) KILN_CASE(gt) KILN_CASE(ge) KILN_CASE(lt) KILN_CASE(le)
    KILN_CASE(relu_bwd) KILN_CASE(leaky_relu_bwd) KILN_CASE(sigmoid_bwd) KILN_CASE(tanh_bwd) KILN_CASE(gelu_bwd)
  }
#undef KILN_CASE
  KILN_THROW("native binary: unknown op ", int(op));
}

template <class T, UnaryOp OP>
void unary_impl(const UnaryDesc& d, const T* src, T* dst) {
  const T alpha = T(d.alpha);
  const StridedLoop& L = d.loop;
  parallel_for(0, L.numel(), kGrain, [&](int64_t b, int64_t e) {
    if (L.contiguous()) {
      const T* s = src + b;
      T* o = dst + b;
#pragma omp simd
      for (int64_t i = 0; i < e - b; ++i) o[i] = fn::unary<T>(OP, s[i], alpha);
      return;
    }
    for_each_run(L, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      const T* s = src + off[1];
      T* o = dst + off[0];
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = fn::unary<T>(OP, s[i * st[1]], alpha);
    });
  });
}

template <class T, BinaryOp OP>
void binary_impl(const BinaryDesc& d, const T* a, const T* bb, T* dst) {
  const T alpha = T(d.alpha);
  const StridedLoop& L = d.loop;
  parallel_for(0, L.numel(), kGrain, [&](int64_t b, int64_t e) {
    if (L.contiguous()) {
      const T* x = a + b;
      const T* y = bb + b;
      T* o = dst + b;
#pragma omp simd
      for (int64_t i = 0; i < e - b; ++i) o[i] = fn::binary<T>(OP, x[i], y[i], alpha);
      return;
    }
    for_each_run(L, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      const T* x = a + off[1];
      const T* y = bb + off[2];
      T* o = dst + off[0];
      if (st[0] == 1 && st[1] == 1 && st[2] == 0) {  // tensor op scalar-along-the-row (bias add)
        const T yv = *y;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = fn::binary<T>(OP, x[i], yv, alpha);
      } else if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = fn::binary<T>(OP, x[i], y[i], alpha);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = fn::binary<T>(OP, x[i * st[1]], y[i * st[2]], alpha);
      }
    });
  });
}

}  // namespace

bool supports_unary(const UnaryDesc& d) { return d.dtype == DType::float32 || d.dtype == DType::float64; }
bool supports_binary(const BinaryDesc& d) { return d.dtype == DType::float32 || d.dtype == DType::float64; }

void unary(const UnaryDesc& d, const void* src, void* dst) {
  with_unary_op(d.op, [&](auto op) {
    if (d.dtype == DType::float32)
      unary_impl<float, decltype(op)::value>(d, static_cast<const float*>(src), static_cast<float*>(dst));
    else
      unary_impl<double, decltype(op)::value>(d, static_cast<const double*>(src), static_cast<double*>(dst));
  });
}

void binary(const BinaryDesc& d, const void* a, const void* b, void* dst) {
  with_binary_op(d.op, [&](auto op) {
    if (d.dtype == DType::float32)
      binary_impl<float, decltype(op)::value>(d, static_cast<const float*>(a), static_cast<const float*>(b),
                                              static_cast<float*>(dst));
    else
      binary_impl<double, decltype(op)::value>(d, static_cast<const double*>(a), static_cast<const double*>(b),
                                               static_cast<double*>(dst));
  });
}

void copy(const CopyDesc& d, const void* src, void* dst) {
  visit_dtype(d.src_dtype, [&](auto s) {
    visit_dtype(d.dst_dtype, [&](auto o) {
      using S = decltype(s);
      using O = decltype(o);
      const S* sp = static_cast<const S*>(src);
      O* op = static_cast<O*>(dst);
      parallel_for(0, d.loop.numel(), kGrain, [&](int64_t b, int64_t e) {
        for_each_run(d.loop, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
          if constexpr (std::is_same_v<S, O>) {
            if (st[0] == 1 && st[1] == 1) {
              std::copy(sp + off[1], sp + off[1] + n, op + off[0]);
              return;
            }
          }
          for (int64_t i = 0; i < n; ++i) op[off[0] + i * st[0]] = O(ref::float_or_same(sp[off[1] + i * st[1]]));
        });
      });
    });
  });
}

void fill(const FillDesc& d, void* dst) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    T* o = static_cast<T*>(dst);
    const T v = T(d.value);
    parallel_for(0, d.loop.numel(), kGrain, [&](int64_t b, int64_t e) {
      for_each_run(d.loop, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
        for (int64_t i = 0; i < n; ++i) o[off[0] + i * st[0]] = v;
      });
    });
  });
}

void random(const RandomDesc& d, void* dst) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    T* o = static_cast<T*>(dst);
    parallel_for(0, d.loop.numel(), kGrain, [&](int64_t b, int64_t e) {
      int64_t pos = b;
      for_each_run(d.loop, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
        for (int64_t i = 0; i < n; ++i) o[off[0] + i * st[0]] = T(float(ref::random_value<double>(d, uint64_t(pos + i))));
        pos += n;
      });
    });
  });
}

}  // namespace kiln::native
