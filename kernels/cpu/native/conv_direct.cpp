// Native direct convolution, float32, channels-last, groups == 1: no im2col. The weights are
// packed once per call into panels of nr output channels, [R][S][C][nr] each (zero past K); a
// register tile (conv_direct.h: 12 pixels x 32 channels on AVX-512, 6 x 16 on AVX2) then walks the
// whole reduction for nb pixels of one output row, reading the source in place: in NHWC the S
// taps of one kernel row are S*C contiguous floats of the source when dilation_w == 1, so the
// reduction is R runs of S*C floats, with the weights laid out in the same order. Where the
// convolution reads padding, each work item first copies the input rows it reads into a small
// zero-bordered window (thread-private, sized to stay in L2 beside one weight panel).
//
// Work items are (image, block of output rows, group of panels), taken by threads as they come
// free; within an item, panel by panel so a panel stays in cache while every pixel of the block
// passes through it. Each output element is summed by one thread in a fixed order: bits
// independent of the thread count.
//
// Backward-weights has tiles of its own (conv_direct.h), each thread owning a share of dW.
// Backward-data is the forward's kernel: at stride 1 diff_src is the convolution of diff_dst with the
// weights flipped in R and S and C, K swapped, padding (R-1)*dilation - pad; at stride s, one such
// convolution per phase of diff_src (rows h = a mod s, columns likewise) with that phase's taps.
//   Test: ctest --test-dir build -R test_conv_direct      Bench: build/bench/bench_conv --layout nhwc
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/env.h"
#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/native/conv_direct.h"
#include "kernels/cpu/native/cpu_features.h"

namespace kiln::native {
namespace {

using direct::Isa;
using direct::TileArgs;
using direct::WeiTileArgs;

// Window budget per work item in bytes: with one weight panel (up to ~600 KB for 3x3x512) it
// stays within a 1 MiB L2.
constexpr int64_t kWindowBytes = int64_t(256) << 10;

// -1: not chosen yet; 0: off; 1: avx512; 2: avx2.
std::atomic<int> g_path{-1};

int best_path() {
  if (has_avx512f() && direct::avx512_isa().name) return 1;
  if (has_avx2() && direct::avx2_isa().name) return 2;
  return 0;
}

int path_index(const std::string& name) {
  if (name == "off") return 0;
  if (name == "avx512") return 1;
  if (name == "avx2") return 2;
  return -1;
}

int current_path() {
  int p = g_path.load(std::memory_order_acquire);
  if (p >= 0) return p;
  // KILN_CONV_DIRECT=off sends these convolutions down the im2col path (to compare the two).
  const std::string v = env_choice("KILN_CONV_DIRECT", {"auto", "avx512", "avx2", "off"});
  if (v.empty() || v == "auto") {
    p = best_path();
  } else {
    KILN_CHECK(conv_direct_path_available(v), "KILN_CONV_DIRECT=", v,
               " is not available on this CPU or build (CPU features: ", cpu_features_str(), ")");
    p = path_index(v);
  }
  g_path.store(p, std::memory_order_release);
  return p;
}

Isa isa_of(int path) { return path == 1 ? direct::avx512_isa() : path == 2 ? direct::avx2_isa() : Isa{}; }

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float, FreeDeleter>;

AlignedFloats aligned_floats(int64_t n, const char* what) {
  const size_t bytes = (size_t(std::max<int64_t>(n, 1)) * sizeof(float) + 63) / 64 * 64;
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  KILN_CHECK(p, "conv2d (native direct): out of memory for ", bytes, " bytes of ", what);
  return AlignedFloats(p);
}

// Panels of nr output channels of the forward-form problem d: panel j is [R][S][C][nr] for
// channels [j*nr, j*nr + nr), zero past K. Weight (k, c, tap) is wei[row(k, c) * RS0 + tap_src[tap]]
// with row(k, c) = k*C + c (the forward's KCRS), or c*K + k when `swapped` (backward-data reads the
// forward's weights with C and K exchanged); RS0 is the taps per row of wei, tap_src maps each of
// the R*S taps of d to one of them. The loops follow wei's rows, so it is read sequentially.
AlignedFloats pack_weights(const ConvDesc& d, int64_t nr, const float* wei, int64_t RS0, const std::vector<int64_t>& tap_src,
                           bool swapped) {
  const int64_t panels = (d.K + nr - 1) / nr, RS = d.R * d.S, RSC = RS * d.C;
  AlignedFloats wp = aligned_floats(panels * RSC * nr, "packed weights");
  float* out = wp.get();
  parallel_for(0, panels, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      float* panel = out + j * RSC * nr;
      const int64_t kn = std::min(nr, d.K - j * nr);
      if (kn < nr)
        for (int64_t i = 0; i < RSC; ++i) std::fill(panel + i * nr + kn, panel + (i + 1) * nr, 0.f);
      auto put = [&](int64_t l, int64_t c) {
        const int64_t k = j * nr + l;
        const float* w = wei + (swapped ? c * d.K + k : k * d.C + c) * RS0;
        for (int64_t t = 0; t < RS; ++t) panel[(t * d.C + c) * nr + l] = w[tap_src[size_t(t)]];
      };
      if (swapped) {
        for (int64_t c = 0; c < d.C; ++c)
          for (int64_t l = 0; l < kn; ++l) put(l, c);
      } else {
        for (int64_t l = 0; l < kn; ++l)
          for (int64_t c = 0; c < d.C; ++c) put(l, c);
      }
    }
  });
  return wp;
}

