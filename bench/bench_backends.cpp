// Backend comparison: the same kernels timed on `native` and on `onednn` (each pinned with a
// strict backend preference), on the layers of ResNet-50 and AlexNet given as benchdnn-style
// problem strings, plus the GEMMs of their classifiers, the inner-product ops of the AlexNet,
// VGG and GoogLeNet classifiers, batched GEMMs (native, dnnl_sgemm per product, oneDNN matmul),
// GoogLeNet's inception concats and n-ary sums, and the other ops oneDNN implements (average
// pooling, LRN, batch norm, softmax, eltwise). Prints ms (median of interleaved runs) and
// GFLOP/s (GB/s of the minimum traffic for the memory-bound ops) per backend and the ratio
// native_ms / onednn_ms (> 1: oneDNN is faster), and for convolutions the part of oneDNN's time
// spent reordering between kiln's NCHW/OIHW and oneDNN's blocked layouts (weights separately).
// The registration order in engine/ops/*.cpp follows these figures.
//   cmake --build build --target bench_backends && build/bench/bench_backends
//   options: --mb N (batch, default 16)  --reps N (default 5)  --threads T  --cpu-time (see run_ms)
//            --nhwc (channels-last convolutions)  --only conv|gemm|matmul|linear|concat|other
//            [problem ...] (conv problems, e.g. mb16ic64ih56oc64oh56kh3ph1; replaces the lists)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "engine/dispatch.h"
#include "kernels/common/concat.h"
#include "kernels/common/conv.h"
#include "kernels/common/elementwise.h"
#include "kernels/common/gemm.h"
#include "kernels/common/linear.h"
#include "kernels/common/norm.h"
#include "kernels/common/parallel.h"
#include "kernels/common/pool.h"
#include "kernels/cpu/native/gemm.h"
#ifdef KILN_HAVE_ONEDNN
#include "kernels/cpu/onednn/common.h"
#include "kernels/cpu/onednn/gemm.h"
#include "kernels/cpu/onednn/matmul.h"
#endif

using namespace kiln;

namespace {

int g_reps = 5;

std::vector<float> buffer(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(n, 1)));
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (auto& x : v) {  // xorshift: the values only need to be non-trivial
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = lo + (hi - lo) * float(s % 10007) / 10007.f;
  }
  return v;
}

