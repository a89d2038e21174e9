// Image transforms. See transforms.h. Plain loops on contiguous [C, H, W] tensors: transforms run
// in DataLoader worker threads, one sample at a time, so they do not use the op dispatcher.
#include "io/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "io/data/image_folder.h"

namespace kiln {

namespace {

// Resizes compute in float32: an output of at most 2^26 values (256 MiB; e.g. 256 x 87381 RGB, an
// aspect ratio of 341:1 at resize_shorter(256)) is the bound, a quarter of the decode limit's
// values (kMaxImageValues, image_folder.h) so it costs no more bytes than the largest decode.
constexpr int64_t kMaxResizeValues = kMaxImageValues / 4;

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

Tensor checked_image(const Tensor& image, const char* who) {
  KILN_CHECK(image.defined() && image.dim() == 3, who, ": expected a [C, H, W] image, got ",
             image.defined() ? shape_str(image.sizes()) : std::string("an undefined tensor"));
  KILN_CHECK(image.dtype() == uint8 || image.dtype() == float32, who, ": expected uint8 or float32, got ",
             dtype_name(image.dtype()));
  return image.contiguous();
}

class Compose : public Transform {
 public:
  explicit Compose(std::vector<std::shared_ptr<Transform>> ts) : ts_(std::move(ts)) {
    for (const auto& t : ts_) KILN_CHECK(t != nullptr, "compose: null transform");
  }
  Tensor apply(const Tensor& image, SampleRng& rng) const override {
    Tensor x = image;
    for (const auto& t : ts_) x = t->apply(x, rng);
    return x;
  }
  std::string describe() const override {
    std::string s = "compose(";
    for (size_t i = 0; i < ts_.size(); ++i) s += (i ? ", " : "") + ts_[i]->describe();
    return s + ")";
  }

 private:
  std::vector<std::shared_ptr<Transform>> ts_;
};

class ToFloat : public Transform {
 public:
  explicit ToFloat(double scale) : scale_(scale) {}
  Tensor apply(const Tensor& image, SampleRng&) const override {
    if (image.dtype() != uint8) return image.to(float32).contiguous();
    Tensor src = image.contiguous();
    Tensor out = empty(src.sizes(), float32);
    const uint8_t* s = src.data<uint8_t>();
    float* d = out.data<float>();
    float k = float(scale_);
    for (int64_t i = 0, n = src.numel(); i < n; ++i) d[i] = float(s[i]) * k;
    return out;
  }
  std::string describe() const override { return "to_float(" + std::to_string(scale_) + ")"; }

 private:
  double scale_;
};

class Normalize : public Transform {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std) : mean_(std::move(mean)), std_(std::move(std)) {
    KILN_CHECK(!mean_.empty() && mean_.size() == std_.size(), "normalize: mean and std need the same non-zero size, got ",
               mean_.size(), " and ", std_.size());
    for (float s : std_) KILN_CHECK(s != 0.0f, "normalize: std has a zero");
  }
  Tensor apply(const Tensor& image, SampleRng&) const override {
    Tensor src = checked_image(image, "normalize");
    KILN_CHECK(src.dtype() == float32, "normalize: expected float32 (put to_float first), got ",
               dtype_name(src.dtype()));
    int64_t c = src.size(0), hw = src.size(1) * src.size(2);
    KILN_CHECK(mean_.size() == 1 || int64_t(mean_.size()) == c, "normalize: ", mean_.size(),
               " means for an image of ", c, " channels");
    Tensor out = empty(src.sizes(), float32);
    const float* s = src.data<float>();
    float* d = out.data<float>();
    for (int64_t ch = 0; ch < c; ++ch) {
      size_t k = mean_.size() == 1 ? 0 : size_t(ch);
      float m = mean_[k], inv = 1.0f / std_[k];
      for (int64_t i = 0; i < hw; ++i) d[ch * hw + i] = (s[ch * hw + i] - m) * inv;
    }
    return out;
  }
  std::string describe() const override {
    std::ostringstream o;
    o << "normalize(mean=[";
    for (size_t i = 0; i < mean_.size(); ++i) o << (i ? ", " : "") << mean_[i];
    o << "], std=[";
    for (size_t i = 0; i < std_.size(); ++i) o << (i ? ", " : "") << std_[i];
    o << "])";
    return o.str();
  }