// How the tiles read the source: in place, or through a zero-bordered window of the rows a
// block of output rows reads where the convolution reads any padding. Segments: one per kernel
// row (S*C contiguous floats), or one per tap when the kernel is dilated along w.
struct Source {
  int64_t Wp;      // columns the convolution reads: (Q-1)*stride_w + (S-1)*dilation_w + 1
  bool window;     // copy rows into a window (some read lies outside the image)
  int64_t pitch;   // floats from one source row to the next
  std::vector<int64_t> seg;
  int64_t seg_len;

  explicit Source(const ConvDesc& d) : Wp((d.Q - 1) * d.stride_w + (d.S - 1) * d.dilation_w + 1) {
    window = d.pad_h > 0 || d.pad_w > 0 || (d.P - 1) * d.stride_h - d.pad_h + (d.R - 1) * d.dilation_h >= d.H ||
             Wp - 1 - d.pad_w >= d.W;
    pitch = (window ? Wp : d.W) * d.C;
    if (d.dilation_w == 1) {
      seg_len = d.S * d.C;
      for (int64_t r = 0; r < d.R; ++r) seg.push_back(r * d.dilation_h * pitch);
    } else {
      seg_len = d.C;
      for (int64_t r = 0; r < d.R; ++r)
        for (int64_t s = 0; s < d.S; ++s) seg.push_back(r * d.dilation_h * pitch + s * d.dilation_w * d.C);
    }
  }
  int64_t rows_read(const ConvDesc& d, int64_t out_rows) const {
    return (out_rows - 1) * d.stride_h + (d.R - 1) * d.dilation_h + 1;
  }
  int64_t window_elems(const ConvDesc& d, int64_t out_rows) const {
    return window ? rows_read(d, out_rows) * Wp * d.C : 0;
  }
  // The source read by output pixel (p0, 0) of image n at offset 0 of every segment; rows
  // [p0, p1) of the output read from there on, one output row every stride_h * pitch floats.
  const float* rows(const ConvDesc& d, const float* src, int64_t n, int64_t p0, int64_t p1, float* win) const {
    const int64_t C = d.C;
    if (!window) return src + ((n * d.H + p0 * d.stride_h - d.pad_h) * d.W - d.pad_w) * C;
    const int64_t ih0 = p0 * d.stride_h - d.pad_h, nrows = rows_read(d, p1 - p0);
    const int64_t lo = std::clamp<int64_t>(d.pad_w, 0, Wp), hi = std::clamp<int64_t>(d.W + d.pad_w, lo, Wp);
    for (int64_t rr = 0; rr < nrows; ++rr) {
      float* row = win + rr * Wp * C;
      const int64_t ih = ih0 + rr;
      if (ih < 0 || ih >= d.H) {
        std::memset(row, 0, sizeof(float) * size_t(Wp * C));
        continue;
      }
      std::memset(row, 0, sizeof(float) * size_t(lo * C));
      if (hi > lo)
        std::memcpy(row + lo * C, src + ((n * d.H + ih) * d.W + lo - d.pad_w) * C, sizeof(float) * size_t((hi - lo) * C));
      std::memset(row + hi * C, 0, sizeof(float) * size_t((Wp - hi) * C));
    }
    return win;
  }
};

