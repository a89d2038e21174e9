// oneDNN inner product (Linear): forward with bias, backward-data, backward-weights (+ bias
// gradient), same signatures and semantics as kernels/cpu/native/linear.h on the same LinearDesc
// (src [n, ic], wei [oc, ic], dst [n, oc], contiguous float32). Every operand stays in kiln's
// plain layout (nc / oi): a blocked weight layout would cost a reorder of the whole weight matrix
// on every call, more than the product it speeds up at classifier shapes. Primitives are built
// once per (pass, shape, threads) and cached; backward ones take the forward descriptor as hint.
// supports_linear() says no to empty shapes and other dtypes (native serves those).
//   Test: ctest --test-dir build -R test_onednn_linear     Bench: build/bench/bench_backends
#pragma once

#include "kernels/common/linear.h"

namespace kiln::onednn {

bool supports_linear(const LinearDesc& d);
void linear_fwd(const LinearDesc& d, const void* src, const void* wei, const void* bias, void* dst);
void linear_bwd_data(const LinearDesc& d, const void* diff_dst, const void* wei, void* diff_src);
// diff_wei or diff_bias may be null (not wanted); src may be null when diff_wei is.
void linear_bwd_weights(const LinearDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias);

}  // namespace kiln::onednn