 private:
  std::vector<float> mean_, std_;
};

class RandomCrop : public Transform {
 public:
  RandomCrop(int64_t h, int64_t w, int64_t pad) : h_(h), w_(w), pad_(pad) {
    KILN_CHECK(h > 0 && w > 0 && pad >= 0, "random_crop: bad size ", h, "x", w, " or padding ", pad);
  }
  Tensor apply(const Tensor& image, SampleRng& rng) const override {
    Tensor src = checked_image(image, "random_crop");
    int64_t H = src.size(1) + 2 * pad_, W = src.size(2) + 2 * pad_;
    KILN_CHECK(H >= h_ && W >= w_, "random_crop: crop ", h_, "x", w_, " larger than the padded image ", H, "x", W);
    int64_t top = rng.randint(0, H - h_ + 1);
    int64_t left = rng.randint(0, W - w_ + 1);
    return crop_image(src, top - pad_, left - pad_, h_, w_);
  }
  std::string describe() const override {
    return "random_crop(" + std::to_string(h_) + "x" + std::to_string(w_) + ", padding=" + std::to_string(pad_) + ")";
  }

 private:
  int64_t h_, w_, pad_;
};

class RandomResizedCrop : public Transform {
 public:
  RandomResizedCrop(int64_t h, int64_t w, double slo, double shi, double rlo, double rhi)
      : h_(h), w_(w), slo_(slo), shi_(shi), rlo_(rlo), rhi_(rhi) {
    KILN_CHECK(h > 0 && w > 0, "random_resized_crop: bad size ", h, "x", w);
    KILN_CHECK(0 < slo && slo <= shi && 0 < rlo && rlo <= rhi, "random_resized_crop: bad scale [", slo, ", ", shi,
               "] or ratio [", rlo, ", ", rhi, "]");
  }
  Tensor apply(const Tensor& image, SampleRng& rng) const override {
    Tensor src = checked_image(image, "random_resized_crop");
    int64_t H = src.size(1), W = src.size(2);
    double area = double(H) * double(W), lr0 = std::log(rlo_), lr1 = std::log(rhi_);
    for (int attempt = 0; attempt < 10; ++attempt) {
      double target = area * rng.uniform(slo_, shi_);
      double ar = std::exp(rng.uniform(lr0, lr1));
      int64_t cw = int64_t(std::nearbyint(std::sqrt(target * ar)));
      int64_t ch = int64_t(std::nearbyint(std::sqrt(target / ar)));
      if (cw > 0 && cw <= W && ch > 0 && ch <= H) {
        int64_t top = rng.randint(0, H - ch + 1);
        int64_t left = rng.randint(0, W - cw + 1);
        return resize_image(crop_image(src, top, left, ch, cw), h_, w_);
      }
    }
    double in_ratio = double(W) / double(H);
    int64_t cw = W, ch = H;
    if (in_ratio < rlo_) ch = int64_t(std::nearbyint(W / rlo_));
    else if (in_ratio > rhi_) cw = int64_t(std::nearbyint(H * rhi_));
    return resize_image(crop_image(src, (H - ch) / 2, (W - cw) / 2, ch, cw), h_, w_);
  }
  std::string describe() const override {
    std::ostringstream o;
    o << "random_resized_crop(" << h_ << "x" << w_ << ", scale=[" << slo_ << ", " << shi_ << "], ratio=[" << rlo_
      << ", " << rhi_ << "])";
    return o.str();
  }

 private:
  int64_t h_, w_;
  double slo_, shi_, rlo_, rhi_;
};

class RandomFlip : public Transform {
 public:
  explicit RandomFlip(double p) : p_(p) {}
  Tensor apply(const Tensor& image, SampleRng& rng) const override {
    Tensor src = checked_image(image, "random_horizontal_flip");
    return rng.uniform() < p_ ? flip_image(src) : src;
  }
  std::string describe() const override { return "random_horizontal_flip(" + std::to_string(p_) + ")"; }

 private:
  double p_;
};

class CenterCrop : public Transform {
 public:
  CenterCrop(int64_t h, int64_t w) : h_(h), w_(w) { KILN_CHECK(h > 0 && w > 0, "center_crop: bad size ", h, "x", w); }
  Tensor apply(const Tensor& image, SampleRng&) const override {
    Tensor src = checked_image(image, "center_crop");
    int64_t top = int64_t(std::nearbyint((src.size(1) - h_) / 2.0));
    int64_t left = int64_t(std::nearbyint((src.size(2) - w_) / 2.0));
    return crop_image(src, top, left, h_, w_);
  }
  std::string describe() const override { return "center_crop(" + std::to_string(h_) + "x" + std::to_string(w_) + ")"; }

