// Problems of pooling and LRN (engine/ops/pool.cpp, norm.cpp): max and average windows with odd
// sizes, strides, padding, non-square windows, dilation (max), ceil mode with a partial last
// window, average with and without the padding counted and with a divisor override, batch 1,
// channels-last; adaptive pooling smaller, equal, larger and global; LRN with odd and even
// windows. Backward inputs that the forward produces (max indices, LRN's output and scale) come
// from the ref forward on the problem's own inputs.
#include "kernels/cpu/ref/pool.h"
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

struct Window {
  PoolAlg alg;
  int64_t n, c, ih, iw, kh, kw, sh, sw, ph, pw, dh = 1, dw = 1;
  bool ceil = false, include_pad = true;
  int64_t divisor = 0;
};

PoolDesc pool_desc(const Window& w, DType t, bool nhwc) {
  PoolDesc d;
  d.alg = w.alg;
  d.dtype = t;
  d.n = w.n, d.c = w.c, d.ih = w.ih, d.iw = w.iw;
  d.kh = w.kh, d.kw = w.kw, d.sh = w.sh, d.sw = w.sw, d.ph = w.ph, d.pw = w.pw, d.dh = w.dh, d.dw = w.dw;
  d.ceil_mode = w.ceil;
  d.count_include_pad = w.include_pad;
  d.divisor_override = w.divisor;
  d.oh = pool_output_size(w.ih, w.kh, w.ph, w.sh, w.dh, w.ceil);
  d.ow = pool_output_size(w.iw, w.kw, w.pw, w.sw, w.dw, w.ceil);
  d.nhwc = nhwc;
  return d;
}

std::vector<PoolDesc> pool_problems() {
  std::vector<Window> ws;
  for (PoolAlg a : {PoolAlg::max, PoolAlg::avg}) {
    ws.push_back({a, 2, 3, 9, 11, 3, 3, 2, 2, 1, 1});
    ws.push_back({a, 2, 3, 8, 8, 2, 2, 2, 2, 0, 0});
    ws.push_back({a, 1, 1, 7, 9, 3, 3, 1, 1, 0, 0});
    ws.push_back({a, 2, 3, 9, 10, 3, 2, 2, 1, 1, 0});
    ws.push_back({a, 2, 3, 10, 10, 3, 3, 2, 2, 0, 0, 1, 1, true});
    ws.push_back({a, 2, 16, 6, 6, 3, 3, 2, 2, 1, 1});
  }
  ws.push_back({PoolAlg::max, 2, 3, 11, 11, 3, 3, 2, 2, 1, 1, 2, 2});
  ws.push_back({PoolAlg::avg, 2, 3, 9, 11, 3, 3, 2, 2, 1, 1, 1, 1, false, false});
  ws.push_back({PoolAlg::avg, 2, 3, 10, 10, 3, 3, 2, 2, 1, 1, 1, 1, true, true});
  ws.push_back({PoolAlg::avg, 2, 3, 9, 11, 3, 3, 2, 2, 1, 1, 1, 1, false, true, 5});
  std::vector<PoolDesc> v;
  for (DType t : storage_dtypes())
    for (const Window& w : ws)
      for (bool nhwc : {false, true}) v.push_back(pool_desc(w, t, nhwc));
  return v;
}

// Max pooling's indices: the ref forward (`fwd`) on a draw of src.
template <class D>
Gen max_indices(const D& d, void (*fwd)(const D&, const double*, double*, int64_t*)) {
  return [d, fwd](Values& v, Rng& r, const std::vector<Values>&) {
    Values src(size_t(d.planes() * d.ih * d.iw)), dst(v.size());
    for (double& x : src) x = r.uniform(-1, 1);
    std::vector<int64_t> idx(v.size());
    fwd(as_float64(d), src.data(), dst.data(), idx.data());
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(idx[i]);
  };
}

