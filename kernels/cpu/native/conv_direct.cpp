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
#include <array>
#include <atomic>
#include <list>
#include <type_traits>
#include <memory>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/env.h"
#include "kernels/common/half.h"
#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/native/conv_direct.h"
#include "kernels/cpu/native/conv_nhwc_im2col.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/native/thread_buffer.h"

namespace kiln::native {
namespace {

using direct::Isa;
using direct::TileArgs;
using direct::WeiTileArgs;

// Source rows one work item reads, in bytes: with one weight panel they stay within the L2.
constexpr int64_t kWindowBytes = int64_t(256) << 10;
// The blocking choices below (conv.h: ConvDirectTuning), process-wide; tests force each case.
//   batch_bytes: a padded copy of the whole batch up to this size (beyond it, a window per item);
//   panel_bytes: the weight panel of one chunk of input channels (0: half the L2);
//   item_pixels: output pixels a work item (or a backward-weights pass) covers at least where
//   images are small: several images per item, so a panel serves that many pixels while in cache.
const ConvDirectTuning kDefaultTuning{int64_t(16) << 20, 0, 192};
std::atomic<int64_t> g_batch_bytes{kDefaultTuning.batch_bytes}, g_panel_bytes{kDefaultTuning.panel_bytes},
    g_item_pixels{kDefaultTuning.item_pixels};

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

// Scratch per calling thread, kept across calls (thread_buffer.h), one buffer per use.
enum Slot { kPacked = 0, kWindows = 1, kGradient = 2, kBatch = 3, kSlots = 4 };
float* scratch(int slot, int64_t floats) {
  thread_local ThreadBuffer<> buffers[kSlots] = {ThreadBuffer<>("conv2d (native direct): packed weights"),
                                                 ThreadBuffer<>("conv2d (native direct): source windows"),
                                                 ThreadBuffer<>("conv2d (native direct): weight gradient"),
                                                 ThreadBuffer<>("conv2d (native direct): padded source")};
  return buffers[slot].get(size_t(std::max<int64_t>(floats, 1)));
}

// The same, typed: n elements of T (float, or uint16_t for bfloat16 bits).
template <class T>
T* scratch_of(int slot, int64_t n) {
  static_assert(sizeof(float) % sizeof(T) == 0, "scratch holds floats");
  const int64_t per = int64_t(sizeof(float) / sizeof(T));
  return reinterpret_cast<T*>(scratch(slot, (n + per - 1) / per));
}

// Packed forward weights kept across calls under ConvDesc::weights_key (inference: the same
// weights every call), least recently used first out past kCacheBytes. A key is admitted on its
// second sighting, so weights converted afresh each call (a new storage, a new key) never churn
// it; a hit also compares a few weight values with those seen when packing, against writes the
// key cannot see.
class PackedCache {
 public:
  static constexpr size_t kCacheBytes = size_t(256) << 20;
  static constexpr int kProbes = 8;
  struct Key {
    uint64_t values;
    const float* wei;
    int64_t K, C, R, S, nr, chunks;
    bool operator==(const Key& o) const {
      return values == o.values && wei == o.wei && K == o.K && C == o.C && R == o.R && S == o.S && nr == o.nr &&
             chunks == o.chunks;
    }
  };
  struct Entry {
    Key key;
    std::shared_ptr<float> data;
    size_t bytes;
    std::array<float, kProbes> probe;
  };

  static PackedCache& instance() {
    static PackedCache c;
    return c;
  }
  // The probed weights: kProbes evenly spaced among `count`, the first and last included.
  static std::array<float, kProbes> probes(const float* wei, int64_t count) {
    std::array<float, kProbes> p{};
    for (int i = 0; i < kProbes; ++i) p[size_t(i)] = wei[count <= 1 ? 0 : i * (count - 1) / (kProbes - 1)];
    return p;
  }

  // The cached panels for `key` whose probes still match `wei`, or null.
  std::shared_ptr<const float> find(const Key& key, const float* wei, int64_t count) {
    std::lock_guard<std::mutex> lock(m_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (!(it->key == key)) continue;
      if (std::memcmp(probes(wei, count).data(), it->probe.data(), sizeof(it->probe)) != 0) {  // bits, NaN too
        bytes_ -= it->bytes;
        lru_.erase(it);
        return nullptr;
      }
      lru_.splice(lru_.begin(), lru_, it);
      return it->data;
    }
    return nullptr;
  }
  // Whether `values` was offered before (then it is worth keeping); remembers it either way.
  bool seen_before(uint64_t values) {
    std::lock_guard<std::mutex> lock(m_);
    for (uint64_t v : seen_)
      if (v == values) return true;
    seen_[next_seen_++ % seen_.size()] = values;
    return false;
  }
  void insert(const Key& key, std::shared_ptr<float> data, size_t bytes, const float* wei, int64_t count) {
    Entry e{key, std::move(data), bytes, probes(wei, count)};
    std::lock_guard<std::mutex> lock(m_);
    if (bytes > kCacheBytes) return;
    while (!lru_.empty() && bytes_ + bytes > kCacheBytes) {
      bytes_ -= lru_.back().bytes;
      lru_.pop_back();
    }
    bytes_ += bytes;
    lru_.push_front(std::move(e));
  }

