// oneDNN average pooling and LRN. See pool.h.
//   Test: ctest --test-dir build -R test_onednn
#include "kernels/cpu/onednn/pool.h"

#include <algorithm>
#include <sstream>

#include "kernels/common/parallel.h"
#include "kernels/cpu/onednn/dnnl_compat.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The bottom/right padding that gives oneDNN kiln's output size (see conv.cpp's right_pad):
// -1 when no non-negative one does.
int64_t right_pad(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad_l, int64_t dil) {
  const int64_t exact = (out - 1) * stride + (k - 1) * dil + 1 - in - pad_l;
  if (exact >= 0) return exact;
  return exact + stride - 1 >= 0 ? 0 : -1;
}

// Whether oneDNN's average matches PyTorch's divisor for every window.
bool pool_maps(const PoolDesc& d) {
  if (d.dtype != DType::float32 || d.alg != PoolAlg::avg || d.divisor_override > 0) return false;
  if (d.n <= 0 || d.c <= 0 || d.ih <= 0 || d.iw <= 0 || d.oh <= 0 || d.ow <= 0 || d.kh <= 0 || d.kw <= 0 ||
      d.sh <= 0 || d.sw <= 0 || d.ph < 0 || d.pw < 0 || d.dh != 1 || d.dw != 1)
    return false;
  const int64_t prh = right_pad(d.ih, d.oh, d.kh, d.sh, d.ph, 1), prw = right_pad(d.iw, d.ow, d.kw, d.sw, d.pw, 1);
  if (prh < 0 || prw < 0) return false;
  // include-pad: PyTorch clips each window to [-pad, in + pad); the last window ends at
  // in + exact_pad_r, so it is unclipped (divisor kh*kw, oneDNN's) iff exact_pad_r <= pad.
  if (d.count_include_pad) {
    const int64_t exact_h = (d.oh - 1) * d.sh + d.kh - d.ih - d.ph, exact_w = (d.ow - 1) * d.sw + d.kw - d.iw - d.pw;
    if (exact_h > d.ph || exact_w > d.pw) return false;
  }
  return true;
}

struct PoolEntry : Made {
  memory::desc src, dst;
  compat::pooling_forward::primitive_desc fwd_pd;
  compat::pooling_forward fwd;
  compat::pooling_backward::primitive_desc bwd_pd;
  compat::pooling_backward bwd;
};