// Where output pixel (n, p, q) lies: dst + n*image + p*row + q*pixel (channels contiguous).
struct DstLayout {
  int64_t image, row, pixel;
};

// Runs the forward-form problem d: dst = act(conv(src, packed weights) + bias [+ dst]).
void run(const ConvDesc& d, const Isa& isa, const float* src, const float* wp, const float* bias, float* dst,
         bool accumulate, bool relu, DstLayout out) {
  const int64_t C = d.C, K = d.K, nr = isa.nr, mr = isa.mr;
  const int64_t panels = (K + nr - 1) / nr, RSC = d.R * d.S * C;
  const Source so(d);
  // Output rows per item: a window of at most kWindowBytes (at least one row).
  const int64_t row_bytes = so.Wp * C * int64_t(sizeof(float));
  const int64_t rows_in = std::max<int64_t>(1, kWindowBytes / std::max<int64_t>(row_bytes, 1));
  int64_t rb = std::max<int64_t>(1, (rows_in - (d.R - 1) * d.dilation_h - 1) / d.stride_h + 1);
  rb = std::min(rb, d.P);
  const int64_t nblocks = (d.P + rb - 1) / rb;
  rb = (d.P + nblocks - 1) / nblocks;
  const int nt = in_parallel_region() ? 1 : num_threads();
  // Too few items for the team: split the panels too.
  const int64_t kgroups =
      std::clamp<int64_t>((2 * nt + d.N * nblocks - 1) / std::max<int64_t>(d.N * nblocks, 1), 1, panels);
  const int64_t items = d.N * nblocks * kgroups;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(nt, items));
  const int64_t win_elems = std::max<int64_t>(so.window_elems(d, rb), 1);
  AlignedFloats windows = aligned_floats(parts * win_elems, "source windows");
  const int64_t nchunks = (d.Q + mr - 1) / mr;  // pixels of a row in equal tiles (13 -> 7 + 6)

  // Items are taken in order as threads come free, not split up front: a thread slowed by another
  // process on its core takes fewer. Each output element is one item's: the bits stay the same.
  std::atomic<int64_t> next{0};
  parallel_for(0, parts, 1, [&](int64_t part_b, int64_t part_e) {
    for (int64_t part = part_b; part < part_e; ++part) {
      float* win = windows.get() + part * win_elems;
      for (int64_t item = next.fetch_add(1, std::memory_order_relaxed); item < items;
           item = next.fetch_add(1, std::memory_order_relaxed)) {
        const int64_t kg = item % kgroups, blk = item / kgroups % nblocks, n = item / kgroups / nblocks;
        const int64_t p0 = blk * rb, p1 = std::min(d.P, p0 + rb);
        const int64_t j0 = kg * panels / kgroups, j1 = (kg + 1) * panels / kgroups;
        if (p0 >= p1 || j0 >= j1) continue;
        const float* base = so.rows(d, src, n, p0, p1, win);
        TileArgs t{};
        t.a_step = d.stride_w * C;
        t.seg = so.seg.data();
        t.nseg = int64_t(so.seg.size());
        t.seg_len = so.seg_len;
        t.c_step = out.pixel;
        t.accumulate = accumulate;
        t.relu = relu;
        for (int64_t j = j0; j < j1; ++j) {
          t.b = wp + j * RSC * nr;
          t.kn = std::min(nr, K - j * nr);
          t.bias = bias ? bias + j * nr : nullptr;
          for (int64_t p = p0; p < p1; ++p) {
            const float* arow = base + (p - p0) * d.stride_h * so.pitch;
            float* crow = dst + n * out.image + p * out.row + j * nr;
            for (int64_t ch = 0; ch < nchunks; ++ch) {
              const int64_t q0 = ch * d.Q / nchunks, q1 = (ch + 1) * d.Q / nchunks;
              t.a = arow + q0 * d.stride_w * C;
              t.c = crow + q0 * out.pixel;
              t.nb = q1 - q0;
              isa.tile(t);
            }
          }
        }
      }
    }
  });
}

