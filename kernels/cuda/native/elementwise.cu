// kiln's own CUDA elementwise kernels (see elementwise.h). The op is a template argument, so the
// shared functor's switch folds away; three kernels per op and type:
//   contiguous float32 with 16-byte aligned pointers: float4 loads and stores, grid-stride;
//   contiguous otherwise: one element per thread, grid-stride;
//   strided/broadcast: the linear index split into coordinates of the coalesced loop.
// Integers (int32, int64, uint8) take the integer ops, compare takes every dtype; one kernel each,
// dense or strided.
// Test: ctest --test-dir build -R emu.elementwise
#include "kernels/cuda/native/elementwise.h"

#include <cstdint>
#include <type_traits>

#include "kernels/common/elementwise_ops.h"
#include "kernels/cuda/launch.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace elementwise_detail {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = KILN_GRID_STRIDE_CAP(8192);  // grid-stride loops cover the rest

// Storage type S is computed in Compute<S>: float for bfloat16, else S.
template <class S> struct Compute { using type = S; };
template <> struct Compute<BFloat16> { using type = float; };

// Element offsets of linear position i in operand k of a coalesced loop (outermost dim first).
KILN_DEVICE KILN_FORCEINLINE int64_t operand_offset(const StridedLoop& L, int k, int64_t i) {
  int64_t off = 0;
  for (int d = L.ndim - 1; d > 0; --d) {
    const int64_t c = i % L.sizes[d];
    i /= L.sizes[d];
    off += c * L.strides[k][d];
  }
  return L.ndim > 0 ? off + i * L.strides[k][0] : 0;
}

template <class S, UnaryOp OP>
KILN_GLOBAL void __launch_bounds__(kThreads) unary_contiguous(const S* __restrict__ src, S* __restrict__ dst,
                                                               int64_t n, typename Compute<S>::type alpha) {
  using C = typename Compute<S>::type;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i] = S(fn::unary<C>(OP, C(src[i]), alpha));
}

template <UnaryOp OP>
KILN_GLOBAL void __launch_bounds__(kThreads) unary_float4(const float* __restrict__ src, float* __restrict__ dst,
                                                           int64_t n, float alpha) {
  const int64_t n4 = n / 4;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* s4 = reinterpret_cast<const float4*>(src);
  float4* d4 = reinterpret_cast<float4*>(dst);
  for (int64_t i = first; i < n4; i += step) {
    float4 v = s4[i];
    v.x = fn::unary<float>(OP, v.x, alpha);
    v.y = fn::unary<float>(OP, v.y, alpha);
    v.z = fn::unary<float>(OP, v.z, alpha);
    v.w = fn::unary<float>(OP, v.w, alpha);
    d4[i] = v;
  }
  if (first < n - n4 * 4) dst[n4 * 4 + first] = fn::unary<float>(OP, src[n4 * 4 + first], alpha);
}

template <class S, UnaryOp OP>
KILN_GLOBAL void __launch_bounds__(kThreads) unary_strided(const S* src, S* dst, StridedLoop L, int64_t n,
                                                            typename Compute<S>::type alpha) {
  using C = typename Compute<S>::type;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[operand_offset(L, 0, i)] = S(fn::unary<C>(OP, C(src[operand_offset(L, 1, i)]), alpha));
}

template <class S, BinaryOp OP>
KILN_GLOBAL void __launch_bounds__(kThreads) binary_contiguous(const S* __restrict__ a, const S* __restrict__ b,
                                                                S* __restrict__ dst, int64_t n,
                                                                typename Compute<S>::type alpha) {
  using C = typename Compute<S>::type;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i] = S(fn::binary<C>(OP, C(a[i]), C(b[i]), alpha));
}

template <BinaryOp OP>
KILN_GLOBAL void __launch_bounds__(kThreads) binary_float4(const float* __restrict__ a, const float* __restrict__ b,
                                                            float* __restrict__ dst, int64_t n, float alpha) {
  const int64_t n4 = n / 4;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* d4 = reinterpret_cast<float4*>(dst);
  for (int64_t i = first; i < n4; i += step) {
    const float4 x = a4[i], y = b4[i];
    float4 v;
    v.x = fn::binary<float>(OP, x.x, y.x, alpha);
    v.y = fn::binary<float>(OP, x.y, y.y, alpha);
    v.z = fn::binary<float>(OP, x.z, y.z, alpha);
    v.w = fn::binary<float>(OP, x.w, y.w, alpha);
    d4[i] = v;
  }
  if (first < n - n4 * 4) {
    const int64_t i = n4 * 4 + first;
    dst[i] = fn::binary<float>(OP, a[i], b[i], alpha);
  }
}

