// Scratch memory a native kernel keeps per thread across calls: 64-byte aligned, grown on demand
// and never shrunk, so a layer run again and again (every training step) neither calls the
// allocator nor faults fresh pages in. Declare it thread_local at its point of use; what it holds
// is the kernel's to overwrite.
//   Used by kernels/cpu/native/conv_direct.cpp
#pragma once

#include <cstddef>
#include <cstdlib>

#include "kernels/common/error.h"

namespace kiln::native {

class ThreadBuffer {
 public:
  ThreadBuffer() = default;
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;
  ~ThreadBuffer() { std::free(ptr_); }

  // At least n floats (one when n is 0); `what` names the buffer in the out-of-memory error.
  float* get(size_t n, const char* what) {
    if (n == 0) n = 1;
    if (n > floats_) {
      std::free(ptr_);
      ptr_ = nullptr;
      floats_ = 0;
      const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
      ptr_ = static_cast<float*>(std::aligned_alloc(64, bytes));
      KILN_CHECK(ptr_, what, ": cannot allocate ", bytes, " bytes of scratch");
      floats_ = n;
    }
    return ptr_;
  }

 private:
  float* ptr_ = nullptr;
  size_t floats_ = 0;
};

}  // namespace kiln::native
