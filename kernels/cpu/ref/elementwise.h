// Reference elementwise kernels: one loop over the StridedLoop, math from kernels/common in type T.
// Templated so tests run them in double (the oracle). Not fast, on purpose.
#pragma once

#include "kernels/common/elementwise.h"
#include "kernels/common/philox.h"

namespace kiln::ref {

// Half types convert through float; everything else converts directly.
template <class T> inline auto float_or_same(T v) { return v; }
inline float float_or_same(Half v) { return float(v); }
inline float float_or_same(BFloat16 v) { return float(v); }

template <class T>
void unary(const UnaryDesc& d, const T* src, T* dst) {
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i)
      dst[off[0] + i * st[0]] = fn::unary<T>(d.op, src[off[1] + i * st[1]], T(d.alpha));
  });
}

template <class T>
void binary(const BinaryDesc& d, const T* a, const T* b, T* dst) {
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i)
      dst[off[0] + i * st[0]] = fn::binary<T>(d.op, a[off[1] + i * st[1]], b[off[2] + i * st[2]], T(d.alpha));
  });
}

// Integer unary/binary ops (integer_unary_op, integer_binary_op), wrapping.
template <class T>
void int_unary(const UnaryDesc& d, const T* src, T* dst) {
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i)
      dst[off[0] + i * st[0]] = fn::int_unary<T>(d.op, src[off[1] + i * st[1]], T(int64_t(d.alpha)));
  });
}

template <class T>
void int_binary(const BinaryDesc& d, const T* a, const T* b, T* dst) {
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) dst[off[0] + i * st[0]] = fn::int_binary<T>(d.op, a[off[1] + i * st[1]], b[off[2] + i * st[2]]);
  });
}

// Comparisons into booleans, any operand dtype (float16 and bfloat16 compared as float).
template <class T>
void compare(const CompareDesc& d, const T* a, const T* b, bool* dst) {
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i)
      dst[off[0] + i * st[0]] =
          fn::compare(d.op, float_or_same(a[off[1] + i * st[1]]), float_or_same(b[off[2] + i * st[2]]));
  });
}

template <class Src, class Dst>
void copy(const CopyDesc& d, const Src* src, Dst* dst) {
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) dst[off[0] + i * st[0]] = Dst(float_or_same(src[off[1] + i * st[1]]));
  });
}

template <class T>
void fill(const FillDesc& d, T* dst) {
  const T v = T(d.value);
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) dst[off[0] + i * st[0]] = v;
  });
}

template <class T>
T random_value(const RandomDesc& d, uint64_t i) {
  switch (d.kind) {
    case RandomKind::uniform: return T(d.a + (d.b - d.a) * double(philox_uniform(d.seed, d.offset, i)));
    case RandomKind::normal: return T(d.a + d.b * double(philox_normal(d.seed, d.offset, i)));
    case RandomKind::bernoulli: return T(double(philox_uniform(d.seed, d.offset, i)) < d.a ? 1 : 0);
  }
  return T(0);
}

template <class T>
void random(const RandomDesc& d, T* dst) {
  int64_t pos = 0;
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) dst[off[0] + i * st[0]] = random_value<T>(d, uint64_t(pos + i));
    pos += n;
  });
}

}  // namespace kiln::ref
