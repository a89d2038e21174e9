// bfloat16 GEMM throughput (kernels/cpu/native/gemm_bf16.h) against the float32 GEMM on the same
// problems: the products the native channels-last convolution makes (forward: pixels x K x RSC
// with wt transposed; backward-weights: K x RSC x pixels with diff_dst transposed), a linear layer
// and squares; on 1 and 2 threads. Columns: float32 sgemm (its best path), bf16 with float32 C on
// each bfloat16 path (avx512_bf16, widen), and avx512_bf16 with bfloat16 C (one rounding pass).
// GFLOP/s of the median repeat.
//   cmake --build build --target bench_gemm_bf16 && ./build/bench/bench_gemm_bf16
//   options: --threads 1,2  --quick (small sizes)  --seconds S (time per point)
//            --shape M,N,K,TT (repeatable, TT one of NN NT TN TT; replaces the default list)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/native/gemm_bf16.h"

namespace {

using kiln::BFloat16;
using kiln::native::Bf16GemmPath;

struct Shape {
  int64_t m, n, k;
  bool ta, tb;
  std::string note;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of `run` over about `seconds` of repeats (3 to 200), after one warm-up call.
double median_time(const std::function<void()>& run, double seconds) {
  run();
  const double t0 = now();
  run();
  const double once = std::max(now() - t0, 1e-7);
  const int reps = int(std::clamp(seconds / once, 3.0, 200.0));
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const double s0 = now();
    run();
    times.push_back(now() - s0);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  std::vector<Shape> shapes;
  bool quick = false;
  double seconds = 0.4;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads") {
      threads.clear();
      for (auto& t : split(next())) threads.push_back(std::atoi(t.c_str()));
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--seconds") {
      seconds = std::atof(next().c_str());
    } else if (a == "--shape") {
      auto v = split(next());
      if (v.size() == 4 && v[3].size() == 2)
        shapes.push_back({std::atol(v[0].c_str()), std::atol(v[1].c_str()), std::atol(v[2].c_str()), v[3][0] == 'T',
                          v[3][1] == 'T', "custom"});
    } else {
      std::fprintf(stderr, "unknown option %s (see the file header)\n", a.c_str());
      return 2;
    }
  }
  if (shapes.empty()) {
    // ResNet-50-like layers at batch 1 (channels-last convolution as bench_conv --layout nhwc runs it).
    shapes.push_back({3136, 64, 576, false, true, "conv fwd 3x3 64ch 56x56"});
    shapes.push_back({784, 128, 1152, false, true, "conv fwd 3x3 128ch 28x28"});
    shapes.push_back({196, 256, 2304, false, true, "conv fwd 3x3 256ch 14x14"});
    shapes.push_back({3136, 64, 256, false, true, "conv fwd 1x1 256->64 56x56"});
    shapes.push_back({64, 576, 3136, true, false, "conv wgrad 3x3 64ch 56x56"});
    shapes.push_back({3136, 576, 64, false, false, "conv bwd-data 3x3 64ch 56x56"});
    if (!quick) {
      shapes.push_back({128, 4096, 4096, false, true, "linear fc 4096"});
      for (int64_t s : {256, 1024}) shapes.push_back({s, s, s, false, false, "square"});
    }
  }
  std::printf("# bench_gemm_bf16: CPU features: %s; float32 path %s; GFLOP/s = 2*M*N*K / median time\n",
              kiln::native::cpu_features_str().c_str(), kiln::native::gemm_path_name(kiln::native::gemm_path()));
  std::printf("%3s %2s %6s %6s %6s %9s %11s %11s %11s  %s\n", "thr", "op", "M", "N", "K", "f32", "bf16>f32",
              "widen>f32", "bf16>bf16", "shape");
  const bool have_bf16 = kiln::native::bf16_gemm_path_available(Bf16GemmPath::avx512_bf16);
  for (int nt : threads) {
    kiln::set_num_threads(nt);
    for (const Shape& s : shapes) {
      const size_t na = size_t(s.m * s.k), nb = size_t(s.k * s.n), nc = size_t(s.m * s.n);
      std::vector<float> af(na), bf(nb), cf(nc);
      std::vector<BFloat16> ah(na), bh(nb), ch(nc);
      for (size_t i = 0; i < na; ++i) ah[i] = BFloat16(af[i] = float(int(i % 13) - 6) * 0.1f);
      for (size_t i = 0; i < nb; ++i) bh[i] = BFloat16(bf[i] = float(int(i % 7) - 3) * 0.1f);
      const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
      const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
      auto gflops = [&](double t) { return flop / t * 1e-9; };
      const double t32 = median_time(
          [&] { kiln::native::sgemm(s.ta, s.tb, s.m, s.n, s.k, 1.f, af.data(), lda, bf.data(), ldb, 0.f, cf.data(), s.n); },
          seconds);
      auto bf16_to_f32 = [&] {
        kiln::native::bf16gemm(s.ta, s.tb, s.m, s.n, s.k, 1.f, ah.data(), lda, bh.data(), ldb, 0.f, cf.data(), s.n);
      };
      auto bf16_to_bf16 = [&] {
        kiln::native::bf16gemm_round(s.ta, s.tb, s.m, s.n, s.k, 1.f, ah.data(), lda, bh.data(), ldb, 0.f, ch.data(), s.n);
      };
      double tb = 0, tr = 0;
      if (have_bf16) {
        kiln::native::set_bf16_gemm_path(Bf16GemmPath::avx512_bf16);
        tb = median_time(bf16_to_f32, seconds);
        tr = median_time(bf16_to_bf16, seconds);
      }
      kiln::native::set_bf16_gemm_path(Bf16GemmPath::widen);
      const double tw = median_time(bf16_to_f32, seconds);
      kiln::native::set_bf16_gemm_path(Bf16GemmPath::best);
      char b1[32] = "-", b3[32] = "-";
      if (have_bf16) {
        std::snprintf(b1, sizeof b1, "%.1f", gflops(tb));
        std::snprintf(b3, sizeof b3, "%.1f", gflops(tr));
      }
      std::printf("%3d %c%c %6lld %6lld %6lld %9.1f %11s %11.1f %11s  %s\n", nt, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N',
                  (long long)s.m, (long long)s.n, (long long)s.k, gflops(t32), b1, gflops(tw), b3, s.note.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
