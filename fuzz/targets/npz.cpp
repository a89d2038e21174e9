// .npz archives (zip, deflate, ZIP64) as `kiln train --data file.npz` opens them: the file through
// open_dataset_dir, which reads every member, reshapes inputs and targets and counts the classes.
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/data/datasets.h"

KILN_FUZZ_TARGET(npz) {
  std::string path = kiln::fuzz::write_temp("fuzz.npz", data, size);
  try {
    kiln::open_dataset_dir(path);
  } catch (const kiln::Error&) {
  }
  return 0;
}
