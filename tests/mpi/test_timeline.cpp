// Timelines on one clock: align_clocks estimates each rank's clock against rank 0's (checked here
// against the truth: on one host every process reads the same monotonic clock, so the shift must
// equal the difference of the ranks' timeline origins within half the round trip), the files are
// written on rank 0's clock, and merge() puts them into one trace with a row per rank, refusing
// what is not such a trace.
//   ctest --test-dir build -L mpi -R timeline
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/timeline.h"
#include "tests/mpi/mpi_testing.h"

using namespace kiln;

namespace {


std::string error_of(const std::vector<std::string>& inputs, const std::string& out) {
  try {
    dist::timeline::merge(inputs, out);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("align_clocks puts every rank on rank 0's clock, within half the round trip") {
  auto comm = test::world_comm();
  const std::pair<double, double> estimate = dist::timeline::align_clocks(*comm);
  const double shift = estimate.first, rtt = estimate.second;  // plain names: INFO captures them
  Tensor all = zeros({int64_t(comm->size())}, DType::float64), mine = zeros({1}, DType::float64);
  mine.data<double>()[0] = dist::timeline::origin_us();
  comm->allgather(mine, all, "origins");
  const double want = all.data<double>()[comm->rank()] - all.data<double>()[0];
  INFO("shift ", shift, " us, want ", want, " us, round trip ", rtt, " us");
  if (comm->rank() == 0) {
    CHECK(shift == 0);
  } else {
    CHECK(rtt > 0);
    // Cristian's bound: rank 0 read its clock between this rank's send and receive, so the
    // estimate is off by at most half that round trip (1e-3 us: the doubles' rounding).
    CHECK(std::abs(shift - want) <= rtt / 2 + 1e-3);
  }
}

TEST_CASE("timeline merge: one trace, a row per rank, on one clock; foreign files refused") {
  auto comm = test::world_comm();
  const double rtt = dist::timeline::align_clocks(*comm).second;
  Tensor rtts = zeros({int64_t(comm->size())}, DType::float64), mine = full({1}, rtt, DType::float64);
  comm->allgather(mine, rtts, "round trips");
  test::TempDir dir("timeline_merge");
  // Every rank's directory is its own (TempDir per process): rank 0 gathers the paths by name.
  const std::string base = "/tmp/kiln-timeline-" + std::to_string(comm->size()) + ".json";
  dist::timeline::start(base, comm->rank(), comm->size());
  { dist::timeline::Span s("compute", "before the barrier"); }
  comm->barrier("between the spans");
  { dist::timeline::Span s("compute", "after the barrier"); }
  dist::timeline::stop();
  comm->barrier("files written");
  if (comm->rank() == 0) {
    std::vector<std::string> files;
    for (int r = 0; r < comm->size(); ++r) files.push_back(dist::timeline::rank_path(base, r, comm->size()));
    const std::string out = (dir.path / "merged.json").string();
    CHECK(dist::timeline::merge(files, out) > 0);
    std::ifstream in(out);
    const nlohmann::json doc = nlohmann::json::parse(in);
    std::set<int64_t> rows;
    std::vector<double> after, before;
    for (const auto& e : doc["traceEvents"]) {
      if (e["name"] == "process_name") rows.insert(e["pid"].get<int64_t>());
      if (e["name"] == "after the barrier") after.push_back(e["ts"].get<double>());
      if (e["name"] == "before the barrier") before.push_back(e["ts"].get<double>() + e["dur"].get<double>());
    }
    CHECK(rows.size() == size_t(comm->size()));
    REQUIRE(after.size() == size_t(comm->size()));
    REQUIRE(before.size() == size_t(comm->size()));
    // On one clock the barrier orders the spans: no rank leaves before every rank has entered.
    // Each rank's times are off by at most half its round trip (Cristian's bound), so the earliest
    // leaving may precede the latest entering by at most the two largest half round trips.
    const double* r = rtts.data<double>();
    const double slack = *std::max_element(r, r + comm->size()) + 1e-3;
    CHECK(*std::min_element(after.begin(), after.end()) >= *std::max_element(before.begin(), before.end()) - slack);
    // What is not a per-rank kiln trace is refused by name.
    const std::string junk = (dir.path / "junk.json").string();
    std::ofstream(junk) << "{\"events\": []}";
    CHECK(error_of({files[0], junk}, out).find("is not a Chrome trace") != std::string::npos);
    // A clock named by something other than a string is not rank 0's (it was the JSON library's
    // type_error before).
    const std::string odd_clock = (dir.path / "odd_clock.json").string();
    std::ofstream(odd_clock) << "{\"traceEvents\": [{\"pid\": 7}], \"otherData\": {\"clock\": 0}}";
    CHECK(error_of({files[0], odd_clock}, out).find("is not on rank 0's clock") != std::string::npos);
    // A pid that is no rank (negative, or past int32) is refused by name.
    const std::string minus = (dir.path / "minus.json").string();
    std::ofstream(minus) << "{\"traceEvents\": [{\"pid\": -1}]}";
    CHECK(error_of({files[0], minus}, out).find("\"pid\" is -1, not a rank") != std::string::npos);
    if (comm->size() > 1)
      CHECK(error_of({files[0], files[0]}, out).find("are both rank 0") != std::string::npos);
    for (const auto& f : files) std::remove(f.c_str());
  }
  comm->barrier("done");
}
