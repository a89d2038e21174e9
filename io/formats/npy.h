// NumPy .npy reader (format versions 1.0, 2.0 and 3.0; numpy/lib/format.py). Little-endian
// <f4 <f8 <i4 <i8, |u1 and |b1 (bool, returned as uint8), C order only. .npz: io/formats/npz.h.
//   ctest --test-dir build -R test_readers
#pragma once

#include <string>

#include "engine/tensor.h"

namespace kiln {

// The array as a contiguous Tensor (float32, float64, int32, int64 or uint8). Throws kiln::Error
// naming the file and byte offset on a bad magic or version, a malformed header, an unsupported
// dtype or byte order, Fortran order, or a data size that disagrees with the shape.
Tensor read_npy(const std::string& path);

// The same from bytes in memory; `name` (e.g. "data.npz:x_train.npy") starts every message and
// offsets count from `data`.
Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name);

}  // namespace kiln