template <class S, BinaryOp OP>
KILN_GLOBAL void __launch_bounds__(kThreads) binary_strided(const S* a, const S* b, S* dst, StridedLoop L, int64_t n,
                                                             typename Compute<S>::type alpha) {
  using C = typename Compute<S>::type;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[operand_offset(L, 0, i)] =
        S(fn::binary<C>(OP, C(a[operand_offset(L, 1, i)]), C(b[operand_offset(L, 2, i)]), alpha));
}

// Integer ops (fn::int_unary / fn::int_binary, wrapping) and comparisons into booleans; Dense:
// the loop is contiguous, else each operand's offset comes from its strides.
template <class T, UnaryOp OP, bool Dense>
KILN_GLOBAL void __launch_bounds__(kThreads) int_unary_kernel(const T* src, T* dst, StridedLoop L, int64_t n, T alpha) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if constexpr (Dense) dst[i] = fn::int_unary<T>(OP, src[i], alpha);
    else dst[operand_offset(L, 0, i)] = fn::int_unary<T>(OP, src[operand_offset(L, 1, i)], alpha);
  }
}

template <class T, BinaryOp OP, bool Dense>
KILN_GLOBAL void __launch_bounds__(kThreads) int_binary_kernel(const T* a, const T* b, T* dst, StridedLoop L, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if constexpr (Dense) dst[i] = fn::int_binary<T>(OP, a[i], b[i]);
    else dst[operand_offset(L, 0, i)] = fn::int_binary<T>(OP, a[operand_offset(L, 1, i)], b[operand_offset(L, 2, i)]);
  }
}

template <class S> struct CompareType { using type = S; };
template <> struct CompareType<BFloat16> { using type = float; };
template <> struct CompareType<Half> { using type = float; };

template <class S, CompareOp OP, bool Dense>
KILN_GLOBAL void __launch_bounds__(kThreads) compare_kernel(const S* a, const S* b, bool* dst, StridedLoop L, int64_t n) {
  using C = typename CompareType<S>::type;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if constexpr (Dense) dst[i] = fn::compare<C>(OP, C(a[i]), C(b[i]));
    else dst[operand_offset(L, 0, i)] = fn::compare<C>(OP, C(a[operand_offset(L, 1, i)]), C(b[operand_offset(L, 2, i)]));
  }
}