struct Timing {
  double ms = 1e300;                             // median of the timed runs
  std::vector<double> runs;
  double reorder_ms = 0, weight_reorder_ms = 0;  // onednn only: mean per timed run
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 1e300 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// --cpu-time: process CPU time instead of wall time. With --threads 1 it counts the work alone,
// not the time spent waiting for a core while other jobs load the machine (OpenMP does not
// spin with one thread); with more threads it would count spinning too.
bool g_cpu_time = false;
bool g_nhwc = false;  // --nhwc: convolutions on channels-last activations

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double run_ms(const std::function<void()>& f) {
  if (g_cpu_time) {
    const double c0 = cpu_ms();
    f();
    return cpu_ms() - c0;
  }
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One row: `work` is flops (unit "GF/s") or bytes ("GB/s"). The two backends' runs alternate
// (each pinned with a strict preference: a kernel the backend lacks is an error, not a
// fallback), so a load change on the shared machine hits both alike.
void row(const std::string& what, const char* pass, double work, const char* unit, const std::function<void()>& f,
         bool show_reorders) {
  Timing n, o;
  bool have = true;
  {
    BackendGuard g("native", true);
    f();  // warm-up: page faults, allocator
  }
  try {
    BackendGuard g("onednn", true);
    f();  // warm-up: primitive creation
  } catch (const std::exception&) {
    have = false;  // supports() said no
  }
  for (int r = 0; r < g_reps; ++r) {
    {
      BackendGuard g("native", true);
      n.runs.push_back(run_ms(f));
    }
    if (!have) continue;
    BackendGuard g("onednn", true);
#ifdef KILN_HAVE_ONEDNN
    const onednn::Stats s0 = onednn::stats();
#endif
    o.runs.push_back(run_ms(f));
#ifdef KILN_HAVE_ONEDNN
    const onednn::Stats s1 = onednn::stats();
    o.reorder_ms += (s1.reorder_seconds - s0.reorder_seconds) * 1e3 / g_reps;
    o.weight_reorder_ms += (s1.weight_reorder_seconds - s0.weight_reorder_seconds) * 1e3 / g_reps;
#endif
  }
  n.ms = median(n.runs);
  if (have) o.ms = median(o.runs);
  std::printf("%-36s %-6s %9.2f %8.1f", what.c_str(), pass, n.ms, work / n.ms * 1e-6);
  if (have) {
    std::printf(" %9.2f %8.1f %6.2f", o.ms, work / o.ms * 1e-6, n.ms / o.ms);
    if (show_reorders) std::printf(" %7.2f %7.2f", o.reorder_ms, o.weight_reorder_ms);
  } else {
    std::printf(" %9s %8s %6s", "-", "-", "-");
  }
  std::printf("  %s\n", unit);
  std::fflush(stdout);
}

void header(const char* title) {
  std::printf("\n# %s\n%-36s %-6s %9s %8s %9s %8s %6s %7s %7s\n", title, "problem", "pass", "nat_ms", "nat_rate",
              "dnn_ms", "dnn_rate", "n/o", "reord", "w_reord");
}

void bench_conv(const std::string& p) {
  ConvDesc d = parse_conv_problem(p, DType::float32, /*has_bias=*/true);
  d.nhwc = g_nhwc;
  std::vector<float> src = buffer(d.src_elems(), 1), wei = buffer(d.wei_elems(), 2), bias = buffer(d.K, 3),
                     dst(static_cast<size_t>(d.dst_elems())), diff_dst = buffer(d.dst_elems(), 4), diff_src(static_cast<size_t>(d.src_elems())),
                     diff_wei(static_cast<size_t>(d.wei_elems())), diff_bias(static_cast<size_t>(d.K));
  auto& fwd = op_table<kernel_op::conv2d_fwd>();
  auto& bwd_d = op_table<kernel_op::conv2d_bwd_data>();
  auto& bwd_w = op_table<kernel_op::conv2d_bwd_weights>();
  const auto cpu = DeviceType::cpu;
  row(p, "fwd", d.flops(), "GF/s", [&] { fwd(cpu, d, src.data(), wei.data(), bias.data(), dst.data()); }, true);
  row(p, "bwd_d", d.flops(), "GF/s", [&] { bwd_d(cpu, d, diff_dst.data(), wei.data(), diff_src.data()); }, true);
  row(p, "bwd_w", d.flops(), "GF/s",
      [&] { bwd_w(cpu, d, src.data(), diff_dst.data(), diff_wei.data(), diff_bias.data()); }, true);
}

// A linear layer y[mb, out] = x[mb, in] W[out, in]^T and its two backward GEMMs.
void bench_linear(const std::string& name, int64_t mb, int64_t in, int64_t out) {
  auto& gemm = op_table<kernel_op::gemm>();
  std::vector<float> x = buffer(mb * in, 1), w = buffer(out * in, 2), y(static_cast<size_t>(mb * out)), dy = buffer(mb * out, 3),
                     dx(static_cast<size_t>(mb * in)), dw(static_cast<size_t>(out * in));
  auto desc = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    GemmDesc d;
    d.trans_a = ta, d.trans_b = tb, d.m = m, d.n = n, d.k = k;
    d.lda = ta ? m : k, d.ldb = tb ? k : n, d.ldc = n;
    return d;
  };
  const GemmDesc f = desc(false, true, mb, out, in), bd = desc(false, false, mb, in, out),
                 bw = desc(true, false, out, in, mb);
  const double flops = 2.0 * double(mb) * double(in) * double(out);
  const auto cpu = DeviceType::cpu;
  row(name + " NT m" + std::to_string(mb) + "n" + std::to_string(out) + "k" + std::to_string(in), "fwd", flops, "GF/s",
      [&] { gemm(cpu, f, x.data(), w.data(), y.data()); }, false);
  row(name + " NN m" + std::to_string(mb) + "n" + std::to_string(in) + "k" + std::to_string(out), "bwd_d", flops,
      "GF/s", [&] { gemm(cpu, bd, dy.data(), w.data(), dx.data()); }, false);
  row(name + " TN m" + std::to_string(out) + "n" + std::to_string(in) + "k" + std::to_string(mb), "bwd_w", flops,
      "GF/s", [&] { gemm(cpu, bw, dy.data(), x.data(), dw.data()); }, false);
}

// The inner-product op family (Linear: forward with bias, backward-data, backward-weights + bias).
void bench_ip(const std::string& name, int64_t mb, int64_t in, int64_t out) {
  auto& fwd = op_table<kernel_op::linear_fwd>();
  auto& bwd_d = op_table<kernel_op::linear_bwd_data>();
  auto& bwd_w = op_table<kernel_op::linear_bwd_weights>();
  LinearDesc d;
  d.n = mb, d.ic = in, d.oc = out, d.has_bias = true;
  std::vector<float> x = buffer(mb * in, 1), w = buffer(out * in, 2), b = buffer(out, 4), y(static_cast<size_t>(mb * out)),
                     dy = buffer(mb * out, 3), dx(static_cast<size_t>(mb * in)), dw(static_cast<size_t>(out * in)), db(static_cast<size_t>(out));
  const double flops = 2.0 * double(mb) * double(in) * double(out);
  const auto cpu = DeviceType::cpu;
  const std::string what = name + " n" + std::to_string(mb) + "ic" + std::to_string(in) + "oc" + std::to_string(out);
  row(what, "fwd", flops, "GF/s", [&] { fwd(cpu, d, x.data(), w.data(), b.data(), y.data()); }, false);
  row(what, "bwd_d", flops, "GF/s", [&] { bwd_d(cpu, d, dy.data(), w.data(), dx.data()); }, false);
  row(what, "bwd_w", flops, "GF/s", [&] { bwd_w(cpu, d, x.data(), dy.data(), dw.data(), db.data()); }, false);
}

#ifdef KILN_HAVE_ONEDNN
// Batched products: native's gemm, dnnl_sgemm per product and one oneDNN matmul primitive for
// the batch, called directly (all three are "gemm" candidates), interleaved, medians.
void bench_batched(int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  GemmDesc d;
  d.trans_a = ta, d.trans_b = tb, d.m = m, d.n = n, d.k = k, d.batch = batch;
  d.lda = ta ? m : k, d.ldb = tb ? k : n, d.ldc = n;
  d.stride_a = m * k, d.stride_b = k * n, d.stride_c = m * n;
  std::vector<float> a = buffer(batch * m * k, 1), b = buffer(batch * k * n, 2), c(static_cast<size_t>(batch * m * n));
  const std::function<void()> fs[3] = {[&] { native::gemm(d, a.data(), b.data(), c.data()); },
                                       [&] { onednn::gemm(d, a.data(), b.data(), c.data()); },
                                       [&] { onednn::matmul(d, a.data(), b.data(), c.data()); }};
  std::vector<double> runs[3];
  for (auto& f : fs) f();
  for (int r = 0; r < g_reps; ++r)
    for (int i = 0; i < 3; ++i) runs[i].push_back(run_ms(fs[i]));
  const double flops = 2.0 * double(batch * m) * double(n) * double(k), t0 = median(runs[0]), t1 = median(runs[1]),
               t2 = median(runs[2]);
  std::printf("b%lld %s%s m%lldn%lldk%lld  native %8.3f ms %6.1f GF/s  sgemm %8.3f ms %6.1f  matmul %8.3f ms %6.1f"
              "  sgemm/matmul %5.2f native/matmul %5.2f\n",
              (long long)batch, ta ? "T" : "N", tb ? "T" : "N", (long long)m, (long long)n, (long long)k, t0,
              flops / t0 * 1e-6, t1, flops / t1 * 1e-6, t2, flops / t2 * 1e-6, t1 / t2, t0 / t2);
  std::fflush(stdout);
}
#endif

// GoogLeNet's inception outputs (4 branches cat on the channels), NCHW (outer = batch) and
// channels-last (outer = batch * H * W, inner = 1); and n-ary sums of ResNet-50 activations.
void bench_concat_sum(int64_t mb) {
  const auto cpu = DeviceType::cpu;
  header("concat and sum (rate: GB/s, 4 bytes per element read or written)");
  auto& cc = op_table<kernel_op::concat>();
  auto& sm = op_table<kernel_op::sum>();
  struct Inc {
    const char* name;
    int64_t hw;
    std::vector<int64_t> c;
  };
  for (const Inc& inc : std::vector<Inc>{{"inception3a", 28, {64, 128, 32, 32}},
                                         {"inception4e", 14, {256, 320, 128, 128}},
                                         {"inception5b", 7, {384, 384, 128, 128}}})
    for (bool nhwc : {false, true}) {
      ConcatDesc d;
      d.sizes = inc.c;
      d.outer = nhwc ? mb * inc.hw * inc.hw : mb;
      d.inner = nhwc ? 1 : inc.hw * inc.hw;
      std::vector<std::vector<float>> ins;
      std::vector<const void*> ptrs;
      for (int64_t c : inc.c) ins.push_back(buffer(d.outer * c * d.inner, 1));
      for (auto& v : ins) ptrs.push_back(v.data());
      std::vector<float> out(static_cast<size_t>(d.outer * d.total() * d.inner));
      row(std::string(inc.name) + (nhwc ? " nhwc " : " nchw ") + std::to_string(d.total()) + "x" +
              std::to_string(inc.hw),
          "fwd", 8.0 * double(out.size()), "GB/s", [&] { cc(cpu, d, ptrs.data(), out.data()); }, false);
    }
  for (auto [k, c, h] : std::vector<std::array<int64_t, 3>>{{2, 256, 56}, {2, 1024, 14}, {3, 256, 56}, {4, 512, 28}}) {
    SumDesc d;
    d.inputs = k, d.n = mb * c * h * h;
    std::vector<std::vector<float>> ins;
    std::vector<const void*> ptrs;
    for (int64_t i = 0; i < k; ++i) ins.push_back(buffer(d.n, uint64_t(i) + 1));
    for (auto& v : ins) ptrs.push_back(v.data());
    std::vector<float> out(static_cast<size_t>(d.n));
    row("sum" + std::to_string(k) + " " + std::to_string(c) + "x" + std::to_string(h), "fwd",
        4.0 * double(k + 1) * double(d.n), "GB/s", [&] { sm(cpu, d, ptrs.data(), out.data()); }, false);
  }
}

void bench_other(int64_t mb) {
  const auto cpu = DeviceType::cpu;
  header("other ops (rate: GB/s of the minimum traffic, 4 bytes per element read or written)");
  // Average pooling: GoogLeNet's 3x3/1 pad 1, ResNet-D-style 2x2/2.
  for (auto [c, h, k, s, p] : std::vector<std::array<int64_t, 5>>{{256, 28, 3, 1, 1}, {64, 56, 2, 2, 0}}) {
    PoolDesc d;
    d.alg = PoolAlg::avg, d.n = mb, d.c = c, d.ih = d.iw = h, d.kh = d.kw = k, d.sh = d.sw = s, d.ph = d.pw = p;
    d.oh = d.ow = pool_output_size(h, k, p, s, 1, false);
    std::vector<float> x = buffer(d.planes() * h * h, 1), y(static_cast<size_t>(d.planes() * d.oh * d.ow)), dy = y, dx = x;
    const double bytes = 4.0 * double(x.size() + y.size());
    const std::string name = "avg_pool " + std::to_string(c) + "x" + std::to_string(h) + " k" + std::to_string(k) +
                             "s" + std::to_string(s) + "p" + std::to_string(p);
    auto& pf = op_table<kernel_op::pool_fwd>();
    auto& pb = op_table<kernel_op::pool_bwd>();
    row(name, "fwd", bytes, "GB/s", [&] { pf(cpu, d, x.data(), y.data(), nullptr); }, false);
    row(name, "bwd", bytes, "GB/s", [&] { pb(cpu, d, dy.data(), nullptr, dx.data()); }, false);
  }
  // LRN as in AlexNet (size 5 after conv1 and conv2).
  for (auto [c, h] : std::vector<std::array<int64_t, 2>>{{96, 55}, {256, 27}}) {
    LrnDesc d;
    d.n = mb, d.c = c, d.inner = h * h, d.size = 5, d.alpha = 1e-4, d.beta = 0.75, d.k = 2;
    const int64_t n = mb * c * h * h;
    std::vector<float> x = buffer(n, 1), y(static_cast<size_t>(n)), sc(static_cast<size_t>(n)), dy = buffer(n, 2), dx(static_cast<size_t>(n));
    auto& lf = op_table<kernel_op::lrn_fwd>();
    auto& lb = op_table<kernel_op::lrn_bwd>();
    {
      BackendGuard g("native", true);
      lf(cpu, d, x.data(), y.data(), sc.data());
    }
    const std::string name = "lrn5 " + std::to_string(c) + "x" + std::to_string(h);
    row(name, "fwd", 12.0 * double(n), "GB/s", [&] { lf(cpu, d, x.data(), y.data(), sc.data()); }, false);
    row(name, "bwd", 20.0 * double(n), "GB/s",
        [&] { lb(cpu, d, x.data(), y.data(), sc.data(), dy.data(), dx.data()); }, false);
  }
  // Batch norm, training and eval, ResNet-50 activations.
  for (auto [c, h] : std::vector<std::array<int64_t, 2>>{{64, 112}, {256, 56}, {1024, 14}}) {
    for (bool training : {true, false}) {
      BatchNormDesc d;
      d.N = mb, d.C = c, d.S = h * h, d.training = training;
      const int64_t n = d.N * d.C * d.S;
      std::vector<float> x = buffer(n, 1), y(static_cast<size_t>(n)), w = buffer(c, 2, 0.5f, 1.5f), b = buffer(c, 3),
                         rm = buffer(c, 4), rv = buffer(c, 5, 0.5f, 2.f), sm(static_cast<size_t>(c)), si(static_cast<size_t>(c)),
                         dy = buffer(n, 6), dx(static_cast<size_t>(n)), dw(static_cast<size_t>(c)), db(static_cast<size_t>(c));
      auto& bf = op_table<kernel_op::batch_norm_fwd>();
      auto& bb = op_table<kernel_op::batch_norm_bwd>();
      const std::string name = std::string("batch_norm ") + (training ? "train " : "eval ") + std::to_string(c) +
                               "x" + std::to_string(h);
      row(name, "fwd", 4.0 * double(training ? 3 : 2) * double(n), "GB/s",
          [&] { bf(cpu, d, x.data(), w.data(), b.data(), rm.data(), rv.data(), y.data(), sm.data(), si.data()); },
          false);
      if (training)
        row(name, "bwd", 4.0 * 5.0 * double(n), "GB/s",
            [&] { bb(cpu, d, x.data(), dy.data(), w.data(), sm.data(), si.data(), dx.data(), dw.data(), db.data()); },
            false);
    }
  }
  // Softmax over classes.
  for (int64_t classes : {1000, 21841}) {
    SoftmaxDesc d;
    d.outer = mb, d.dim = classes, d.inner = 1;
    const int64_t n = mb * classes;
    std::vector<float> x = buffer(n, 1, -5, 5), y(static_cast<size_t>(n)), dy = buffer(n, 2), dx(static_cast<size_t>(n));
    auto& sf = op_table<kernel_op::softmax_fwd>();
    auto& sb = op_table<kernel_op::softmax_bwd>();
    const std::string name = "softmax " + std::to_string(classes);
    row(name, "fwd", 8.0 * double(n), "GB/s", [&] { sf(cpu, d, x.data(), y.data()); }, false);
    row(name, "bwd", 12.0 * double(n), "GB/s", [&] { sb(cpu, d, y.data(), dy.data(), dx.data()); }, false);
  }
  // Activations on a ResNet-50 stage-1 tensor.
  const int64_t n = mb * 64 * 112 * 112;
  std::vector<float> x = buffer(n, 1, -3, 3), y(static_cast<size_t>(n)), dy = buffer(n, 2), dx(static_cast<size_t>(n));
  for (auto [uop, bop] : std::vector<std::pair<UnaryOp, BinaryOp>>{{UnaryOp::relu, BinaryOp::relu_bwd},
                                                                   {UnaryOp::tanh, BinaryOp::tanh_bwd},
                                                                   {UnaryOp::gelu, BinaryOp::gelu_bwd}}) {
    UnaryDesc u;
    u.op = uop;
    u.loop.ndim = 1, u.loop.noperands = 2, u.loop.sizes[0] = n, u.loop.strides[0][0] = u.loop.strides[1][0] = 1;
    BinaryDesc b;
    b.op = bop;
    b.loop.ndim = 1, b.loop.noperands = 3, b.loop.sizes[0] = n;
    b.loop.strides[0][0] = b.loop.strides[1][0] = b.loop.strides[2][0] = 1;
    auto& uf = op_table<kernel_op::unary>();
    auto& bf = op_table<kernel_op::binary>();
    const std::string name = std::string(unary_op_name(uop)) + " 64x112x112";
    row(name, "fwd", 8.0 * double(n), "GB/s", [&] { uf(cpu, u, x.data(), y.data()); }, false);
    row(name, "bwd", 12.0 * double(n), "GB/s", [&] { bf(cpu, b, dy.data(), y.data(), dx.data()); }, false);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mb = 16;
  std::string only;
  std::vector<std::string> problems;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) g_reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc) set_num_threads(std::atoi(argv[++i]));
    else if (a == "--mb" && i + 1 < argc) mb = std::max(1, std::atoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--cpu-time") g_cpu_time = true;
    else if (a == "--nhwc") g_nhwc = true;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: bench_backends [--mb N] [--reps N] [--threads T] [--cpu-time] [--nhwc] [--only conv|gemm|matmul|linear|concat|other] [problem ...]\n");
      return 0;
    } else problems.push_back(a);
  }
  const std::string m = "mb" + std::to_string(mb);
  std::vector<std::pair<std::string, std::string>> convs;  // (net layer, problem)
  if (!problems.empty()) {
    for (auto& p : problems) convs.push_back({"", p});
  } else {
    convs = {
        {"alexnet conv1", m + "ic3ih224oc64oh55kh11sh4ph2"},
        {"alexnet conv2", m + "ic64ih27oc192oh27kh5ph2"},
        {"alexnet conv3", m + "ic192ih13oc384oh13kh3ph1"},
        {"alexnet conv4", m + "ic384ih13oc256oh13kh3ph1"},
        {"alexnet conv5", m + "ic256ih13oc256oh13kh3ph1"},
        {"resnet50 conv1", m + "ic3ih224oc64oh112kh7sh2ph3"},
        {"resnet50 res2 1x1 reduce", m + "ic256ih56oc64oh56kh1ph0"},
        {"resnet50 res2 3x3", m + "ic64ih56oc64oh56kh3ph1"},
        {"resnet50 res2 1x1 expand", m + "ic64ih56oc256oh56kh1ph0"},
        {"resnet50 res3 3x3 s2", m + "ic128ih56oc128oh28kh3sh2ph1"},
        {"resnet50 res3 3x3", m + "ic128ih28oc128oh28kh3ph1"},
        {"resnet50 res3 1x1 down s2", m + "ic256ih56oc512oh28kh1sh2ph0"},
        {"resnet50 res3 1x1 reduce", m + "ic512ih28oc128oh28kh1ph0"},
        {"resnet50 res4 3x3", m + "ic256ih14oc256oh14kh3ph1"},
        {"resnet50 res4 1x1 expand", m + "ic256ih14oc1024oh14kh1ph0"},
        {"resnet50 res5 3x3", m + "ic512ih7oc512oh7kh3ph1"},
        {"resnet50 res5 1x1 reduce", m + "ic2048ih7oc512oh7kh1ph0"},
    };
  }
  std::printf("bench_backends: %d threads, median of %d (%s), batch %lld; n/o = native_ms / onednn_ms (>1: onednn faster)",
              num_threads(), g_reps, g_cpu_time ? "cpu time" : "wall time", (long long)mb);