 private:
  std::mutex m_;
  std::list<Entry> lru_;
  size_t bytes_ = 0;
  std::array<uint64_t, 64> seen_{};
  size_t next_seen_ = 0;
};

// The reduction in chunks of input channels where one panel of all of them would not stay in
// the L2 (3x3x1024: 1.2 MB): chunk i is channels [c0(i), c0(i+1)), equal sizes.
struct Chunks {
  int64_t n = 1;
  Chunks() = default;
  Chunks(const ConvDesc& d, int64_t nr) {
    const int64_t set = g_panel_bytes.load(std::memory_order_relaxed);
    const int64_t budget = set > 0 ? set : std::max<int64_t>(int64_t(64) << 10, int64_t(l2_cache_bytes()) / 2);
    const int64_t per_channel = d.R * d.S * nr * int64_t(sizeof(float));
    n = std::clamp<int64_t>((d.C * per_channel + budget - 1) / budget, 1, d.C);
  }
  int64_t c0(const ConvDesc& d, int64_t i) const { return i * d.C / n; }
};

// Elements of all the panels of d (float32 or bfloat16 alike).
int64_t packed_elems(const ConvDesc& d, int64_t nr) { return (d.K + nr - 1) / nr * nr * d.R * d.S * d.C; }

// Fills panels of nr output channels of the forward-form problem d into out (zero past K):
// weight (k, c, tap) is wei[row(k, c) * RS0 + tap_src[tap]] with row(k, c) = k*C + c (the
// forward's KCRS), or c*K + k when `swapped` (backward-data reads the forward's weights with C and
// K exchanged); RS0 is the taps per row of wei, tap_src maps each of the R*S taps of d to one of
// them. at(l, c) is where channel (j*nr + l, c) at tap 0 goes in its panel, tap t step(c)*t
// further. The loops follow wei's rows, 16 channels at a time when not swapped, so the rows read
// and the panel lines written stay in L1.
template <class T, class At, class Step>
void fill_panels(const ConvDesc& d, int64_t nr, const T* wei, int64_t RS0, const std::vector<int64_t>& tap_src,
                 bool swapped, T* out, const At& at, const Step& step) {
  const int64_t panels = (d.K + nr - 1) / nr, RS = d.R * d.S, RSC = RS * d.C;
  parallel_for(0, panels, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      T* panel = out + j * RSC * nr;
      const int64_t kn = std::min(nr, d.K - j * nr);
      if (kn < nr) std::memset(panel, 0, sizeof(T) * size_t(RSC * nr));
      auto put = [&](int64_t l, int64_t c) {
        const int64_t k = j * nr + l;
        const T* w = wei + (swapped ? c * d.K + k : k * d.C + c) * RS0;
        T* o = panel + at(l, c);
        const int64_t st = step(c);
        for (int64_t t = 0; t < RS; ++t) o[t * st] = w[tap_src[size_t(t)]];
      };
      if (swapped) {
        for (int64_t c = 0; c < d.C; ++c)
          for (int64_t l = 0; l < kn; ++l) put(l, c);
      } else {
        for (int64_t cb = 0; cb < d.C; cb += 16)
          for (int64_t l = 0; l < kn; ++l)
            for (int64_t c = cb; c < std::min(d.C, cb + 16); ++c) put(l, c);
      }
    }
  });
}

// float32 panels: within panel j, chunk i of the input channels as [R][S][cb][nr]. Into `out`
// (packed_elems of them), or the thread's scratch when null.
const float* pack_weights(const ConvDesc& d, int64_t nr, const Chunks& ch, const float* wei, int64_t RS0,
                          const std::vector<int64_t>& tap_src, bool swapped, float* out = nullptr) {
  const int64_t RS = d.R * d.S;
  if (!out) out = scratch(kPacked, packed_elems(d, nr));
  std::vector<int64_t> pos(size_t(d.C));  // where channel c's first tap goes, and its chunk's width
  std::vector<int64_t> width(size_t(d.C));
  for (int64_t i = 0; i < ch.n; ++i)
    for (int64_t c = ch.c0(d, i); c < ch.c0(d, i + 1); ++c) {
      pos[size_t(c)] = RS * ch.c0(d, i) + (c - ch.c0(d, i));
      width[size_t(c)] = ch.c0(d, i + 1) - ch.c0(d, i);
    }
  fill_panels(d, nr, wei, RS0, tap_src, swapped, out, [&](int64_t l, int64_t c) { return pos[size_t(c)] * nr + l; },
              [&](int64_t c) { return width[size_t(c)] * nr; });
  return out;
}

// bfloat16 panels for the AVX512_BF16 tile: panel j is [R][S][C/2][nr][2], channel pairs
// interleaved per output channel (C even). No channel chunks: the sums stay in registers for the
// whole reduction and are rounded once.
const uint16_t* pack_weights_bf16(const ConvDesc& d, int64_t nr, const uint16_t* wei, int64_t RS0,
                                  const std::vector<int64_t>& tap_src, bool swapped) {
  uint16_t* out = scratch_of<uint16_t>(kPacked, packed_elems(d, nr));
  fill_panels(d, nr, wei, RS0, tap_src, swapped, out,
              [&](int64_t l, int64_t c) { return (c & ~int64_t(1)) * nr + 2 * l + (c & 1); },
              [&](int64_t) { return d.C * nr; });
  return out;
}

