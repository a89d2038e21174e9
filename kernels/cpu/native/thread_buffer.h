// Scratch memory a native kernel keeps per thread across calls: 64-byte aligned, grown on demand
// and never shrunk, so a layer run again and again (every training step) neither calls the
// allocator nor faults fresh pages in. Declare it thread_local at its point of use; what it holds
// is the kernel's to overwrite.
//   Used by kernels/cpu/native/gemm.cpp, gemm_bf16.cpp and conv_direct.cpp
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>

#include "kernels/common/error.h"

namespace kiln::native {

template <class T = float>
class ThreadBuffer {
 public:
  // `what` names the buffer in the out-of-memory error ("gemm: packing buffer").
  explicit ThreadBuffer(const char* what) : what_(what) {}
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;
  ~ThreadBuffer() { std::free(ptr_); }

  // At least n elements (one when n is 0).
  T* get(size_t n) {
    n = std::max<size_t>(n, 1);
    if (n > elems_) {
      std::free(ptr_);
      ptr_ = nullptr;
      elems_ = 0;
      const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
      ptr_ = static_cast<T*>(std::aligned_alloc(64, bytes));
      KILN_CHECK(ptr_, what_, ": cannot allocate ", bytes, " bytes of scratch");
      elems_ = n;
    }
    return ptr_;
  }

 private:
  const char* what_;
  T* ptr_ = nullptr;
  size_t elems_ = 0;
};

}  // namespace kiln::native
