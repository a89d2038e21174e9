// NumPy .npz reader: a zip archive of .npy members, stored (np.savez) or deflated
// (np.savez_compressed), with ZIP64 extra fields as numpy writes them. The central directory is
// the index; each member's local header is checked against it and its CRC-32 verified. Plus
// NpzDataset, an image + target pair of arrays (x/y, or images/masks as the RAMP astro data).
//   ctest --test-dir build -R test_npz
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "io/data/synthetic.h"

namespace kiln {

// Members in archive order, names without ".npy". Throws kiln::Error naming the file and the
// byte offset on a missing end record, bad signatures, a header that disagrees with the central
// directory, truncation, an unsupported method or flag (encryption), corrupt deflate data, a CRC
// mismatch, or a malformed member .npy.
std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path);
// The same from the file's bytes in memory; `name` starts every message. Members may not share
// bytes (their [local header, data end) ranges by the directory's sizes are disjoint), so the
// arrays together are at most deflate's 1032:1 of the input, however the directory is forged.
std::vector<std::pair<std::string, Tensor>> parse_npz(const uint8_t* data, size_t size, const std::string& name);

// Arrays as a data set sample: N rows; a [N, H, W] input becomes [N, 1, H, W]; NHWC with 1 or
// 3 channels last (and not first) becomes NCHW. Integer 1-d targets become int64 labels; other
// targets (masks) become float32, with a channel dim added to [N, H, W].
Tensor npz_inputs(Tensor x);
Tensor npz_targets(Tensor y);

class NpzDataset : public TensorDataset {
 public:
  NpzDataset(const std::string& path, const std::string& input_key, const std::string& target_key);
};

}  // namespace kiln