// n elements from -> to: a copy, or bfloat16 bits widened to float32.
inline void convert(const float* from, float* to, int64_t n) { std::memcpy(to, from, sizeof(float) * size_t(n)); }
inline void convert(const uint16_t* from, uint16_t* to, int64_t n) {
  std::memcpy(to, from, sizeof(uint16_t) * size_t(n));
}
inline void convert(const uint16_t* from, float* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = uint32_t(from[i]) << 16;
    std::memcpy(to + i, &u, sizeof u);
  }
}

// How the tiles read the source. In place where the convolution reads no padding; otherwise a
// zero-bordered copy: of the whole batch when it is small (kBatchBytes), else of the rows each
// work item reads (a window per thread). Either way output row p of image n reads source rows
// from row(n, p) on, stride_h * pitch elements further per output row. T: float, or uint16_t
// for bfloat16 bits; S the element type of src (float from bfloat16 bits: the copy widens).
template <class T, class S = T>
struct Source {
  enum Mode { kInPlace, kWholeBatch, kWindows } mode;
  int64_t Wp;          // columns the convolution reads: (Q-1)*stride_w + (S-1)*dilation_w + 1
  int64_t Hn;          // rows it reads per image: (P-1)*stride_h + (R-1)*dilation_h + 1
  int64_t cs;          // elements from one source pixel to the next: C, or more in a copy (below)
  int64_t pitch;       // elements from one source row to the next
  int64_t image;       // elements from one image to the next (in place and whole batch)
  const T* data;       // in place: src at what output (0, 0, 0) reads at tap (0, 0); whole batch: the copy
  int64_t c_mem_;

  // c_mem: channels per pixel of src, d.C or fewer (bfloat16 with an odd C: d.C is one more, and
  // the copy gives every pixel a zero channel so the channel pairs never straddle pixels).
  Source(const ConvDesc& d, const S* src, int64_t c_mem)
      : Wp((d.Q - 1) * d.stride_w + (d.S - 1) * d.dilation_w + 1),
        Hn((d.P - 1) * d.stride_h + (d.R - 1) * d.dilation_h + 1), data(nullptr), c_mem_(c_mem) {
    const bool pads = d.pad_h > 0 || d.pad_w > 0 || Hn - 1 - d.pad_h >= d.H || Wp - 1 - d.pad_w >= d.W;
    // Pixels 2 KiB apart or a multiple of it (float32 C a multiple of 512) put a tile's pixels in
    // one or two L1 sets: a copy spaces them 64 bytes further.
    const bool aliased = d.C * int64_t(sizeof(T)) % 2048 == 0;
    cs = d.C + (aliased ? int64_t(64 / sizeof(T)) : 0);
    if (!pads && !aliased && c_mem == d.C && std::is_same<T, S>::value) {
      mode = kInPlace;
      cs = d.C;
      pitch = d.W * d.C;
      image = d.H * pitch;
      data = reinterpret_cast<const T*>(src) + (-d.pad_h * d.W - d.pad_w) * d.C;
      return;
    }
    pitch = Wp * cs;
    image = Hn * pitch;
    if (d.N * image * int64_t(sizeof(T)) > g_batch_bytes.load(std::memory_order_relaxed)) {
      mode = kWindows;
      data = nullptr;
      return;
    }
    mode = kWholeBatch;
    T* copy = scratch_of<T>(kBatch, d.N * image);
    parallel_for(0, d.N * Hn, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) fill_row(d, src, r / Hn, r % Hn - d.pad_h, copy + r * pitch);
    });
    data = copy;
  }
  // Row ih of image n as the convolution reads it: Wp columns from iw = -pad_w, zero outside.
  void fill_row(const ConvDesc& d, const S* src, int64_t n, int64_t ih, T* row) const {
    const int64_t C = c_mem_;
    if (ih < 0 || ih >= d.H) {
      std::memset(row, 0, sizeof(T) * size_t(Wp * cs));
      return;
    }
    const int64_t lo = std::clamp<int64_t>(d.pad_w, 0, Wp), hi = std::clamp<int64_t>(d.W + d.pad_w, lo, Wp);
    std::memset(row, 0, sizeof(T) * size_t(lo * cs));
    const S* in = src + ((n * d.H + ih) * d.W + lo - d.pad_w) * C;
    if (cs == C && std::is_same<T, S>::value) {
      if (hi > lo) std::memcpy(row + lo * C, in, sizeof(T) * size_t((hi - lo) * C));
    } else {
      for (int64_t w = lo; w < hi; ++w) {
        convert(in + (w - lo) * C, row + w * cs, C);
        std::memset(row + w * cs + C, 0, sizeof(T) * size_t(cs - C));
      }
    }
    std::memset(row + hi * cs, 0, sizeof(T) * size_t((Wp - hi) * cs));
  }
  // Windows mode: elements of the window for `out_rows` output rows.
  int64_t window_elems(const ConvDesc& d, int64_t out_rows) const {
    return mode == kWindows ? ((out_rows - 1) * d.stride_h + (d.R - 1) * d.dilation_h + 1) * pitch : 0;
  }
  // Where output row p of image n reads; in windows mode the rows [p0, p1) are copied into win
  // first by load() and p is in that range.
  const T* row(int64_t n, int64_t p, int64_t p0, const T* win, const ConvDesc& d) const {
    if (mode == kWindows) return win + (p - p0) * d.stride_h * pitch;
    return data + n * image + p * d.stride_h * pitch;
  }
  void load(const ConvDesc& d, const S* src, int64_t n, int64_t p0, int64_t p1, T* win) const {
    if (mode != kWindows) return;
    const int64_t rows = (p1 - p0 - 1) * d.stride_h + (d.R - 1) * d.dilation_h + 1;
    for (int64_t rr = 0; rr < rows; ++rr) fill_row(d, src, n, p0 * d.stride_h - d.pad_h + rr, win + rr * pitch);
  }
};