 private:
  int64_t h_, w_;
};

class Resize : public Transform {
 public:
  Resize(int64_t h, int64_t w, int64_t shorter) : h_(h), w_(w), shorter_(shorter) {
    KILN_CHECK(shorter > 0 || (h > 0 && w > 0), "resize: bad size ", h, "x", w);
  }
  Tensor apply(const Tensor& image, SampleRng&) const override {
    Tensor src = checked_image(image, "resize");
    int64_t h = h_, w = w_;
    if (shorter_ > 0) {
      int64_t H = src.size(1), W = src.size(2);
      // In double, then bounded: the long side of an extreme aspect ratio must not wrap int64.
      double longer = double(shorter_) * double(std::max(H, W)) / double(std::min(H, W));
      KILN_CHECK(longer * double(shorter_) * double(src.size(0)) <= double(kMaxResizeValues), describe(), ": ", H,
                 "x", W, " image would become ", H <= W ? shorter_ : int64_t(std::min(longer, 9e18)), "x",
                 H <= W ? int64_t(std::min(longer, 9e18)) : shorter_, " (", src.size(0), " channels), over the ",
                 kMaxResizeValues, "-value resize limit");
      if (H <= W) { h = shorter_; w = int64_t(double(shorter_) * W / H); }
      else { w = shorter_; h = int64_t(double(shorter_) * H / W); }
    }
    return resize_image(src, h, w);
  }
  std::string describe() const override {
    if (shorter_ > 0) return "resize_shorter(" + std::to_string(shorter_) + ")";
    return "resize(" + std::to_string(h_) + "x" + std::to_string(w_) + ")";
  }

 private:
  int64_t h_, w_, shorter_;
};

}  // namespace

SampleRng::SampleRng(uint64_t seed, int64_t epoch, int64_t index)
    : key_(mix64(mix64(seed) ^ uint64_t(epoch))), counter_(uint64_t(index) << 20) {}

uint32_t SampleRng::next_u32() {
  if (lane_ == 4) {
    block_ = philox4x32(key_, counter_++);
    lane_ = 0;
  }
  return block_.v[lane_++];
}

double SampleRng::uniform() {
  uint64_t hi = next_u32() >> 5, lo = next_u32() >> 6;  // 27 + 26 bits
  return double(hi * 67108864 + lo) * (1.0 / 9007199254740992.0);
}

double SampleRng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

int64_t SampleRng::randint(int64_t lo, int64_t hi) {
  KILN_CHECK(hi > lo, "SampleRng::randint: empty range [", lo, ", ", hi, ")");
  uint64_t n = uint64_t(hi - lo);
  uint64_t r = (uint64_t(next_u32()) << 32) | next_u32();
  return lo + int64_t(r % n);  // bias < n / 2^64: negligible for image sizes
}

Transform::~Transform() = default;

Tensor crop_image(const Tensor& image, int64_t top, int64_t left, int64_t h, int64_t w) {
  Tensor src = checked_image(image, "crop_image");
  int64_t C = src.size(0), H = src.size(1), W = src.size(2);
  size_t es = src.element_size();
  Tensor out = zeros({C, h, w}, src.dtype());
  const char* s = static_cast<const char*>(src.data_ptr());
  char* d = static_cast<char*>(out.data_ptr());
  int64_t x0 = std::max<int64_t>(0, -left), x1 = std::min<int64_t>(w, W - left);
  if (x1 <= x0) return out;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < h; ++y) {
      int64_t sy = top + y;
      if (sy < 0 || sy >= H) continue;
      std::memcpy(d + ((c * h + y) * w + x0) * es, s + ((c * H + sy) * W + left + x0) * es, size_t(x1 - x0) * es);
    }
  return out;
}

Tensor flip_image(const Tensor& image) {
  Tensor src = checked_image(image, "flip_image");
  int64_t rows = src.size(0) * src.size(1), W = src.size(2);
  size_t es = src.element_size();
  Tensor out = empty(src.sizes(), src.dtype());
  const char* s = static_cast<const char*>(src.data_ptr());
  char* d = static_cast<char*>(out.data_ptr());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < W; ++x) std::memcpy(d + (r * W + x) * es, s + (r * W + W - 1 - x) * es, es);
  return out;
}

