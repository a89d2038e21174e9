// The settings every rank of a data-parallel job must share, compared across ranks at start
// (the model's structure is compared by the strategies themselves). A rank whose batch size,
// optimizer, schedule, dtype, strategy or data set differs from the others would not fail: it
// would replay batches, count samples twice or diverge silently. check_settings turns that into
// one error, the same on every rank, naming each setting and every rank's value.
//   ctest --test-dir build -L mpi -R settings
#pragma once

#include <string>
#include <vector>

#include "dist/comm.h"

namespace kiln::dist {

struct Setting {
  std::string name;   // "batch size per rank"
  std::string value;  // "32"
};
using Settings = std::vector<Setting>;

// A number as a setting's value: the shortest text that reads back as `v` ("0.05", not
// "0.050000000000000003"), so equal values compare equal and the message reads as typed.
std::string setting_number(double v);

// Collective over every rank of `comm` (each calls it once, with its own list, in the same
// place). Returns when every rank's list equals rank 0's; else kiln::Error on every rank:
//   the ranks' settings differ (every rank of a job must run with the same):
//     batch size per rank: rank 0 has 32, rank 1 has 16
//     optimizer: rank 0 has sgd, rank 2 has adam
// Cheap when they agree: one allgather of a hash. A list of more than 64 KiB is an error.
void check_settings(Communicator& comm, const Settings& mine);

// The comparison itself, on every rank's list (index = rank): "" when all equal rank 0's, else
// the lines of the message above (one per setting that differs, rank 0's order first).
std::string settings_differences(const std::vector<Settings>& ranks);

}  // namespace kiln::dist