// Reduction segments of chunk i, offsets from a pixel's source: one per kernel row (S*C
// contiguous floats) when the channels are not chunked and the kernel is dense along w, else one
// per tap (the chunk's channels).
template <class T, class S>
void segments(const ConvDesc& d, const Source<T, S>& so, const Chunks& ch, int64_t i, std::vector<int64_t>& seg,
              int64_t& seg_len) {
  seg.clear();
  const int64_t c0 = ch.c0(d, i);
  if (ch.n == 1 && d.dilation_w == 1 && so.cs == d.C) {
    seg_len = d.S * d.C;
    for (int64_t r = 0; r < d.R; ++r) seg.push_back(r * d.dilation_h * so.pitch);
    return;
  }
  seg_len = ch.c0(d, i + 1) - c0;
  for (int64_t r = 0; r < d.R; ++r)
    for (int64_t s = 0; s < d.S; ++s) seg.push_back(r * d.dilation_h * so.pitch + s * d.dilation_w * so.cs + c0);
}

// Where output pixel (n, p, q) lies: dst + n*image + p*row + q*pixel (channels contiguous).
struct DstLayout {
  int64_t image, row, pixel;
};

// Runs the forward-form problem d: dst = act(conv(src, packed weights) + bias [+ dst]), on the
// float32 tiles (T float, Args TileArgs) or the bfloat16 ones (T uint16_t, Args TileArgsBf16).
template <class T, class Args, class Tiles>
void run(const ConvDesc& d, const Tiles& isa, const Chunks& ch, const T* src, const T* wp, const float* bias, T* dst,
         bool accumulate, bool relu, DstLayout out, int64_t c_mem = -1) {
  const int64_t C = d.C, K = d.K, nr = isa.nr, mr = isa.mr;
  const int64_t panels = (K + nr - 1) / nr, RSC = d.R * d.S * C;
  const Source<T> so(d, src, c_mem < 0 ? d.C : c_mem);
  // Items: output rows [p0, p1) of images [n0, n1), panels [j0, j1). Rows per item: source rows of
  // at most kWindowBytes; small images: whole images, enough of them for kItemPixels.
  const int64_t row_bytes = so.pitch * int64_t(sizeof(float));
  const int64_t rows_in = std::max<int64_t>(1, kWindowBytes / std::max<int64_t>(row_bytes, 1));
  int64_t rb = std::clamp<int64_t>((rows_in - (d.R - 1) * d.dilation_h - 1) / d.stride_h + 1, 1, d.P);
  const int64_t nblocks = (d.P + rb - 1) / rb;
  rb = (d.P + nblocks - 1) / nblocks;
  const int nt = in_parallel_region() ? 1 : num_threads();
  const int64_t item_pixels = g_item_pixels.load(std::memory_order_relaxed);
  int64_t group = 1;  // images per item
  if (nblocks == 1 && so.mode != Source<T>::kWindows)
    group = std::clamp<int64_t>((item_pixels + d.P * d.Q - 1) / std::max<int64_t>(d.P * d.Q, 1), 1,
                                std::max<int64_t>(1, d.N / (2 * nt)));
  const int64_t ngroups = (d.N + group - 1) / group;
  // Too few items for the team: split the panels too.
  const int64_t kgroups =
      std::clamp<int64_t>((2 * nt + ngroups * nblocks - 1) / std::max<int64_t>(ngroups * nblocks, 1), 1, panels);
  const int64_t items = ngroups * nblocks * kgroups;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(nt, items));
  const int64_t win_elems = std::max<int64_t>(so.window_elems(d, rb), 1);
  T* windows = so.mode == Source<T>::kWindows
                   ? scratch_of<T>(kWindows, parts * win_elems)
                   : nullptr;
  const int64_t max_pixels = std::max(group, int64_t(1)) * rb * d.Q;  // of one item
  std::vector<std::vector<int64_t>> segs(size_t(ch.n));
  std::vector<int64_t> seg_lens(size_t(ch.n));
  for (int64_t i = 0; i < ch.n; ++i) segments(d, so, ch, i, segs[size_t(i)], seg_lens[size_t(i)]);

  // Items are taken in order as threads come free, not split up front: a thread slowed by another
  // process on its core takes fewer. Each output element is one item's: the bits stay the same.
  std::atomic<int64_t> next{0};
  parallel_for(0, parts, 1, [&](int64_t part_b, int64_t part_e) {
    for (int64_t part = part_b; part < part_e; ++part) {
      T* win = windows ? windows + part * win_elems : nullptr;
      // The item's pixels in order (images, rows, columns): each one's source and output.
      std::vector<const T*> src_px(static_cast<size_t>(max_pixels));
      std::vector<T*> dst_px(static_cast<size_t>(max_pixels));
      for (int64_t item = next.fetch_add(1, std::memory_order_relaxed); item < items;
           item = next.fetch_add(1, std::memory_order_relaxed)) {
        const int64_t kg = item % kgroups, blk = item / kgroups % nblocks, g = item / kgroups / nblocks;
        const int64_t p0 = blk * rb, p1 = std::min(d.P, p0 + rb);
        const int64_t n0 = g * group, n1 = std::min(d.N, n0 + group);
        const int64_t j0 = kg * panels / kgroups, j1 = (kg + 1) * panels / kgroups;
        if (p0 >= p1 || j0 >= j1) continue;
        if (win) so.load(d, src, n0, p0, p1, win);  // windows mode: one image per item
        int64_t npix = 0;
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t p = p0; p < p1; ++p) {
            const T* arow = so.row(n, p, p0, win, d);
            T* crow = dst + n * out.image + p * out.row;
            for (int64_t q = 0; q < d.Q; ++q, ++npix) {
              src_px[size_t(npix)] = arow + q * d.stride_w * so.cs;
              dst_px[size_t(npix)] = crow + q * out.pixel;
            }
          }
        // Tiles of equal size (a 7x7 image: 12 x 4 + 1 -> 10 + 10 + 10 + 10 + 9), across rows
        // and images: a small layer's tiles are as wide as a large one's.
        const int64_t ntiles = (npix + mr - 1) / mr;
        Args t{};
        for (int64_t j = j0; j < j1; ++j) {
          t.kn = std::min(nr, K - j * nr);
          const T* panel = wp + j * RSC * nr;
          for (int64_t i = 0; i < ch.n; ++i) {
            // The chunks add up in dst: the bias and a residual with the first, ReLU with the last.
            t.b = panel + d.R * d.S * ch.c0(d, i) * nr;
            t.seg = segs[size_t(i)].data();
            t.nseg = int64_t(segs[size_t(i)].size());
            t.seg_len = seg_lens[size_t(i)];
            t.bias = bias && i == 0 ? bias + j * nr : nullptr;
            t.accumulate = i > 0 || accumulate;
            t.relu = relu && i == ch.n - 1;
            t.c_off = j * nr;
            for (int64_t tile = 0; tile < ntiles; ++tile) {
              const int64_t i0 = tile * npix / ntiles, i1 = (tile + 1) * npix / ntiles;
              t.a = src_px.data() + i0;
              t.c = dst_px.data() + i0;
              t.nb = i1 - i0;
              isa.tile(t);
            }
          }
        }
      }
    }
  });
}