bool applies(const ConvDesc& d) {
  return d.nhwc && d.dtype == DType::float32 && d.groups == 1 && d.dilation_h >= 1 && d.dilation_w >= 1 &&
         d.stride_h >= 1 && d.stride_w >= 1 && current_path() != 0;
}

// A 1x1, stride-1, unpadded convolution is a plain GEMM over the whole batch (conv_nhwc.cpp).
bool plain_gemm(const ConvDesc& d) {
  return d.R == 1 && d.S == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 0 && d.pad_w == 0 &&
         d.P == d.H && d.Q == d.W;
}

}  // namespace

const char* conv_direct_path() {
  static const char* const kNames[] = {"off", "avx512", "avx2"};
  return kNames[current_path()];
}

bool conv_direct_path_available(const std::string& name) {
  if (name == "off" || name == "auto") return true;
  const int p = path_index(name);
  if (p == 1) return has_avx512f() && direct::avx512_isa().name;
  if (p == 2) return has_avx2() && direct::avx2_isa().name;
  return false;
}

void set_conv_direct_path(const std::string& name) {
  if (name == "auto") {
    g_path.store(best_path(), std::memory_order_release);
    return;
  }
  const int p = path_index(name);
  KILN_CHECK(p >= 0, "set_conv_direct_path: unknown path '", name, "' (avx512, avx2, off or auto)");
  KILN_CHECK(conv_direct_path_available(name), "set_conv_direct_path: ", name,
             " is not available here (CPU features: ", cpu_features_str(), ")");
  g_path.store(p, std::memory_order_release);
}

bool conv_direct_fwd_applies(const ConvDesc& d) { return applies(d) && !plain_gemm(d); }

bool conv_direct_bwd_data_applies(const ConvDesc& d) {
  // Strided: by phases, undilated along each strided axis, padding at least 0.
  const bool phases_h = d.stride_h == 1 || (d.dilation_h == 1 && d.pad_h >= 0);
  const bool phases_w = d.stride_w == 1 || (d.dilation_w == 1 && d.pad_w >= 0);
  return applies(d) && phases_h && phases_w && !plain_gemm(d);
}

void conv2d_fwd_direct(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst,
                       bool accumulate) {
  KILN_CHECK(applies(d), "conv2d_fwd (native direct): does not apply to ", d.str());
  if (d.N * d.K * d.P * d.Q == 0) return;
  const Isa isa = isa_of(current_path());
  std::vector<int64_t> taps(size_t(d.R * d.S));
  for (size_t t = 0; t < taps.size(); ++t) taps[t] = int64_t(t);
  AlignedFloats wp = pack_weights(d, isa.nr, wei, d.R * d.S, taps, false);
  run(d, isa, src, wp.get(), d.has_bias ? bias : nullptr, dst, accumulate, d.relu,
      DstLayout{d.P * d.Q * d.K, d.Q * d.K, d.K});
}

