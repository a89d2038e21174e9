// Allreduce bandwidth over message sizes, float32, sum: the MPI library's collective as kiln calls
// it (MPI_Iallreduce under kiln's wait, with the signature check), kiln's ring (reduce-scatter +
// allgather over point to point), kiln's hierarchical one (within each node, across the node
// leaders, broadcast within the node; KILN_RANKS_PER_NODE=2 makes fake nodes of 2 ranks), and plain
// blocking MPI_Allreduce on MPI_COMM_WORLD (no kiln in the way), interleaved repeat by repeat so load from elsewhere hits all alike. Per size: warm-up, then the
// median over repeats of the slowest rank's time; algorithm bandwidth = bytes / time and bus
// bandwidth = algbw * 2 (n - 1) / n, as nccl-tests report them. Table on rank 0; --json FILE too.
//   cmake --build build --target kiln_allreduce_bench
//   KILN_RANKS_PER_NODE=2 mpirun --oversubscribe -np 4 build/bench/kiln_allreduce_bench [--max-mib 64] [--repeats 9]
//          [--no-check] [--json out.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/comm.h"
#if defined(KILN_HAVE_MPI)
#include <mpi.h>
#endif

using namespace kiln;

namespace {

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Seconds of one allreduce on `comm`: ranks start together (barrier), the slowest one counts.
double time_once(dist::Communicator& comm, const Tensor& x, dist::Communicator& timing) {
  timing.barrier("bench start");
  auto t0 = std::chrono::steady_clock::now();
  comm.allreduce(x, dist::ReduceOp::sum, "bench");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Tensor t = full({1}, s, TensorOptions(DType::float64));
  timing.allreduce(t, dist::ReduceOp::max, "bench time");
  return t.item();
}

// The same, for MPI_Allreduce called directly (0 without MPI).
double time_mpi(const Tensor& x) {
#if defined(KILN_HAVE_MPI)
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = std::chrono::steady_clock::now();
  MPI_Allreduce(MPI_IN_PLACE, x.data_ptr(), int(x.numel()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return s;
#else
  (void)x;
  return 0;
#endif
}

int run(int argc, char** argv) {
  int max_mib = 64, repeats = 9;
  bool check = true;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--max-mib" && i + 1 < argc) max_mib = std::stoi(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::stoi(argv[++i]);
    else if (a == "--no-check") check = false;
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--max-mib N] [--repeats R] [--no-check] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  dist::CommOptions opts;
  opts.check = check;
  auto lib = dist::make_communicator("auto", opts);
  opts.algorithm = dist::AllreduceAlgorithm::ring;
  auto ring = dist::make_communicator("auto", opts);
  opts.algorithm = dist::AllreduceAlgorithm::hierarchical;
  auto hier = dist::make_communicator("auto", opts);
  auto timing = dist::make_communicator("auto");
  const int n = lib->size(), rank = lib->rank();
  const double bus_factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;

  nlohmann::json rows = nlohmann::json::array();
  if (rank == 0) {
    std::printf("allreduce float32 sum, %d ranks, backend %s, signature check %s, median of %d repeats\n", n,
                lib->backend().c_str(), check ? "on" : "off", repeats);
    const char* pn = std::getenv("KILN_RANKS_PER_NODE");
    std::printf("hierarchical: %s\n", pn ? (std::string(pn) + " ranks per (fake) node").c_str() : "nodes by host name");
    std::printf("%10s | %10s %9s %9s | %10s %9s %9s | %10s %9s %9s | %10s %9s\n", "bytes", "lib us", "algbw", "busbw",
                "ring us", "algbw", "busbw", "hier us", "algbw", "busbw", "MPI us", "busbw");
    std::printf("%10s | %10s %9s %9s | %10s %9s %9s | %10s %9s %9s | %10s %9s\n", "", "", "GB/s", "GB/s", "", "GB/s",
                "GB/s", "", "GB/s", "GB/s", "", "GB/s");
  }
  for (int64_t bytes = 4096; bytes <= int64_t(max_mib) << 20; bytes *= 4) {
    const int64_t count = bytes / 4;
    Tensor x = full({count}, 1.0);
    std::vector<double> tl, tr, th, tm;
    for (int w = 0; w < 2; ++w) {
      time_once(*lib, x, *timing);
      time_once(*ring, x, *timing);
      time_once(*hier, x, *timing);
      time_mpi(x);
    }
    for (int r = 0; r < repeats; ++r) {
      tl.push_back(time_once(*lib, x, *timing));
      tr.push_back(time_once(*ring, x, *timing));
      th.push_back(time_once(*hier, x, *timing));
      tm.push_back(time_mpi(x));
    }
    double ml = median(tl), mr = median(tr), mh = median(th), mm = median(tm);
    double al = bytes / ml / 1e9, ar = bytes / mr / 1e9, ah = bytes / mh / 1e9, am = mm > 0 ? bytes / mm / 1e9 : 0;
    if (rank == 0) {
      std::printf("%10lld | %10.1f %9.3f %9.3f | %10.1f %9.3f %9.3f | %10.1f %9.3f %9.3f | %10.1f %9.3f\n",
                  static_cast<long long>(bytes), ml * 1e6, al, al * bus_factor, mr * 1e6, ar, ar * bus_factor, mh * 1e6,
                  ah, ah * bus_factor, mm * 1e6, am * bus_factor);
      std::fflush(stdout);
    }
    rows.push_back({{"bytes", bytes},
                    {"library", {{"time_us", ml * 1e6}, {"algbw_gbs", al}, {"busbw_gbs", al * bus_factor}}},
                    {"ring", {{"time_us", mr * 1e6}, {"algbw_gbs", ar}, {"busbw_gbs", ar * bus_factor}}},
                    {"hierarchical", {{"time_us", mh * 1e6}, {"algbw_gbs", ah}, {"busbw_gbs", ah * bus_factor}}},
                    {"mpi_allreduce", {{"time_us", mm * 1e6}, {"algbw_gbs", am}, {"busbw_gbs", am * bus_factor}}}});
  }
  if (rank == 0 && !json_path.empty()) {
    nlohmann::json doc = {{"ranks", n}, {"backend", lib->backend()}, {"dtype", "float32"}, {"check", check},
                          {"repeats", repeats}, {"rows", rows}};
    std::ofstream(json_path) << doc.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dist::init();
  int rc = 1;
  try {
    rc = run(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln_allreduce_bench: %s\n", e.what());
    dist::abort(1);
  }
  dist::finalize();
  return rc;
}