// Backward-data by phases: diff_src[n, h, w, c] = sum_{k, r, s} diff_dst[n, (h + pad_h - r*dh) / sh,
// (w + pad_w - s*dw) / sw, k] * wei[k, c, r, s] over the taps where both divisions are exact.
// Split diff_src by phase (h mod sh, w mod sw): each phase is a stride-1 convolution of diff_dst
// with that phase's taps, flipped, C and K swapped. At stride 1 there is one phase and every tap
// (with any dilation). conv(b, taps, offset, layout) runs one: b its forward-form problem, taps[t]
// the forward tap its tap t reads, its output at diff_src + offset laid out as `layout`;
// none(offset, layout, rows, cols) zeroes a phase no tap reaches (a 1x1 kernel at stride 2).
template <class Conv, class None>
void for_each_phase(const ConvDesc& d, const Conv& conv, const None& none) {
  const int64_t sh = d.stride_h, sw = d.stride_w;
  const DstLayout layout{d.H * d.W * d.C, sh * d.W * d.C, sw * d.C};
  for (int64_t a = 0; a < std::min(sh, d.H); ++a)
    for (int64_t bw = 0; bw < std::min(sw, d.W); ++bw) {
      // Taps r = r0 + sh*t (t < Ra) reach rows h = a + sh*i from dy row i + ea - t; the same in w.
      const int64_t r0 = (a + d.pad_h) % sh, ea = (a + d.pad_h) / sh, Ra = r0 < d.R ? (d.R - r0 + sh - 1) / sh : 0;
      const int64_t s0 = (bw + d.pad_w) % sw, eb = (bw + d.pad_w) / sw, Sb = s0 < d.S ? (d.S - s0 + sw - 1) / sw : 0;
      const int64_t Ha = (d.H - a + sh - 1) / sh, Wb = (d.W - bw + sw - 1) / sw;
      const int64_t offset = (a * d.W + bw) * d.C;
      if (Ra == 0 || Sb == 0) {
        none(offset, layout, Ha, Wb);
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
      conv(b, taps, offset, layout);
    }
}

// Zeroes rows x cols pixels (c floats or bfloat16s each) of every image at out laid out as `layout`.
template <class T>
void zero_phase(T* out, DstLayout layout, int64_t N, int64_t rows, int64_t cols, int64_t c) {
  parallel_for(0, N * rows, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = 0; j < cols; ++j)
        std::memset(out + i / rows * layout.image + i % rows * layout.row + j * layout.pixel, 0, sizeof(T) * size_t(c));
  });
}