void conv2d_bwd_data_direct(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src) {
  KILN_CHECK(conv_direct_bwd_data_applies(d), "conv2d_bwd_data (native direct): does not apply to ", d.str());
  if (d.N * d.C * d.H * d.W == 0) return;
  if (d.K * d.P * d.Q == 0) {
    std::memset(diff_src, 0, sizeof(float) * size_t(d.src_elems()));
    return;
  }
  // diff_src[n, h, w, c] = sum_{k, r, s} diff_dst[n, (h + pad_h - r*dh) / sh, (w + pad_w - s*dw) / sw, k]
  // * wei[k, c, r, s] over the taps where both divisions are exact. Split diff_src by phase
  // (h mod sh, w mod sw): each phase is a stride-1 convolution of diff_dst with the taps of that
  // phase, flipped, C and K swapped. At stride 1 there is one phase and every tap (with any dilation).
  const Isa isa = isa_of(current_path());
  const int64_t sh = d.stride_h, sw = d.stride_w;
  for (int64_t a = 0; a < std::min(sh, d.H); ++a)
    for (int64_t bw = 0; bw < std::min(sw, d.W); ++bw) {
      // Taps r = r0 + sh*t (t < Ra) reach rows h = a + sh*i from dy row i + ea - t; the same in w.
      const int64_t r0 = (a + d.pad_h) % sh, ea = (a + d.pad_h) / sh, Ra = r0 < d.R ? (d.R - r0 + sh - 1) / sh : 0;
      const int64_t s0 = (bw + d.pad_w) % sw, eb = (bw + d.pad_w) / sw, Sb = s0 < d.S ? (d.S - s0 + sw - 1) / sw : 0;
      const int64_t Ha = (d.H - a + sh - 1) / sh, Wb = (d.W - bw + sw - 1) / sw;
      float* out = diff_src + (a * d.W + bw) * d.C;
      const DstLayout layout{d.H * d.W * d.C, sh * d.W * d.C, sw * d.C};
      if (Ra == 0 || Sb == 0) {  // no tap reaches this phase (a 1x1 kernel at stride 2, say)
        parallel_for(0, d.N * Ha, 1, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = 0; j < Wb; ++j)
              std::memset(out + i / Ha * layout.image + i % Ha * layout.row + j * layout.pixel, 0,
                          sizeof(float) * size_t(d.C));
        });
        continue;
      }
      ConvDesc b = d;
      b.C = d.K, b.H = d.P, b.W = d.Q;
      b.K = d.C, b.P = Ha, b.Q = Wb;
      b.R = Ra, b.S = Sb;
      b.stride_h = b.stride_w = 1;
      b.dilation_h = sh == 1 ? d.dilation_h : 1;
      b.dilation_w = sw == 1 ? d.dilation_w : 1;
      b.pad_h = (Ra - 1) * b.dilation_h - ea;
      b.pad_w = (Sb - 1) * b.dilation_w - eb;
      b.has_bias = false;
      b.relu = b.sum = false;
      std::vector<int64_t> taps;  // phase tap (t, u) <- forward tap (r0 + sh*(Ra-1-t), s0 + sw*(Sb-1-u))
      for (int64_t t = 0; t < Ra; ++t)
        for (int64_t u = 0; u < Sb; ++u) taps.push_back((r0 + sh * (Ra - 1 - t)) * d.S + (s0 + sw * (Sb - 1 - u)));
      AlignedFloats wp = pack_weights(b, isa.nr, wei, d.R * d.S, taps, true);
      run(b, isa, diff_dst, wp.get(), nullptr, out, false, false, layout);
    }
}

