// A time series as `kiln train --data timeseries:FILE:OPTIONS` reads it: the input's first line
// is the spec's options (":window=6:targets=a"), the rest the CSV file, through open_dataset_dir
// (read_csv_table, the option parser, split_by_time, the first window of each split).
#include <cstring>
#include <string>

#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/data/datasets.h"

KILN_FUZZ_TARGET(timeseries) {
  const char* text = reinterpret_cast<const char*>(data);
  const void* nl = std::memchr(data, '\n', size);
  const size_t cut = nl ? size_t(static_cast<const char*>(nl) - text) : size;
  const std::string options(text, cut);
  const size_t body = cut < size ? cut + 1 : size;
  const std::string path = kiln::fuzz::write_temp("series.csv", data + body, size - body);
  try {
    const kiln::Splits s = kiln::open_dataset_dir("timeseries:" + path + options);
    if (s.train && s.train->size() > 0) (void)s.train->get(0);
    if (s.test && s.test->size() > 0) (void)s.test->get(s.test->size() - 1);
  } catch (const kiln::Error&) {
  }
  return 0;
}