bool applies(const ConvDesc& d) {
  return d.nhwc && d.dtype == DType::float32 && d.groups == 1 && d.dilation_h >= 1 && d.dilation_w >= 1 &&
         d.stride_h >= 1 && d.stride_w >= 1 && current_path() != 0;
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

ConvDirectTuning conv_direct_tuning() {
  return ConvDirectTuning{g_batch_bytes.load(), g_panel_bytes.load(), g_item_pixels.load()};
}

void set_conv_direct_tuning(const ConvDirectTuning& t) {
  KILN_CHECK(t.batch_bytes >= 0 && t.panel_bytes >= 0 && t.item_pixels >= 1,
             "set_conv_direct_tuning: sizes must be at least 0 and item_pixels at least 1");
  g_batch_bytes = t.batch_bytes;
  g_panel_bytes = t.panel_bytes;
  g_item_pixels = t.item_pixels;
}

void reset_conv_direct_tuning() { set_conv_direct_tuning(kDefaultTuning); }

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

bool conv_direct_fwd_applies(const ConvDesc& d) { return applies(d) && !conv_is_pointwise_gemm(d); }

bool conv_direct_bwd_data_applies(const ConvDesc& d) {
  // Strided: by phases, undilated along each strided axis, padding at least 0.
  const bool phases_h = d.stride_h == 1 || (d.dilation_h == 1 && d.pad_h >= 0);
  const bool phases_w = d.stride_w == 1 || (d.dilation_w == 1 && d.pad_w >= 0);
  return applies(d) && phases_h && phases_w && !conv_is_pointwise_gemm(d);
}

void conv2d_fwd_direct(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst,
                       bool accumulate) {
  KILN_CHECK(applies(d), "conv2d_fwd (native direct): does not apply to ", d.str());
  if (d.N * d.K * d.P * d.Q == 0) return;
  const Isa isa = isa_of(current_path());
  std::vector<int64_t> taps(size_t(d.R * d.S));
  for (size_t t = 0; t < taps.size(); ++t) taps[t] = int64_t(t);
  const Chunks ch(d, isa.nr);
  const float* wp = nullptr;
  std::shared_ptr<const float> kept;  // held while in use: the cache may drop it meanwhile
  if (d.weights_key != 0) {
    PackedCache& cache = PackedCache::instance();
    const PackedCache::Key key{d.weights_key, wei, d.K, d.C, d.R, d.S, isa.nr, ch.n};
    const int64_t count = d.wei_elems();
    kept = cache.find(key, wei, count);
    if (!kept && cache.seen_before(d.weights_key)) {
      const int64_t floats = packed_elems(d, isa.nr);
      const size_t bytes = (size_t(floats) * sizeof(float) + 63) / 64 * 64;
      std::shared_ptr<float> mem(static_cast<float*>(std::aligned_alloc(64, bytes)), std::free);
      KILN_CHECK(mem, "conv2d (native direct): cannot allocate ", bytes, " bytes of packed weights");
      pack_weights(d, isa.nr, ch, wei, d.R * d.S, taps, false, mem.get());
      cache.insert(key, mem, bytes, wei, count);
      kept = mem;
    }
    wp = kept.get();
  }
  if (!wp) wp = pack_weights(d, isa.nr, ch, wei, d.R * d.S, taps, false);
  run<float, TileArgs>(d, isa, ch, src, wp, d.has_bias ? bias : nullptr, dst, accumulate, d.relu,
      DstLayout{d.P * d.Q * d.K, d.Q * d.K, d.K});
}

void conv2d_bwd_data_direct(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src) {
  KILN_CHECK(conv_direct_bwd_data_applies(d), "conv2d_bwd_data (native direct): does not apply to ", d.str());
  if (d.N * d.C * d.H * d.W == 0) return;
  if (d.K * d.P * d.Q == 0) {
    std::memset(diff_src, 0, sizeof(float) * size_t(d.src_elems()));
    return;
  }
  const Isa isa = isa_of(current_path());
  for_each_phase(d, [&](const ConvDesc& b, const std::vector<int64_t>& taps, int64_t offset, DstLayout layout) {
    const Chunks ch(b, isa.nr);
    const float* wp = pack_weights(b, isa.nr, ch, wei, d.R * d.S, taps, true);
    run<float, TileArgs>(b, isa, ch, diff_dst, wp, nullptr, diff_src + offset, false, false, layout);
  }, [&](int64_t offset, DstLayout layout, int64_t rows, int64_t cols) {
    zero_phase(diff_src + offset, layout, d.N, rows, cols, d.C);
  });
}

namespace {

// The float32 weight gradient of src (S: float, or bfloat16 bits widened as they are read) and
// diff_dst into diff_wei (W: float, or bfloat16 bits, rounded once).
template <class S, class W>
void bwd_weights_direct(const ConvDesc& d, const S* src, const S* diff_dst, W* diff_wei) {
  const int64_t C = d.C, K = d.K, RSC = d.R * d.S * C, RS = d.R * d.S;
  const Isa isa = isa_of(current_path());
  const Source<float, S> so(d, src, d.C);
  std::vector<int64_t> seg;
  int64_t seg_len = 0;
  segments(d, so, Chunks(), 0, seg, seg_len);
  // Lanes along the source run (dW in [K][R][S][C]) unless the run is short against the vector
  // (few input channels: the first layer), where output channels go along the vector instead
  // (dW in [R][S][C][K]): whichever fills more of its vectors.
  auto fill = [](int64_t n, int64_t width) { return double(n) / double(width * ((n + width - 1) / width)); };
  const bool transposed = fill(K, isa.nr) > fill(seg_len, isa.wl) + 0.05;
  float* dwt = scratch(kGradient, K * RSC);
  std::memset(dwt, 0, sizeof(float) * size_t(K * RSC));
  if (d.N * d.P * d.Q > 0) {
    // Units: a run of lanes of one segment, every output channel; each thread owns some and sums
    // every pixel into them in the same order: bits independent of the thread count.
    const int64_t lane_w = transposed ? isa.mr : isa.wl, chan_w = transposed ? isa.nr : isa.wr;
    const int64_t lane_tiles = (seg_len + lane_w - 1) / lane_w;  // equal tiles (9 -> 9; 33 -> 11 x 3)
    const int64_t units = int64_t(seg.size()) * lane_tiles;
    const int64_t chan_tiles = (K + chan_w - 1) / chan_w;
    // Passes over about kItemPixels output pixels, whose source runs stay in L1 across the channel
    // tiles: rows of one image in windows mode, else consecutive rows across images.
    const int64_t rc = std::max<int64_t>(1, g_item_pixels.load(std::memory_order_relaxed) / std::max<int64_t>(d.Q, 1));
    const int64_t rows_total = d.N * d.P;
    const int nt = in_parallel_region() ? 1 : num_threads();
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(nt, units));
    const int64_t win_rows = std::min(rc, d.P);
    const int64_t win_elems = std::max<int64_t>(so.window_elems(d, win_rows), 1);
    float* windows = so.mode == Source<float, S>::kWindows
                         ? scratch(kWindows, parts * win_elems)
                         : nullptr;
    parallel_for(0, parts, 1, [&](int64_t part_b, int64_t part_e) {
      for (int64_t part = part_b; part < part_e; ++part) {
        float* win = windows ? windows + part * win_elems : nullptr;
        std::vector<const float*> rows(static_cast<size_t>(rc));
        // bfloat16: the pass's rows of diff_dst widened here, once per thread and pass.
        std::vector<float> dy_wide(std::is_same<S, float>::value ? 0 : static_cast<size_t>(rc * d.Q * K));
        const int64_t u0 = part * units / parts, u1 = (part + 1) * units / parts;
        WeiTileArgs t{};
        t.dy_step = K;
        t.x_step = d.stride_w * so.cs;
        t.npx = d.Q;
        t.dw_step = transposed ? K : RSC;
        for (int64_t r0 = 0; r0 < rows_total;) {
          // The pass: rows [r0, r1) of the (image, output row) sequence.
          int64_t r1 = std::min(rows_total, r0 + rc);
          if (win) r1 = std::min(r1, (r0 / d.P + 1) * d.P);  // a window holds one image's rows
          const int64_t n0 = r0 / d.P, p0 = r0 % d.P;
          if (win) so.load(d, src, n0, p0, p0 + (r1 - r0), win);
          for (int64_t r = r0; r < r1; ++r) rows[size_t(r - r0)] = so.row(r / d.P, r % d.P, p0, win, d);
          t.x_rows = rows.data();
          t.nrows = r1 - r0;
          const float* dy_pass;
          if constexpr (std::is_same<S, float>::value) {
            dy_pass = diff_dst + r0 * d.Q * K;
          } else {
            convert(diff_dst + r0 * d.Q * K, dy_wide.data(), (r1 - r0) * d.Q * K);
            dy_pass = dy_wide.data();
          }
          for (int64_t u = u0; u < u1; ++u) {
            const int64_t sg = u / lane_tiles, lt = u % lane_tiles;
            const int64_t l0 = lt * seg_len / lane_tiles, l1 = (lt + 1) * seg_len / lane_tiles;
            t.nl = l1 - l0;
            t.x_off = seg[size_t(sg)] + l0;
            const int64_t run0 = sg * seg_len + l0;  // the lane's element of [R][S][C]
            for (int64_t ct = 0; ct < chan_tiles; ++ct) {
              int64_t k0, k1;
              if (transposed) k0 = ct * chan_w, k1 = std::min(K, k0 + chan_w);  // whole vectors
              else k0 = ct * K / chan_tiles, k1 = (ct + 1) * K / chan_tiles;    // equal broadcast tiles
              t.nk = k1 - k0;
              t.dy = dy_pass + k0;
              t.dw = dwt + (transposed ? run0 * K + k0 : k0 * RSC + run0);
              if (transposed) isa.wei_tile_t(t);
              else isa.wei_tile(t);
            }
          }
          r0 = r1;
        }
      }
    });
  }
  // [K][R][S][C] or [R][S][C][K] -> [K][C][R][S]
  const float* from = dwt;
  parallel_for(0, K, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t rs = 0; rs < RS; ++rs) {
          const float v = transposed ? from[(rs * C + c) * K + k] : from[(k * RS + rs) * C + c];
          if constexpr (std::is_same<W, float>::value) diff_wei[(k * C + c) * RS + rs] = v;
          else diff_wei[(k * C + c) * RS + rs] = BFloat16(v).bits;
        }
  });
}

}  // namespace

