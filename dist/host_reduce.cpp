// Host reduction loops for the communicators (see host_reduce.h): plain loops the compiler
// vectorises for 32/64-bit types; 16-bit types convert through float per element.
//   ctest --test-dir build -R dist.test_local_comm
#include "dist/host_reduce.h"

#include <algorithm>

#include "kernels/common/half.h"

namespace kiln::dist {
namespace {

template <class T>
void reduce_typed(T* __restrict acc, const T* __restrict in, int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::average:
      for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + in[i];
      break;
    case ReduceOp::max:
      for (int64_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
      break;
    case ReduceOp::min:
      for (int64_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]);
      break;
  }
}

template <class H>
void reduce_16(uint16_t* acc, const uint16_t* in, int64_t n, ReduceOp op) {
  for (int64_t i = 0; i < n; ++i) {
    H a, b;
    a.bits = acc[i];
    b.bits = in[i];
    float x = float(a), y = float(b);
    float r = (op == ReduceOp::max) ? std::max(x, y) : (op == ReduceOp::min) ? std::min(x, y) : x + y;
    acc[i] = H(r).bits;
  }
}

template <class H>
void divide_16(uint16_t* x, int64_t n, int d) {
  const float inv = 1.0f / float(d);
  for (int64_t i = 0; i < n; ++i) {
    H a;
    a.bits = x[i];
    x[i] = H(float(a) * inv).bits;
  }
}

}  // namespace

bool reducible(DType t) { return t != DType::uint8 && t != DType::boolean; }

void reduce_into(void* acc, const void* in, int64_t n, DType t, ReduceOp op) {
  switch (t) {
    case DType::float32: return reduce_typed(static_cast<float*>(acc), static_cast<const float*>(in), n, op);
    case DType::float64: return reduce_typed(static_cast<double*>(acc), static_cast<const double*>(in), n, op);
    case DType::int32: return reduce_typed(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), n, op);
    case DType::int64: return reduce_typed(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), n, op);
    case DType::float16:
      return reduce_16<Half>(static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(in), n, op);
    case DType::bfloat16:
      return reduce_16<BFloat16>(static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(in), n, op);
    case DType::uint8: case DType::boolean: break;
  }
  KILN_THROW("reduction of ", t, " tensors is not supported (float32, float64, float16, bfloat16, int32, int64)");
}

void divide(void* x, int64_t n, DType t, int d) {
  if (d == 1) return;
  switch (t) {
    case DType::float32: {
      float* p = static_cast<float*>(x);
      const float inv = 1.0f / float(d);
      for (int64_t i = 0; i < n; ++i) p[i] *= inv;
      return;
    }
    case DType::float64: {
      double* p = static_cast<double*>(x);
      for (int64_t i = 0; i < n; ++i) p[i] /= d;
      return;
    }
    case DType::int32: {
      int32_t* p = static_cast<int32_t*>(x);
      for (int64_t i = 0; i < n; ++i) p[i] /= d;
      return;
    }
    case DType::int64: {
      int64_t* p = static_cast<int64_t*>(x);
      for (int64_t i = 0; i < n; ++i) p[i] /= d;
      return;
    }
    case DType::float16: return divide_16<Half>(static_cast<uint16_t*>(x), n, d);
    case DType::bfloat16: return divide_16<BFloat16>(static_cast<uint16_t*>(x), n, d);
    case DType::uint8: case DType::boolean: break;
  }
  KILN_THROW("average of ", t, " tensors is not supported");
}

}  // namespace kiln::dist