// Forward: src, dst, index (max only); backward: diff_dst, index (max only), diff_src. D is
// PoolDesc or AdaptivePoolDesc; `indices` draws max pooling's indices.
template <class D>
std::vector<Arg> window_fwd_args(const D& d) {
  const int64_t o = d.planes() * d.oh * d.ow;
  return {in("src", d.dtype, d.planes() * d.ih * d.iw), out("dst", d.dtype, o),
          d.alg == PoolAlg::max ? out("index", DType::int64, o) : none("index")};
}
template <class D>
std::vector<Arg> window_bwd_args(const D& d, Gen indices) {
  const int64_t o = d.planes() * d.oh * d.ow;
  return {in("diff_dst", d.dtype, o), d.alg == PoolAlg::max ? in("index", DType::int64, o, indices) : none("index"),
          out("diff_src", d.dtype, d.planes() * d.ih * d.iw)};
}

std::vector<AdaptivePoolDesc> adaptive_problems() {
  const int64_t shapes[][6] = {{2, 3, 9, 11, 4, 3}, {2, 3, 7, 7, 1, 1}, {1, 1, 5, 5, 5, 5}, {2, 3, 4, 6, 7, 5}};
  std::vector<AdaptivePoolDesc> v;
  for (DType t : storage_dtypes())
    for (PoolAlg a : {PoolAlg::max, PoolAlg::avg})
      for (const auto& s : shapes) {
        AdaptivePoolDesc d;
        d.alg = a;
        d.dtype = t;
        d.n = s[0], d.c = s[1], d.ih = s[2], d.iw = s[3], d.oh = s[4], d.ow = s[5];
        v.push_back(d);
      }
  return v;
}

std::vector<LrnDesc> lrn_problems() {
  std::vector<LrnDesc> v;
  const int64_t shapes[][3] = {{2, 7, 15}, {1, 16, 1}};
  for (DType t : storage_dtypes())
    for (const auto& s : shapes)
      for (int64_t size : {5, 3, 1, 4}) {
        LrnDesc d;
        d.dtype = t;
        d.n = s[0], d.c = s[1], d.inner = s[2];
        d.size = size;
        d.alpha = 0.5;  // large enough that the normalisation matters
        d.beta = 0.75;
        d.k = size == 3 ? 2.0 : 1.0;
        v.push_back(d);
      }
  return v;
}

std::vector<Arg> lrn_fwd_args(const LrnDesc& d) {
  const int64_t n = d.n * d.c * d.inner;
  return {in("src", d.dtype, n), out("dst", d.dtype, n), out("scale", d.dtype, n)};
}

std::vector<Arg> lrn_bwd_args(const LrnDesc& d) {
  const int64_t n = d.n * d.c * d.inner;
  // dst and scale: the ref forward of src (before[0]).
  auto fwd = [d](int which) -> Gen {
    return [d, which](Values& v, Rng&, const std::vector<Values>& before) {
      Values dst(v.size()), scale(v.size());
      ref::lrn_fwd<double>(as_float64(d), before[0].data(), dst.data(), scale.data());
      v = which == 0 ? dst : scale;
    };
  };
  return {in("src", d.dtype, n), in("dst", d.dtype, n, fwd(0)), in("scale", d.dtype, n, fwd(1)),
          in("diff_dst", d.dtype, n), out("diff_src", d.dtype, n)};
}

}  // namespace

void add_pool(CaseMap& m) {
  add(m, case_over<kernel_op::pool_fwd>(pool_problems(), window_fwd_args<PoolDesc>));
  add(m, case_over<kernel_op::pool_bwd>(pool_problems(), [](const PoolDesc& d) { return window_bwd_args(d, max_indices(d, ref::pool_fwd<double>)); }));
  add(m, case_over<kernel_op::adaptive_pool_fwd>(adaptive_problems(), window_fwd_args<AdaptivePoolDesc>));
  add(m, case_over<kernel_op::adaptive_pool_bwd>(adaptive_problems(), [](const AdaptivePoolDesc& d) {
    return window_bwd_args(d, max_indices(d, ref::adaptive_pool_fwd<double>));
  }));
  add(m, case_over<kernel_op::lrn_fwd>(lrn_problems(), lrn_fwd_args));
  add(m, case_over<kernel_op::lrn_bwd>(lrn_problems(), lrn_bwd_args));
}

}  // namespace kiln::oracle