std::shared_ptr<const PoolEntry> pool_entry(const PoolDesc& d) {
  return cached<PoolEntry>(cache_key("pool", d.str()), [&] {
    PoolEntry e;
    try {
      e.src = memory::desc({d.n, d.c, d.ih, d.iw}, dt::f32, d.nhwc ? tag::nhwc : tag::nchw);
      e.dst = memory::desc({d.n, d.c, d.oh, d.ow}, dt::f32, d.nhwc ? tag::nhwc : tag::nchw);
      const compat::PoolShape shape{{d.sh, d.sw},
                                    {d.kh, d.kw},
                                    {0, 0},
                                    {d.ph, d.pw},
                                    {right_pad(d.ih, d.oh, d.kh, d.sh, d.ph, 1), right_pad(d.iw, d.ow, d.kw, d.sw, d.pw, 1)}};
      const auto alg = d.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                           : dnnl::algorithm::pooling_avg_exclude_padding;
      e.fwd_pd = compat::pool_fwd(dnnl::prop_kind::forward_training, alg, e.src, e.dst, shape);
      e.fwd = compat::pooling_forward(e.fwd_pd);
      e.bwd_pd = compat::pool_bwd(alg, e.src, e.dst, shape, e.fwd_pd);
      e.bwd = compat::pooling_backward(e.bwd_pd);
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

const PoolEntry& pool_require(const PoolDesc& d, const char* op) {
  KILN_CHECK(pool_maps(d), op, " (onednn): ", d.str(), " does not map onto oneDNN pooling exactly");
  auto e = pool_entry(d);
  KILN_CHECK(e->ok, op, ": oneDNN has no pooling primitive for ", d.str(), ": ", e->why);
  return *e;
}

// --- LRN

std::string lrn_key(const LrnDesc& d) {
  std::ostringstream os;  // str() rounds alpha/beta/k to 6 digits; the primitive takes them exactly
  os.precision(17);
  os << d.str() << " | " << d.alpha << " " << d.beta << " " << d.k;
  return os.str();
}

struct LrnEntry : Made {
  memory::desc data;
  dnnl::lrn_forward::primitive_desc infer_pd, train_pd;
  dnnl::lrn_forward infer, train;
  dnnl::lrn_backward::primitive_desc bwd_pd;
  dnnl::lrn_backward bwd;
  bool bwd_needs_ws = false;
};

std::shared_ptr<const LrnEntry> lrn_entry(const LrnDesc& d) {
  return cached<LrnEntry>(cache_key("lrn", lrn_key(d)), [&] {
    LrnEntry e;
    try {
      e.data = memory::desc({d.n, d.c, d.inner, 1}, dt::f32, tag::nchw);
      const compat::LrnParams p{d.size, float(d.alpha), float(d.beta), float(d.k)};
      e.infer_pd = compat::lrn_fwd(dnnl::prop_kind::forward_inference, e.data, p);
      e.infer = dnnl::lrn_forward(e.infer_pd);
      e.train_pd = compat::lrn_fwd(dnnl::prop_kind::forward_training, e.data, p);
      e.train = dnnl::lrn_forward(e.train_pd);
      e.bwd_pd = compat::lrn_bwd(e.data, p, e.train_pd);
      e.bwd = dnnl::lrn_backward(e.bwd_pd);
      e.bwd_needs_ws = e.bwd_pd.workspace_desc().get_size() > 0;
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

const LrnEntry& lrn_require(const LrnDesc& d, const char* op) {
  KILN_CHECK(supports_lrn(d), op, " (onednn): ", d.str(), " is not supported (float32, odd size)");
  auto e = lrn_entry(d);
  KILN_CHECK(e->ok, op, ": oneDNN has no LRN primitive for ", d.str(), ": ", e->why);
  return *e;
}

// kiln's scale = k + alpha/size * sum of squares over kiln's channel window.
void lrn_scale(const LrnDesc& d, const float* src, float* scale) {
  const int64_t in = d.inner;
  const float alpha = float(d.alpha), k = float(d.k), size = float(d.size);
  parallel_for(0, d.n * d.c, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, in * d.size)), [&](int64_t b, int64_t e) {
    for (int64_t pc = b; pc < e; ++pc) {
      const int64_t n = pc / d.c, c = pc % d.c;
      const int64_t j0 = std::max<int64_t>(0, c - d.size / 2), j1 = std::min(d.c - 1, c + (d.size - 1) / 2);
      float* sc = scale + pc * in;
      std::fill(sc, sc + in, 0.f);
      for (int64_t j = j0; j <= j1; ++j) {
        const float* x = src + (n * d.c + j) * in;
#pragma omp simd
        for (int64_t i = 0; i < in; ++i) sc[i] += x[i] * x[i];
      }
#pragma omp simd
      for (int64_t i = 0; i < in; ++i) sc[i] = k + alpha * (sc[i] / size);
    }
  });
}

}  // namespace

bool supports_pool_fwd(const PoolDesc& d) { return pool_maps(d) && pool_entry(d)->ok; }
bool supports_pool_bwd(const PoolDesc& d) { return pool_maps(d) && pool_entry(d)->ok; }

void pool_fwd(const PoolDesc& d, const void* src, void* dst, int64_t* index) {
  const PoolEntry& e = pool_require(d, "pool_fwd");
  KILN_CHECK(!index, "pool_fwd (onednn): ", d.str(), " asks for argmax indices, which only max pooling has");
  KILN_DNNL("pool_fwd", d,
            execute(e.fwd, {{DNNL_ARG_SRC, user_memory(e.src, src)}, {DNNL_ARG_DST, user_memory(e.dst, dst)}}));
}

void pool_bwd(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src) {
  const PoolEntry& e = pool_require(d, "pool_bwd");
  KILN_DNNL("pool_bwd", d,
            execute(e.bwd, {{DNNL_ARG_DIFF_DST, user_memory(e.dst, diff_dst)},
                            {DNNL_ARG_DIFF_SRC, user_memory(e.src, diff_src)}}));
}

// A window of one channel is left to native: oneDNN 3.7's lrn_jit:avx512_core crashes (SIGSEGV)
// creating the backward primitive for local size 1 at 16 channels (mb1ic16ih1iw1ls1, the oracle's
// problem; Debian 13), before any error could be returned.
bool supports_lrn(const LrnDesc& d) {
  return d.dtype == DType::float32 && d.size > 1 && d.size % 2 == 1 && d.n > 0 && d.c > 0 && d.inner > 0 &&
         lrn_entry(d)->ok;
}

void lrn_fwd(const LrnDesc& d, const void* src, void* dst, void* scale) {
  const LrnEntry& e = lrn_require(d, "lrn_fwd");
  KILN_DNNL("lrn_fwd", d,
            execute(e.infer, {{DNNL_ARG_SRC, user_memory(e.data, src)}, {DNNL_ARG_DST, user_memory(e.data, dst)}}));
  lrn_scale(d, static_cast<const float*>(src), static_cast<float*>(scale));
}

void lrn_bwd(const LrnDesc& d, const void* src, const void* dst, const void* scale, const void* diff_dst,
             void* diff_src) {
  const LrnEntry& e = lrn_require(d, "lrn_bwd");
  KILN_DNNL("lrn_bwd", d, [&] {
    memory s = user_memory(e.data, src);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, s},
                                         {DNNL_ARG_DIFF_DST, user_memory(e.data, diff_dst)},
                                         {DNNL_ARG_DIFF_SRC, user_memory(e.data, diff_src)}};
    if (e.bwd_needs_ws) {  // kiln's forward may have run elsewhere: rebuild oneDNN's workspace
      const memory::desc wd = e.train_pd.workspace_desc();
      memory ws(wd, engine(), scratch(0, wd.get_size()));
      memory y(e.data, engine(), scratch(1, e.data.get_size()));
      execute(e.train, {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, y}, {DNNL_ARG_WORKSPACE, ws}});
      args.emplace(DNNL_ARG_WORKSPACE, ws);
    }
    execute(e.bwd, args);
  }());
}

}  // namespace kiln::onednn