#ifdef KILN_HAVE_ONEDNN
  std::printf("; oneDNN %s; reord = onednn ms/call reordering to/from its layouts, w_reord = weights' part",
              onednn::version());
#endif
  std::printf("\n");
  try {
    if (only.empty() || only == "conv") {
      header("convolutions (rate: GFLOP/s)");
      for (auto& [layer, p] : convs) {
        if (!layer.empty()) std::printf("%s\n", layer.c_str());
        bench_conv(p);
      }
    }
    if ((only.empty() || only == "gemm") && problems.empty()) {
      header("classifier GEMMs (rate: GFLOP/s)");
      bench_linear("alexnet fc6", mb, 9216, 4096);
      bench_linear("alexnet fc7", mb, 4096, 4096);
      bench_linear("alexnet fc8", mb, 4096, 1000);
      bench_linear("resnet50 fc", mb, 2048, 1000);
    }
#ifdef KILN_HAVE_ONEDNN
    if ((only.empty() || only == "matmul") && problems.empty()) {
      std::printf("\n# batched gemm: native vs dnnl_sgemm per product vs one oneDNN matmul\n");
      for (auto [bt, m, n, k] : std::vector<std::array<int64_t, 4>>{
               {mb, 64, 64, 64}, {mb * 8, 49, 49, 64}, {mb * 8, 197, 197, 64}, {mb, 256, 256, 256}, {mb, 512, 512, 512}})
        for (auto [ta, tb] : std::vector<std::pair<bool, bool>>{{false, false}, {false, true}, {true, false}})
          bench_batched(bt, m, n, k, ta, tb);
    }
#endif
    if ((only.empty() || only == "linear") && problems.empty()) {
      header("inner product, linear_* ops (rate: GFLOP/s)");
      bench_ip("alexnet fc6", mb, 9216, 4096);
      bench_ip("alexnet fc7", mb, 4096, 4096);
      bench_ip("alexnet fc8", mb, 4096, 1000);
      bench_ip("vgg fc6", mb, 25088, 4096);
      bench_ip("googlenet fc", mb, 1024, 1000);
    }
    if ((only.empty() || only == "concat") && problems.empty()) bench_concat_sum(mb);
    if ((only.empty() || only == "other") && problems.empty()) bench_other(mb);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_backends: %s\n", e.what());
    return 1;
  }
  return 0;
}