void conv2d_bwd_weights_direct(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei) {
  KILN_CHECK(conv_direct_fwd_applies(d), "conv2d_bwd_weights (native direct): does not apply to ", d.str());
  const int64_t C = d.C, K = d.K, RSC = d.R * d.S * C, RS = d.R * d.S;
  const Isa isa = isa_of(current_path());
  const Source so(d);
  // Lanes along the source run (dW in [K][R][S][C]) unless the run is short against the vector
  // (few input channels: the first layer), where output channels go along the vector instead
  // (dW in [R][S][C][K]): whichever fills more of its vectors.
  auto fill = [](int64_t n, int64_t width) { return double(n) / double(width * ((n + width - 1) / width)); };
  const bool transposed = fill(K, isa.nr) > fill(so.seg_len, isa.wl) + 0.05;
  AlignedFloats dwt = aligned_floats(K * RSC, "weight gradient");
  std::memset(dwt.get(), 0, sizeof(float) * size_t(K * RSC));
  if (d.N * d.P * d.Q > 0) {
    // Units: a run of lanes of one segment, every output channel; each thread owns some and sums
    // every pixel into them in the same order: bits independent of the thread count.
    const int64_t lane_w = transposed ? isa.mr : isa.wl, chan_w = transposed ? isa.nr : isa.wr;
    const int64_t lane_tiles = (so.seg_len + lane_w - 1) / lane_w;  // equal tiles (9 -> 9; 33 -> 11 x 3)
    const int64_t units = int64_t(so.seg.size()) * lane_tiles;
    const int64_t chan_tiles = (K + chan_w - 1) / chan_w;
    // Output rows per pass: about 192 pixels, whose source runs stay in L1 across the channel tiles.
    const int64_t rc = std::clamp<int64_t>(192 / std::max<int64_t>(d.Q, 1), 1, d.P);
    const int nt = in_parallel_region() ? 1 : num_threads();
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(nt, units));
    const int64_t win_elems = std::max<int64_t>(so.window_elems(d, rc), 1);
    AlignedFloats windows = aligned_floats(parts * win_elems, "source windows");
    parallel_for(0, parts, 1, [&](int64_t part_b, int64_t part_e) {
      for (int64_t part = part_b; part < part_e; ++part) {
        float* win = windows.get() + part * win_elems;
        const int64_t u0 = part * units / parts, u1 = (part + 1) * units / parts;
        WeiTileArgs t{};
        t.dy_step = K;
        t.x_step = d.stride_w * C;
        t.x_row = d.stride_h * so.pitch;
        t.npx = d.Q;
        t.dw_step = transposed ? K : RSC;
        for (int64_t n = 0; n < d.N; ++n)
          for (int64_t p0 = 0; p0 < d.P; p0 += rc) {
            const int64_t p1 = std::min(d.P, p0 + rc);
            const float* base = so.rows(d, src, n, p0, p1, win);
            t.nrows = p1 - p0;
            for (int64_t u = u0; u < u1; ++u) {
              const int64_t sg = u / lane_tiles, lt = u % lane_tiles;
              const int64_t l0 = lt * so.seg_len / lane_tiles, l1 = (lt + 1) * so.seg_len / lane_tiles;
              t.nl = l1 - l0;
              t.x = base + so.seg[size_t(sg)] + l0;
              const int64_t run0 = sg * so.seg_len + l0;  // the lane's element of [R][S][C]
              for (int64_t ct = 0; ct < chan_tiles; ++ct) {
                int64_t k0, k1;
                if (transposed) k0 = ct * chan_w, k1 = std::min(K, k0 + chan_w);  // whole vectors
                else k0 = ct * K / chan_tiles, k1 = (ct + 1) * K / chan_tiles;    // equal broadcast tiles
                t.nk = k1 - k0;
                t.dy = diff_dst + (n * d.P + p0) * d.Q * K + k0;
                t.dw = dwt.get() + (transposed ? run0 * K + k0 : k0 * RSC + run0);
                if (transposed) isa.wei_tile_t(t);
                else isa.wei_tile(t);
              }
            }
          }
      }
    });
  }
  // [K][R][S][C] or [R][S][C][K] -> [K][C][R][S]
  const float* from = dwt.get();
  parallel_for(0, K, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t rs = 0; rs < RS; ++rs)
          diff_wei[(k * C + c) * RS + rs] = transposed ? from[(rs * C + c) * K + k] : from[(k * RS + rs) * C + c];
  });
}

}  // namespace kiln::native
