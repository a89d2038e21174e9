// Per-rank Chrome-trace timelines through dist::timeline::merge, as `kiln timeline merge` reads
// them: the input is one rank's file, merged after a fixed, valid rank-0 file (written once into
// the temp dir) so that the cross-rank checks (one rank per file, two files of one rank, rank 0's
// clock) and the merged file's writing are reached.
//   tools/fuzz timeline -s 120     (replay: ctest --test-dir build -R '^fuzz\.timeline$')
#include <string>

#include "dist/timeline.h"
#include "engine/error.h"
#include "fuzz/fuzz_target.h"

namespace {

// What timeline::stop() writes on rank 0 after align_clocks (nlohmann's dump: keys sorted).
const char kRank0[] =
    R"({"displayTimeUnit":"ms","otherData":{"clock":"rank 0's","clock_shift_us":0.0,)"
    R"("clock_sync_round_trip_us":0.0,"rank":0},"traceEvents":[)"
    R"({"args":{"name":"rank 0"},"name":"process_name","ph":"M","pid":0},)"
    R"({"args":{"name":"main"},"name":"thread_name","ph":"M","pid":0,"tid":0},)"
    R"({"cat":"compute","dur":120.5,"name":"forward","ph":"X","pid":0,"tid":0,"ts":1000.25}]})";

const std::string& rank0_path() {
  static const std::string path =
      kiln::fuzz::write_temp("trace.rank0.json", reinterpret_cast<const uint8_t*>(kRank0), sizeof kRank0 - 1);
  return path;
}

}  // namespace

KILN_FUZZ_TARGET(timeline) {
  const std::string rank0 = rank0_path();
  const std::string path = kiln::fuzz::write_temp("trace.rank1.json", data, size);
  try {
    kiln::dist::timeline::merge({rank0, path}, kiln::fuzz::temp_dir() + "/merged.json");
  } catch (const kiln::Error&) {
  }
  return 0;
}
