// GEMM throughput of every native float32 path (avx512, avx2, eigen) on square and
// convolution-shaped problems, on 1 and 2 threads: GFLOP/s of the median repeat (and of the best
// one, which is what a busy shared machine lets through undisturbed).
//   cmake --build build --target bench_gemm && ./build/bench/bench_gemm
//   options: --paths avx512,avx2,eigen  --threads 1,2  --trans NN,NT,TN,TT  --quick (small sizes)
//            --shape M,N,K (repeatable; replaces the default list)  --seconds S (time per point)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/native/gemm.h"

namespace {

using kiln::native::GemmPath;

struct Shape {
  int64_t m, n, k;
  const char* note;
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths = {"avx512", "avx2", "eigen"}, transes = {"NN"};
  std::vector<int> threads = {1, 2};
  std::vector<Shape> shapes;
  bool quick = false;
  double seconds = 0.4;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--paths") paths = split(next());
    else if (a == "--threads") { threads.clear(); for (auto& t : split(next())) threads.push_back(std::atoi(t.c_str())); }
    else if (a == "--trans") transes = split(next());
    else if (a == "--quick") quick = true;
    else if (a == "--seconds") seconds = std::atof(next().c_str());
    else if (a == "--shape") {
      auto v = split(next());
      if (v.size() == 3) shapes.push_back({std::atol(v[0].c_str()), std::atol(v[1].c_str()), std::atol(v[2].c_str()), "custom"});
    } else {
      std::fprintf(stderr, "unknown option %s (see the file header)\n", a.c_str());
      return 2;
    }
  }
  if (shapes.empty()) {
    for (int64_t s : {64, 128, 256, 512, 1024, 2048})
      if (!quick || s <= 512) shapes.push_back({s, s, s, "square"});
    shapes.push_back({64, 3136, 576, "conv 3x3 64ch 56x56"});
    shapes.push_back({256, 784, 2304, "conv 3x3 256ch 28x28"});
    shapes.push_back({4096, 64, 9216, "conv wgrad-like"});
    shapes.push_back({128, 4096, 4096, "linear fc 4096"});
  }
  std::printf("# bench_gemm: CPU features: %s; GFLOP/s = 2*M*N*K / median time\n",
              kiln::native::cpu_features_str().c_str());
  std::printf("%-7s %-3s %3s %6s %6s %6s %9s %10s %9s  %s\n", "path", "op", "thr", "M", "N", "K", "GFLOP/s", "ms",
              "best", "shape");
  for (const std::string& pname : paths) {
    GemmPath p = GemmPath::ref;
    for (GemmPath q : {GemmPath::avx512, GemmPath::avx2, GemmPath::eigen, GemmPath::ref})
      if (pname == kiln::native::gemm_path_name(q)) p = q;
    if (!kiln::native::gemm_path_available(p) || pname != kiln::native::gemm_path_name(p)) {
      std::printf("%-7s not available here\n", pname.c_str());
      continue;
    }
    kiln::native::set_gemm_path(p);
    for (int nt : threads) {
      kiln::set_num_threads(nt);
      for (const std::string& tr : transes) {
        const bool ta = tr.size() > 0 && tr[0] == 'T', tb = tr.size() > 1 && tr[1] == 'T';
        for (const Shape& s : shapes) {
          std::vector<float> a(size_t(s.m * s.k)), b(size_t(s.k * s.n)), c(size_t(s.m * s.n));
          for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 13) - 6) * 0.1f;
          for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 7) - 3) * 0.1f;
          const int64_t lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n;
          auto run = [&] {
            kiln::native::sgemm(ta, tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), s.n);
          };
          run();  // warm up: page in, size the packing buffers
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
          const double med = times[times.size() / 2];
          const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
          std::printf("%-7s %-3s %3d %6lld %6lld %6lld %9.1f %10.3f %9.1f  %s\n", pname.c_str(), tr.c_str(), nt,
                      (long long)s.m, (long long)s.n, (long long)s.k, flop / med * 1e-9, med * 1e3,
                      flop / times.front() * 1e-9, s.note);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