unsigned blocks_for(int64_t work) {
  int64_t b = (work + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  return unsigned(b < kMaxBlocks ? b : kMaxBlocks);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Calls f(S{}) for the storage types the kernels take.
template <class F>
void with_dtype(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::bfloat16: return f(BFloat16{});
    default: KILN_THROW("cuda ", what, ": dtype ", t, " not supported (float32, float64, bfloat16)");
  }
}

bool supported_dtype(DType t) { return t == DType::float32 || t == DType::float64 || t == DType::bfloat16; }

// Calls f(T{}) for int32, int64 and uint8.
template <class F>
void with_integer(DType t, F&& f) {
  if (t == DType::int32) f(int32_t{});
  else if (t == DType::int64) f(int64_t{});
  else f(uint8_t{});
}

void int_unary(const UnaryDesc& d, const void* src, void* dst, int64_t n, Stream s) {
  with_integer(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(src);
    T* y = static_cast<T*>(dst);
    const T alpha = T(int64_t(d.alpha));
    with_integer_unary_op(d.op, [&](auto op) {
      constexpr UnaryOp OP = decltype(op)::value;
      if (d.loop.contiguous())
        KILN_LAUNCH((int_unary_kernel<T, OP, true>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, d.loop, n, alpha);
      else
        KILN_LAUNCH((int_unary_kernel<T, OP, false>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, d.loop, n, alpha);
    });
  });
}

void int_binary(const BinaryDesc& d, const void* a, const void* b, void* dst, int64_t n, Stream s) {
  with_integer(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    T* z = static_cast<T*>(dst);
    with_integer_binary_op(d.op, [&](auto op) {
      constexpr BinaryOp OP = decltype(op)::value;
      if (d.loop.contiguous())
        KILN_LAUNCH((int_binary_kernel<T, OP, true>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, z, d.loop, n);
      else
        KILN_LAUNCH((int_binary_kernel<T, OP, false>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, z, d.loop, n);
    });
  });
}

}  // namespace elementwise_detail

using namespace elementwise_detail;

bool supports_unary(const UnaryDesc& d) {
  return supported_dtype(d.dtype) || (is_integral(d.dtype) && integer_unary_op(d.op));
}
bool supports_binary(const BinaryDesc& d) {
  return supported_dtype(d.dtype) || (is_integral(d.dtype) && integer_binary_op(d.op));
}

void compare(const CompareDesc& d, const void* a, const void* b, void* dst) {
  const int64_t n = d.loop.numel();
  if (n == 0) return;
  const Stream s = current_stream();
  visit_dtype(d.dtype, [&](auto tag) {
    using S = decltype(tag);
    const S* x = static_cast<const S*>(a);
    const S* y = static_cast<const S*>(b);
    bool* z = static_cast<bool*>(dst);
    with_compare_op(d.op, [&](auto op) {
      constexpr CompareOp OP = decltype(op)::value;
      if (d.loop.contiguous())
        KILN_LAUNCH((compare_kernel<S, OP, true>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, z, d.loop, n);
      else
        KILN_LAUNCH((compare_kernel<S, OP, false>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, z, d.loop, n);
    });
  });
}

void unary(const UnaryDesc& d, const void* src, void* dst) {
  const int64_t n = d.loop.numel();
  if (n == 0) return;
  const Stream s = current_stream();
  if (is_integral(d.dtype)) return int_unary(d, src, dst, n, s);
  with_dtype(d.dtype, "unary", [&](auto tag) {
    using S = decltype(tag);
    using C = typename Compute<S>::type;
    const S* x = static_cast<const S*>(src);
    S* y = static_cast<S*>(dst);
    const C alpha = C(d.alpha);
    with_unary_op(d.op, [&](auto op) {
      constexpr UnaryOp OP = decltype(op)::value;
      if (!d.loop.contiguous()) {
        KILN_LAUNCH((unary_strided<S, OP>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, d.loop, n, alpha);
      } else if (std::is_same<S, float>::value && aligned16(x) && aligned16(y)) {
        KILN_LAUNCH(unary_float4<OP>, dim3(blocks_for((n + 3) / 4)), dim3(kThreads), 0, s,
                    reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n, float(alpha));
      } else {
        KILN_LAUNCH((unary_contiguous<S, OP>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, n, alpha);
      }
    });
  });
}

void binary(const BinaryDesc& d, const void* a, const void* b, void* dst) {
  const int64_t n = d.loop.numel();
  if (n == 0) return;
  const Stream s = current_stream();
  if (is_integral(d.dtype)) return int_binary(d, a, b, dst, n, s);
  with_dtype(d.dtype, "binary", [&](auto tag) {
    using S = decltype(tag);
    using C = typename Compute<S>::type;
    const S* x = static_cast<const S*>(a);
    const S* y = static_cast<const S*>(b);
    S* z = static_cast<S*>(dst);
    const C alpha = C(d.alpha);
    with_binary_op(d.op, [&](auto op) {
      constexpr BinaryOp OP = decltype(op)::value;
      if (!d.loop.contiguous()) {
        KILN_LAUNCH((binary_strided<S, OP>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, z, d.loop, n, alpha);
      } else if (std::is_same<S, float>::value && aligned16(x) && aligned16(y) && aligned16(z)) {
        KILN_LAUNCH(binary_float4<OP>, dim3(blocks_for((n + 3) / 4)), dim3(kThreads), 0, s,
                    reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(y), reinterpret_cast<float*>(z),
                    n, float(alpha));
      } else {
        KILN_LAUNCH((binary_contiguous<S, OP>), dim3(blocks_for(n)), dim3(kThreads), 0, s, x, y, z, n, alpha);
      }
    });
  });
}

KILN_CUDA_NAMESPACE_END
