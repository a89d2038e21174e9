#include "kernels/cpu/native/elementwise.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/common/elementwise_ops.h"
#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/ref/elementwise.h"

namespace kiln::native {
namespace {

constexpr int64_t kGrain = 32768;

// Storage type S, computed in T: float for bfloat16 (loaded, computed and rounded back per
// element, one pass over memory instead of three through float32 copies), else S itself.
template <class S> struct compute { using type = S; };
template <> struct compute<BFloat16> { using type = float; };

// bfloat16 <-> float32 on raw bits, branch-free so the block loops below vectorise (the
// BFloat16 type's own conversion branches on NaN): widening is a shift; narrowing rounds to
// nearest even and keeps NaNs quiet.
inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  const uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u ? 0xffffffffu : 0u;
  return uint16_t(((rounded & ~nan) | ((u | 0x400000u) & nan)) >> 16);
}

// Contiguous bfloat16 in blocks: widen a block to float32, apply f to it, narrow it back.
constexpr int64_t kBlock = 512;
template <class F>
void bf16_blocks(int64_t n, const BFloat16* const* in, int nin, BFloat16* out, F&& f) {
  float buf[3][kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    for (int k = 0; k < nin; ++k) {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(in[k] + b);
      float* t = buf[k];
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) t[i] = bf16_bits_to_float(s[i]);
    }
    f(buf[0], buf[1], buf[2], m);
    uint16_t* o = reinterpret_cast<uint16_t*>(out + b);
    const float* r = buf[2];
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) o[i] = float_to_bf16_bits(r[i]);
  }
}

template <class S, UnaryOp OP>
void unary_impl(const UnaryDesc& d, const S* src, S* dst) {
  using T = typename compute<S>::type;
  const T alpha = T(d.alpha);
  const StridedLoop& L = d.loop;
  parallel_for(0, L.numel(), kGrain, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<S, BFloat16>) {
      if (L.contiguous()) {
        const BFloat16* in[1] = {src + b};
        bf16_blocks(e - b, in, 1, dst + b, [&](const float* x, const float*, float* r, int64_t m) {
#pragma omp simd
          for (int64_t i = 0; i < m; ++i) r[i] = fn::unary<float>(OP, x[i], alpha);
        });
        return;
      }
    }
    if (L.contiguous()) {
      const S* s = src + b;
      S* o = dst + b;
#pragma omp simd
      for (int64_t i = 0; i < e - b; ++i) o[i] = S(fn::unary<T>(OP, T(s[i]), alpha));
      return;
    }
    for_each_run(L, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      const S* s = src + off[1];
      S* o = dst + off[0];
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = S(fn::unary<T>(OP, T(s[i * st[1]]), alpha));
    });
  });
}

template <class S, BinaryOp OP>
void binary_impl(const BinaryDesc& d, const S* a, const S* bb, S* dst) {
  using T = typename compute<S>::type;
  const T alpha = T(d.alpha);
  const StridedLoop& L = d.loop;
  parallel_for(0, L.numel(), kGrain, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<S, BFloat16>) {
      if (L.contiguous()) {
        const BFloat16* in[2] = {a + b, bb + b};
        bf16_blocks(e - b, in, 2, dst + b, [&](const float* x, const float* y, float* r, int64_t m) {
#pragma omp simd
          for (int64_t i = 0; i < m; ++i) r[i] = fn::binary<float>(OP, x[i], y[i], alpha);
        });
        return;
      }
    }
    if (L.contiguous()) {
      const S* x = a + b;
      const S* y = bb + b;
      S* o = dst + b;
#pragma omp simd
      for (int64_t i = 0; i < e - b; ++i) o[i] = S(fn::binary<T>(OP, T(x[i]), T(y[i]), alpha));
      return;
    }
    for_each_run(L, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      const S* x = a + off[1];
      const S* y = bb + off[2];
      S* o = dst + off[0];
      if (st[0] == 1 && st[1] == 1 && st[2] == 0) {  // tensor op scalar-along-the-row (bias add)
        const T yv = T(*y);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = S(fn::binary<T>(OP, T(x[i]), yv, alpha));
      } else if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = S(fn::binary<T>(OP, T(x[i]), T(y[i]), alpha));
      } else {
        for (int64_t i = 0; i < n; ++i)
          o[i * st[0]] = S(fn::binary<T>(OP, T(x[i * st[1]]), T(y[i * st[2]]), alpha));
      }
    });
  });
}

// Integer ops (fn::int_unary / fn::int_binary: wrapping), the op a compile-time constant.
template <class T, UnaryOp OP>
void int_unary_impl(const UnaryDesc& d, const T* src, T* dst) {
  const T alpha = T(int64_t(d.alpha));
  const StridedLoop& L = d.loop;
  parallel_for(0, L.numel(), kGrain, [&](int64_t b, int64_t e) {
    if (L.contiguous()) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) dst[i] = fn::int_unary<T>(OP, src[i], alpha);
      return;
    }
    for_each_run(L, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i) dst[off[0] + i * st[0]] = fn::int_unary<T>(OP, src[off[1] + i * st[1]], alpha);
    });
  });
}