namespace {

// torch's area_pixel_compute_source_index for align_corners=false, linear modes.
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> l1;
};
Taps taps(int64_t in, int64_t out) {
  Taps t;
  double scale = double(in) / double(out);
  for (int64_t o = 0; o < out; ++o) {
    double src = std::max(0.0, (o + 0.5) * scale - 0.5);
    int64_t i0 = std::min<int64_t>(int64_t(src), in - 1);
    t.i0.push_back(i0);
    t.i1.push_back(std::min<int64_t>(i0 + 1, in - 1));
    t.l1.push_back(float(src - double(i0)));
  }
  return t;
}

}  // namespace

Tensor resize_image(const Tensor& image, int64_t h, int64_t w) {
  Tensor src = checked_image(image, "resize_image");
  KILN_CHECK(h > 0 && w > 0, "resize_image: bad size ", h, "x", w);
  int64_t C = src.size(0), H = src.size(1), W = src.size(2);
  KILN_CHECK(H > 0 && W > 0, "resize_image: empty image ", shape_str(src.sizes()));
  // resize_shorter of an extreme aspect ratio (1 x 65000 to shorter side 256) would ask for tens
  // of GB: the output is bounded (kMaxResizeValues).
  KILN_CHECK(double(C) * double(h) * double(w) <= double(kMaxResizeValues), "resize_image: ", H, "x", W,
             " image (", C, " channels) resized to ", h, "x", w, " is over the ", kMaxResizeValues,
             "-value resize limit");
  if (H == h && W == w) return src;
  Taps ty = taps(H, h), tx = taps(W, w);
  Tensor f = src.dtype() == float32 ? src : src.to(float32).contiguous();
  Tensor out = empty({C, h, w}, float32);
  const float* s = f.data<float>();
  float* d = out.data<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < h; ++y) {
      const float* r0 = s + (c * H + ty.i0[y]) * W;
      const float* r1 = s + (c * H + ty.i1[y]) * W;
      float ly = ty.l1[y], hy = 1.0f - ly;
      float* o = d + (c * h + y) * w;
      for (int64_t x = 0; x < w; ++x) {
        float lx = tx.l1[x], hx = 1.0f - lx;
        int64_t a = tx.i0[x], b = tx.i1[x];
        o[x] = hy * (hx * r0[a] + lx * r0[b]) + ly * (hx * r1[a] + lx * r1[b]);
      }
    }
  if (src.dtype() == float32) return out;
  Tensor u = empty({C, h, w}, uint8);
  uint8_t* ud = u.data<uint8_t>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i)
    ud[i] = uint8_t(std::min(255.0f, std::max(0.0f, std::nearbyint(d[i]))));
  return u;
}

std::shared_ptr<Transform> compose(std::vector<std::shared_ptr<Transform>> transforms) {
  return std::make_shared<Compose>(std::move(transforms));
}
std::shared_ptr<Transform> to_float(double scale) { return std::make_shared<ToFloat>(scale); }
std::shared_ptr<Transform> normalize(std::vector<float> mean, std::vector<float> std) {
  return std::make_shared<Normalize>(std::move(mean), std::move(std));
}
std::shared_ptr<Transform> random_crop(int64_t h, int64_t w, int64_t padding) {
  return std::make_shared<RandomCrop>(h, w, padding);
}
std::shared_ptr<Transform> random_resized_crop(int64_t h, int64_t w, double scale_lo, double scale_hi,
                                               double ratio_lo, double ratio_hi) {
  return std::make_shared<RandomResizedCrop>(h, w, scale_lo, scale_hi, ratio_lo, ratio_hi);
}
std::shared_ptr<Transform> random_horizontal_flip(double p) { return std::make_shared<RandomFlip>(p); }
std::shared_ptr<Transform> center_crop(int64_t h, int64_t w) { return std::make_shared<CenterCrop>(h, w); }
std::shared_ptr<Transform> resize(int64_t h, int64_t w) { return std::make_shared<Resize>(h, w, 0); }
std::shared_ptr<Transform> resize_shorter(int64_t s) {
  KILN_CHECK(s > 0, "resize_shorter: bad size ", s);
  return std::make_shared<Resize>(0, 0, s);
}

}  // namespace kiln
