// oneDNN batch norm and softmax. See norm.h.
//   Test: ctest --test-dir build -R test_onednn
#include "kernels/cpu/onednn/norm.h"

#include <cmath>
#include <sstream>

#include "kernels/cpu/onednn/dnnl_compat.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;
using flags = dnnl::normalization_flags;

std::string bn_key(const BatchNormDesc& d) {
  std::ostringstream os;  // str() rounds eps; the primitive takes it exactly
  os.precision(17);
  os << d.str() << " | eps " << d.eps;
  return os.str();
}

struct BnEntry : Made {
  memory::desc data, stat;
  dnnl::batch_normalization_forward::primitive_desc fwd_pd;
  dnnl::batch_normalization_forward fwd;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd;
  dnnl::batch_normalization_backward bwd;
};

std::shared_ptr<const BnEntry> bn_entry(const BatchNormDesc& d) {
  return cached<BnEntry>(cache_key("batch_norm", bn_key(d)), [&] {
    BnEntry e;
    try {
      // bfloat16 data keep float32 scale, shift and statistics (BatchNormDesc's contract).
      e.data = memory::desc({d.N, d.C, d.S, 1}, d.dtype == DType::bfloat16 ? dt::bf16 : dt::f32,
                            d.nhwc ? tag::nhwc : tag::nchw);
      e.stat = memory::desc({d.C}, dt::f32, tag::x);
      flags f = flags::use_scale | flags::use_shift;
      if (!d.training) f = f | flags::use_global_stats;
      const float eps = float(d.eps);
      // In eval mode the forward is an inference one; its training twin is the backward's hint.
      auto train_pd = compat::bnorm_fwd(dnnl::prop_kind::forward_training, e.data, eps, f);
      e.fwd_pd = d.training ? train_pd : compat::bnorm_fwd(dnnl::prop_kind::forward_inference, e.data, eps, f);
      e.fwd = dnnl::batch_normalization_forward(e.fwd_pd);
      e.bwd_pd = compat::bnorm_bwd(e.data, eps, f, train_pd);
      e.bwd = dnnl::batch_normalization_backward(e.bwd_pd);
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

const BnEntry& bn_require(const BatchNormDesc& d, const char* op) {
  KILN_CHECK(supports_batch_norm(d), op, " (onednn): ", d.str(), " is not supported");
  auto e = bn_entry(d);
  KILN_CHECK(e->ok, op, ": oneDNN has no batch normalization for ", d.str(), ": ", e->why);
  return *e;
}

// A per-channel operand: the caller's values, or `fill` in scratch `slot` when absent.
memory channel_in(const BnEntry& e, const BatchNormDesc& d, const void* p, float fill, int slot) {
  if (p) return user_memory(e.stat, p);
  float* s = static_cast<float*>(scratch(slot, size_t(d.C) * sizeof(float)));
  for (int64_t c = 0; c < d.C; ++c) s[c] = fill;
  return memory(e.stat, engine(), s);
}
memory channel_out(const BnEntry& e, const BatchNormDesc& d, void* p, int slot) {
  return memory(e.stat, engine(), p ? p : scratch(slot, size_t(d.C) * sizeof(float)));
}

struct SoftmaxEntry : Made {
  memory::desc data;
  compat::softmax_forward::primitive_desc fwd_pd;
  compat::softmax_forward fwd;
  compat::softmax_backward::primitive_desc bwd_pd;
  compat::softmax_backward bwd;
};

std::shared_ptr<const SoftmaxEntry> softmax_entry(const SoftmaxDesc& d) {
  return cached<SoftmaxEntry>(cache_key("softmax", d.str()), [&] {
    SoftmaxEntry e;
    try {
      e.data = memory::desc({d.outer, d.dim, d.inner}, dt::f32, tag::abc);
      const auto alg = d.log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
      e.fwd_pd = compat::softmax_fwd(dnnl::prop_kind::forward_training, alg, e.data, 1);
      e.fwd = compat::softmax_forward(e.fwd_pd);
      e.bwd_pd = compat::softmax_bwd(alg, e.data, 1, e.fwd_pd);
      e.bwd = compat::softmax_backward(e.bwd_pd);
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

const SoftmaxEntry& softmax_require(const SoftmaxDesc& d, const char* op) {
  KILN_CHECK(supports_softmax(d), op, " (onednn): ", d.str(), " is not supported");
  return *softmax_entry(d);
}

}  // namespace

bool supports_batch_norm(const BatchNormDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::bfloat16) && !d.relu && d.N > 0 && d.C > 0 && d.S > 0 && d.eps > 0 &&
         bn_entry(d)->ok;
}

void batch_norm_fwd(const BatchNormDesc& d, const void* src, const void* wei, const void* bias, void* running_mean,
                    void* running_var, void* dst, void* save_mean, void* save_invstd) {
  const BnEntry& e = bn_require(d, "batch_norm_fwd");
  KILN_CHECK(d.training || (running_mean && running_var), "batch_norm_fwd (onednn): ", d.str(),
             " in eval mode needs the running statistics");
  auto* mean = static_cast<float*>(save_mean);
  auto* invstd = static_cast<float*>(save_invstd);
  // Training: the batch variance comes out in scratch; eval: the running stats go in.
  float* var = d.training ? static_cast<float*>(scratch(2, size_t(d.C) * sizeof(float)))
                          : static_cast<float*>(running_var);
  KILN_DNNL("batch_norm_fwd", d, [&] {
    execute(e.fwd, {{DNNL_ARG_SRC, user_memory(e.data, src)},
                    {DNNL_ARG_DST, user_memory(e.data, dst)},
                    {DNNL_ARG_SCALE, channel_in(e, d, wei, 1.f, 0)},
                    {DNNL_ARG_SHIFT, channel_in(e, d, bias, 0.f, 1)},
                    {DNNL_ARG_MEAN, user_memory(e.stat, d.training ? save_mean : running_mean)},
                    {DNNL_ARG_VARIANCE, user_memory(e.stat, var)}});
  }());
  const double m = double(d.N) * double(d.S), mom = d.momentum;
  auto* rm = static_cast<float*>(running_mean);
  auto* rv = static_cast<float*>(running_var);
  for (int64_t c = 0; c < d.C; ++c) {
    invstd[c] = float(1.0 / std::sqrt(double(var[c]) + d.eps));
    if (!d.training) {
      mean[c] = rm[c];
      continue;
    }
    if (rm) rm[c] = float((1 - mom) * rm[c] + mom * mean[c]);
    if (rv && m > 1) rv[c] = float((1 - mom) * rv[c] + mom * double(var[c]) * m / (m - 1));
  }
}

void batch_norm_bwd(const BatchNormDesc& d, const void* src, const void* diff_dst, const void* wei,
                    const void* save_mean, const void* save_invstd, void* diff_src, void* diff_wei, void* diff_bias) {
  if (!diff_src && !diff_wei && !diff_bias) return;
  const BnEntry& e = bn_require(d, "batch_norm_bwd");
  const auto* invstd = static_cast<const float*>(save_invstd);
  auto* var = static_cast<float*>(scratch(2, size_t(d.C) * sizeof(float)));
  for (int64_t c = 0; c < d.C; ++c) var[c] = float(1.0 / (double(invstd[c]) * double(invstd[c])) - d.eps);
  KILN_DNNL("batch_norm_bwd", d, [&] {
    memory ds = diff_src ? user_memory(e.data, diff_src)
                         : memory(e.data, engine(), scratch(3, e.data.get_size()));  // not wanted
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, user_memory(e.data, src)},
                                         {DNNL_ARG_DIFF_DST, user_memory(e.data, diff_dst)},
                                         {DNNL_ARG_MEAN, user_memory(e.stat, save_mean)},
                                         {DNNL_ARG_VARIANCE, user_memory(e.stat, var)},
                                         {DNNL_ARG_SCALE, channel_in(e, d, wei, 1.f, 0)},
                                         {DNNL_ARG_DIFF_SRC, ds},
                                         {DNNL_ARG_DIFF_SCALE, channel_out(e, d, diff_wei, 4)},
                                         {DNNL_ARG_DIFF_SHIFT, channel_out(e, d, diff_bias, 5)}};
    if (compat::kBnormBwdTakesShift) args.emplace(DNNL_ARG_SHIFT, channel_in(e, d, nullptr, 0.f, 1));
    execute(e.bwd, args);
  }());
}

bool supports_softmax(const SoftmaxDesc& d) {
  return d.dtype == DType::float32 && d.outer > 0 && d.dim > 0 && d.inner > 0 && softmax_entry(d)->ok;
}

void softmax_fwd(const SoftmaxDesc& d, const void* src, void* dst) {
  const SoftmaxEntry& e = softmax_require(d, "softmax_fwd");
  KILN_DNNL("softmax_fwd", d,
            execute(e.fwd, {{DNNL_ARG_SRC, user_memory(e.data, src)}, {DNNL_ARG_DST, user_memory(e.data, dst)}}));
}

void softmax_bwd(const SoftmaxDesc& d, const void* dst, const void* diff_dst, void* diff_src) {
  const SoftmaxEntry& e = softmax_require(d, "softmax_bwd");
  KILN_DNNL("softmax_bwd", d,
            execute(e.bwd, {{DNNL_ARG_DST, user_memory(e.data, dst)},
                            {DNNL_ARG_DIFF_DST, user_memory(e.data, diff_dst)},
                            {DNNL_ARG_DIFF_SRC, user_memory(e.data, diff_src)}}));
}

}  // namespace kiln::onednn