void conv2d_bwd_weights_direct(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei) {
  KILN_CHECK(conv_direct_fwd_applies(d), "conv2d_bwd_weights (native direct): does not apply to ", d.str());
  bwd_weights_direct(d, src, diff_dst, diff_wei);
}

bool conv_direct_bf16_applies(const ConvDesc& d) {
  ConvDesc f = d;
  f.dtype = DType::float32;
  return d.dtype == DType::bfloat16 && current_path() == 1 && has_avx512_bf16() &&
         cpu_isa().avx512bw && cpu_isa().avx512vl && direct::avx512bf16_isa().name && conv_direct_fwd_applies(f);
}

bool conv_direct_bwd_data_bf16_applies(const ConvDesc& d) {
  ConvDesc f = d;
  f.dtype = DType::float32;
  return conv_direct_bf16_applies(d) && d.K % 2 == 0 && conv_direct_bwd_data_applies(f);
}

void conv2d_fwd_direct_bf16(const ConvDesc& d, const uint16_t* src, const uint16_t* wei, const float* bias,
                            uint16_t* dst, bool accumulate) {
  KILN_CHECK(conv_direct_bf16_applies(d), "conv2d_fwd (native direct bfloat16): does not apply to ", d.str());
  if (d.N * d.K * d.P * d.Q == 0) return;
  const direct::IsaBf16 isa = direct::avx512bf16_isa();
  std::vector<int64_t> taps(size_t(d.R * d.S));
  for (size_t t = 0; t < taps.size(); ++t) taps[t] = int64_t(t);
  // An odd C (a first layer's 3) runs as C + 1 channels, the last zero in the source copy and in
  // the weights, so the tile's channel pairs stay within a pixel.
  ConvDesc dp = d;
  std::vector<uint16_t> padded;
  if (d.C % 2 != 0) {
    dp.C = d.C + 1;
    const int64_t RS = d.R * d.S;
    padded.assign(size_t(d.K * dp.C * RS), 0);
    for (int64_t k = 0; k < d.K; ++k)
      std::memcpy(padded.data() + k * dp.C * RS, wei + k * d.C * RS, sizeof(uint16_t) * size_t(d.C * RS));
    wei = padded.data();
  }
  const uint16_t* wp = pack_weights_bf16(dp, isa.nr, wei, d.R * d.S, taps, false);
  run<uint16_t, direct::TileArgsBf16>(dp, isa, Chunks(), src, wp, d.has_bias ? bias : nullptr, dst, accumulate,
                                      d.relu, DstLayout{d.P * d.Q * d.K, d.Q * d.K, d.K}, d.C);
}

