// Host reduction loops for the communicators: acc = op(acc, in) elementwise and the division of
// ReduceOp::average, for float32, float64, float16, bfloat16 (through float), int32 and int64.
// Used by the ring allreduce, the 16-bit MPI_Ops and CUDA staging.
//   ctest --test-dir build -R dist.test_local_comm
#pragma once

#include <cstdint>

#include "dist/comm.h"

namespace kiln::dist {

// True for the dtypes the collectives reduce.
bool reducible(DType t);
// acc[i] = op(acc[i], in[i]) for n elements; average accumulates as sum.
void reduce_into(void* acc, const void* in, int64_t n, DType t, ReduceOp op);
// x[i] /= divisor (integers: truncating division, as C++ does).
void divide(void* x, int64_t n, DType t, int divisor);

}  // namespace kiln::dist