template <class T, BinaryOp OP>
void int_binary_impl(const BinaryDesc& d, const T* a, const T* bb, T* dst) {
  const StridedLoop& L = d.loop;
  parallel_for(0, L.numel(), kGrain, [&](int64_t b, int64_t e) {
    if (L.contiguous()) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) dst[i] = fn::int_binary<T>(OP, a[i], bb[i]);
      return;
    }
    for_each_run(L, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i)
        dst[off[0] + i * st[0]] = fn::int_binary<T>(OP, a[off[1] + i * st[1]], bb[off[2] + i * st[2]]);
    });
  });
}

// Calls f(T{}) for int32, int64, uint8.
template <class F>
void with_integer(DType t, F&& f) {
  if (t == DType::int32) f(int32_t{});
  else if (t == DType::int64) f(int64_t{});
  else f(uint8_t{});
}

// Comparisons into one byte per element; 16-bit floats compared as float.
template <class S> struct compare_type { using type = S; };
template <> struct compare_type<BFloat16> { using type = float; };
template <> struct compare_type<Half> { using type = float; };

template <class S, CompareOp OP>
void compare_impl(const CompareDesc& d, const S* a, const S* bb, bool* dst) {
  using T = typename compare_type<S>::type;
  const StridedLoop& L = d.loop;
  parallel_for(0, L.numel(), kGrain, [&](int64_t b, int64_t e) {
    if (L.contiguous()) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) dst[i] = fn::compare<T>(OP, T(a[i]), T(bb[i]));
      return;
    }
    for_each_run(L, b, e, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i)
        dst[off[0] + i * st[0]] = fn::compare<T>(OP, T(a[off[1] + i * st[1]]), T(bb[off[2] + i * st[2]]));
    });
  });
}

}  // namespace

namespace {
bool elementwise_dtype(DType t) { return t == DType::float32 || t == DType::float64 || t == DType::bfloat16; }
}  // namespace

bool supports_unary(const UnaryDesc& d) {
  return elementwise_dtype(d.dtype) || (is_integral(d.dtype) && integer_unary_op(d.op));
}
bool supports_binary(const BinaryDesc& d) {
  return elementwise_dtype(d.dtype) || (is_integral(d.dtype) && integer_binary_op(d.op));
}

void compare(const CompareDesc& d, const void* a, const void* b, void* dst) {
  with_compare_op(d.op, [&](auto op) {
    constexpr CompareOp OP = decltype(op)::value;
    visit_dtype(d.dtype, [&](auto t) {
      using S = decltype(t);
      compare_impl<S, OP>(d, static_cast<const S*>(a), static_cast<const S*>(b), static_cast<bool*>(dst));
    });
  });
}

void unary(const UnaryDesc& d, const void* src, void* dst) {
  if (is_integral(d.dtype))
    return with_integer(d.dtype, [&](auto t) {
      using T = decltype(t);
      with_integer_unary_op(d.op, [&](auto op) {
        int_unary_impl<T, decltype(op)::value>(d, static_cast<const T*>(src), static_cast<T*>(dst));
      });
    });
  with_unary_op(d.op, [&](auto op) {
    constexpr UnaryOp OP = decltype(op)::value;
    if (d.dtype == DType::float32)
      unary_impl<float, OP>(d, static_cast<const float*>(src), static_cast<float*>(dst));
    else if (d.dtype == DType::bfloat16)
      unary_impl<BFloat16, OP>(d, static_cast<const BFloat16*>(src), static_cast<BFloat16*>(dst));
    else
      unary_impl<double, OP>(d, static_cast<const double*>(src), static_cast<double*>(dst));
  });
}

void binary(const BinaryDesc& d, const void* a, const void* b, void* dst) {
  if (is_integral(d.dtype))
    return with_integer(d.dtype, [&](auto t) {
      using T = decltype(t);
      with_integer_binary_op(d.op, [&](auto op) {
        int_binary_impl<T, decltype(op)::value>(d, static_cast<const T*>(a), static_cast<const T*>(b),
                                                static_cast<T*>(dst));
      });
    });
  with_binary_op(d.op, [&](auto op) {
    constexpr BinaryOp OP = decltype(op)::value;
    if (d.dtype == DType::float32)
      binary_impl<float, OP>(d, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(dst));
    else if (d.dtype == DType::bfloat16)
      binary_impl<BFloat16, OP>(d, static_cast<const BFloat16*>(a), static_cast<const BFloat16*>(b),
                                static_cast<BFloat16*>(dst));
    else
      binary_impl<double, OP>(d, static_cast<const double*>(a), static_cast<const double*>(b),
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