void conv2d_bwd_data_direct_bf16(const ConvDesc& d, const uint16_t* diff_dst, const uint16_t* wei,
                                 uint16_t* diff_src) {
  KILN_CHECK(conv_direct_bwd_data_bf16_applies(d), "conv2d_bwd_data (native direct bfloat16): does not apply to ",
             d.str());
  if (d.N * d.C * d.H * d.W == 0) return;
  if (d.K * d.P * d.Q == 0) {
    std::memset(diff_src, 0, sizeof(uint16_t) * size_t(d.src_elems()));
    return;
  }
  const direct::IsaBf16 isa = direct::avx512bf16_isa();
  for_each_phase(d, [&](const ConvDesc& b, const std::vector<int64_t>& taps, int64_t offset, DstLayout layout) {
    const uint16_t* wp = pack_weights_bf16(b, isa.nr, wei, d.R * d.S, taps, true);
    run<uint16_t, direct::TileArgsBf16>(b, isa, Chunks(), diff_dst, wp, nullptr, diff_src + offset, false, false,
                                        layout);
  }, [&](int64_t offset, DstLayout layout, int64_t rows, int64_t cols) {
    zero_phase(diff_src + offset, layout, d.N, rows, cols, d.C);
  });
}

void conv2d_bwd_weights_direct_bf16(const ConvDesc& d, const uint16_t* src, const uint16_t* diff_dst,
                                    uint16_t* diff_wei, float* diff_bias) {
  KILN_CHECK(conv_direct_bf16_applies(d), "conv2d_bwd_weights (native direct bfloat16): does not apply to ", d.str());
  if (diff_bias) {  // column sums of diff_dst[N*P*Q, K] in double; each thread owns some columns
    const int64_t M = d.N * d.P * d.Q;
    parallel_for(0, d.K, std::max<int64_t>(16, d.K / std::max(1, num_threads())), [&](int64_t k0, int64_t k1) {
      std::vector<double> acc(size_t(k1 - k0), 0.0);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = k0; k < k1; ++k) {
          float v;
          convert(diff_dst + m * d.K + k, &v, 1);
          acc[size_t(k - k0)] += double(v);
        }
      for (int64_t k = k0; k < k1; ++k) diff_bias[k] = float(acc[size_t(k - k0)]);
    });
  }
  if (diff_wei) bwd_weights_direct(d, src, diff_dst, diff_wei);
}

}  // namespace kiln::native
