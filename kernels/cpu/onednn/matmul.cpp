// oneDNN matmul on kiln's GemmDesc. See matmul.h.
//   Test: ctest --test-dir build -R test_onednn_matmul
#include "kernels/cpu/onednn/matmul.h"

#include <algorithm>
#include <sstream>

#include "kernels/cpu/onednn/dnnl_compat.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using dt = memory::data_type;

std::string full_key(const GemmDesc& d) {
  std::ostringstream os;
  os << d.str() << " ld" << d.lda << "," << d.ldb << "," << d.ldc << " bs" << d.stride_a << "," << d.stride_b << ","
     << d.stride_c << " a" << d.alpha << " b" << d.beta;
  return os.str();
}

struct Entry : Made {
  memory::desc a, b, c;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

std::shared_ptr<const Entry> entry(const GemmDesc& d) {
  return cached<Entry>(cache_key("matmul", full_key(d)), [&] {
    Entry e;
    try {
      // A batch stride of 0 (one operand shared by the batch) is a batch dim of 1 that oneDNN
      // broadcasts; the output always has the full batch.
      const memory::dim B = d.batch;
      const bool share_a = d.stride_a == 0 || B == 1, share_b = d.stride_b == 0 || B == 1;
      const memory::dim ba = share_a ? 1 : B, bb = share_b ? 1 : B;
      // (The stride of a batch dim of 1 is never used; give it the operand's extent.)
      const memory::dim sa = share_a ? (d.trans_a ? d.k : d.m) * d.lda : d.stride_a;
      const memory::dim sb = share_b ? (d.trans_b ? d.n : d.k) * d.ldb : d.stride_b;
      const memory::dim sc = B == 1 ? d.m * d.ldc : d.stride_c;
      e.a = memory::desc({ba, d.m, d.k}, dt::f32, d.trans_a ? memory::dims{sa, 1, d.lda} : memory::dims{sa, d.lda, 1});
      e.b = memory::desc({bb, d.k, d.n}, dt::f32, d.trans_b ? memory::dims{sb, 1, d.ldb} : memory::dims{sb, d.ldb, 1});
      e.c = memory::desc({B, d.m, d.n}, dt::f32, memory::dims{sc, d.ldc, 1});
      // C = alpha AB + beta C as post-ops in order: a linear eltwise scales the product, then the
      // sum post-op adds beta C, reading C before it is written. (3.x has no output scales; a
      // runtime scale argument would cost a memory object per call.)
      dnnl::primitive_attr attr;
      dnnl::post_ops po;
      if (d.alpha != 1.0) compat::append_eltwise(po, dnnl::algorithm::eltwise_linear, float(d.alpha), 0.f);
      if (d.beta != 0.0) po.append_sum(float(d.beta));
      if (po.len() > 0) attr.set_post_ops(po);
      e.pd = compat::matmul(e.a, e.b, e.c, attr);
      e.prim = dnnl::matmul(e.pd);
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

bool basic_ok(const GemmDesc& d) {
  const int64_t a_cols = d.trans_a ? d.m : d.k, b_cols = d.trans_b ? d.k : d.n;
  // Batch strides must not overlap a product's rows (oneDNN takes strides as a dense-ish layout);
  // a stride of 0 is a shared operand.
  const bool batch_ok = d.batch == 1 ||
                        ((d.stride_a == 0 || d.stride_a >= (d.trans_a ? d.k : d.m) * d.lda) &&
                         (d.stride_b == 0 || d.stride_b >= (d.trans_b ? d.n : d.k) * d.ldb) &&
                         d.stride_c >= d.m * d.ldc);
  return d.dtype == DType::float32 && d.m > 0 && d.n > 0 && d.k > 0 && d.batch > 0 &&
         d.lda >= std::max<int64_t>(1, a_cols) && d.ldb >= std::max<int64_t>(1, b_cols) &&
         d.ldc >= std::max<int64_t>(1, d.n) && batch_ok;
}

}  // namespace

bool supports_matmul_any(const GemmDesc& d) { return basic_ok(d) && entry(d)->ok; }

bool supports_matmul(const GemmDesc& d) {
  // Measured (bench_backends --only matmul, 2 threads, medians of 9): one batched primitive runs
  // at 0.9-1.16x dnnl_sgemm called per product (median 1.07), so it takes batches; a single
  // product gains nothing from it and stays on dnnl_sgemm.
  return d.batch > 1 && supports_matmul_any(d);
}

void matmul(const GemmDesc& d, const void* a, const void* b, void* c) {
  KILN_CHECK(basic_ok(d), "gemm (onednn matmul): unsupported ", d.str(), " (lda ", d.lda, ", ldb ", d.ldb, ", ldc ",
             d.ldc, ")");
  const Entry& e = *entry(d);
  KILN_CHECK(e.ok, "gemm (onednn matmul): oneDNN has no primitive for ", d.str(), ": ", e.why);
  KILN_DNNL("gemm", d,
            execute(e.prim, {{DNNL_ARG_SRC, user_memory(e.a, a)},
                             {DNNL_ARG_WEIGHTS, user_memory(e.b, b)},
                             {DNNL_ARG_DST, user_memory(e.c, c)}}));
}

}  // namespace kiln::onednn
