// Printing tensors as PyTorch prints them: `tensor([...], dtype=int32)`, numbers right-aligned to
// one width, summarised with edge items and an ellipsis (rows of "..." between row blocks) past a
// threshold, wrapped at a line width, the dtype and device as suffixes where they are not the
// defaults (float32, int64 and bool; cpu), then requires_grad=True or grad_fn=<...>, booleans as
// True and False: the text PyTorch prints, with kiln's dtype names (dtype=int32).
//
//   std::cout << kiln::arange(20);     // tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,
//                                      //         18, 19])
//   kiln::PrintOptions o;
//   o.precision = 2;
//   kiln::set_print_options(o);       // torch.set_printoptions(precision=2)
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

class Tensor;

struct PrintOptions {
  int precision = 4;         // digits after the point of floating-point values
  int64_t threshold = 1000;  // more elements than this: summarise
  int edgeitems = 3;         // items shown at each end of a summarised dimension
  int linewidth = 80;        // characters per line before a row wraps
  // Scientific notation: PyTorch's choice (a ratio over 1000 between the largest and smallest
  // nonzero magnitudes, or one above 1e8 or below 1e-4), always, or never.
  enum class Sci : uint8_t { automatic, on, off } sci_mode = Sci::automatic;
};

// The process-wide options of operator<< and to_string(t) (torch.set_printoptions). Throws
// kiln::Error for a negative precision, threshold or edgeitems, or a linewidth under 1.
PrintOptions print_options();
void set_print_options(const PrintOptions& options);

std::string to_string(const Tensor& t, const PrintOptions& options);

}  // namespace kiln
