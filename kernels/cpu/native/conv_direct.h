// Internal to the native direct convolution (conv_direct.cpp): the register tile each ISA file
// provides. A tile is nb output pixels (nb <= mr; any pixels: the driver hands each one's source
// and output) times one panel of nr output channels, accumulated in registers over the whole reduction (every kernel tap and input
// channel) and stored once, with bias, a residual already in the output, and ReLU applied on the
// way out. The reduction is a list of segments: for each kernel row r (or each tap (r, s) when
// the kernel is dilated along w), seg_len contiguous floats of the channels-last source starting
// at a pixel's source plus the segment's offset. Kept free of templates and std:: types, so the
// ISA files (compiled with -mavx512f, -mavx2) share no inline code with the rest of the build.
//   Test: ctest --test-dir build -R test_conv_direct      Bench: build/bench/bench_conv --layout nhwc
#pragma once

#include <cstdint>

namespace kiln::native::direct {

struct TileArgs {
  const float* const* a;  // per pixel: the source it reads at offset 0 of every segment
  const int64_t* seg;     // nseg offsets (floats) of the segments from a pixel's source
  int64_t nseg, seg_len;  // segments of seg_len contiguous floats each
  const float* b;         // the packed weight panel: [nseg * seg_len][nr], 64-byte aligned
  float* const* c;        // per pixel: its output at channel 0
  int64_t c_off;          // the panel's first channel
  int64_t nb, kn;         // pixels in the tile (1..mr), valid channels in the panel (1..nr)
  const float* bias;      // kn values, or null
  bool accumulate;        // add the tile's result to what c holds (a fused residual)
  bool relu;
};
using TileFn = void (*)(const TileArgs&);

// Backward-weights tile: dW[k0 + i][l0 + l] += sum over pixels of dy[pixel][k0 + i] * x[pixel][l]
// for i < nk (<= wr) and l < nl (<= wl), with dW in [K][R][S][C] order, whose row segment of one
// kernel row (S*C floats, or C for one tap when dilated along w) matches a pixel's source run.
// Pixels: nrows rows of npx; a pixel's dy follows the previous one's by dy_step floats (rows
// of dy are consecutive too), its source by x_step; row i's first pixel reads x_rows[i] + x_off.
struct WeiTileArgs {
  const float* dy;     // dy of pixel 0 at channel k0
  int64_t dy_step;     // K
  const float* const* x_rows;
  int64_t x_off;       // the segment's offset plus l0
  int64_t x_step;
  int64_t npx, nrows;
  float* dw;           // dW[k0][segment's first element + l0]
  int64_t dw_step;     // floats between dW rows (R*S*C)
  int64_t nk, nl;      // channels k of the tile (1..wr), valid lanes (1..wl)
};
using WeiTileFn = void (*)(const WeiTileArgs&);

// The same sum transposed, for short runs (few input channels, the first layer): dWt[l0 + i][k0 + j]
// for i < nl (<= mr) and j < nk (<= nr), dWt in [R][S][C][K] order: output channels along the
// vector, the run's floats broadcast. dw points at dWt[segment's first element + l0][k0], rows
// dw_step (K) apart.

struct Isa {
  const char* name = nullptr;  // null: not compiled into this build
  int mr = 0, nr = 0;          // pixels and output channels of the largest forward tile
  TileFn tile = nullptr;
  int wr = 0, wl = 0;          // output channels and reduction lanes of the largest backward-weights tile
  WeiTileFn wei_tile = nullptr;
  WeiTileFn wei_tile_t = nullptr;  // mr lanes x nr output channels
};

// bfloat16 forward tile (conv_direct_avx512bf16.cpp, AVX512_BF16): the same shape and fields with
// a, b and c bfloat16 (uint16_t bits) and the bias float32; the reduction runs over pairs of
// floats of a segment (seg_len even), the panel packed [pair][nr][2], products summed in
// float32 by vdpbf16ps and rounded to bfloat16 once, as the tile is stored. Strides in elements.
struct TileArgsBf16 {
  const uint16_t* const* a;
  const int64_t* seg;
  int64_t nseg, seg_len;
  const uint16_t* b;
  uint16_t* const* c;
  int64_t c_off;
  int64_t nb, kn;
  const float* bias;
  bool accumulate, relu;
};
using TileBf16Fn = void (*)(const TileArgsBf16&);
struct IsaBf16 {
  const char* name = nullptr;  // null: not compiled into this build
  int mr = 0, nr = 0;
  TileBf16Fn tile = nullptr;
};
IsaBf16 avx512bf16_isa();  // 12 pixels x 32 channels

Isa avx512_isa();  // conv_direct_avx512.cpp: 12 pixels x 32 channels; weights 12 x 32
Isa avx2_isa();    // conv_direct_avx2.cpp: 6 pixels x 16 channels; weights 6 x 16

}  // namespace kiln::native::direct
