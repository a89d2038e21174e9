// Per-sample image transforms on a [C, H, W] tensor (uint8 or float32), torchvision's semantics:
// to_float, normalize, random_crop (zero padding), random_resized_crop, random_horizontal_flip,
// center_crop, resize (bilinear, align_corners=false, no antialias) and resize_shorter.
// Randomness comes from a SampleRng keyed by (seed, epoch, sample index), so an augmented sample
// is the same for any number of loader threads and after a resume.
//   ctest --test-dir build -R test_transforms
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "kernels/common/philox.h"

namespace kiln {

// A Philox-4x32 stream for one sample: key = f(seed, epoch), counter = (index, draw number).
class SampleRng {
 public:
  SampleRng(uint64_t seed, int64_t epoch, int64_t index);
  uint32_t next_u32();
  double uniform();                           // [0, 1), 53 bits
  double uniform(double lo, double hi);       // [lo, hi)
  int64_t randint(int64_t lo, int64_t hi);    // [lo, hi), hi > lo

 private:
  uint64_t key_;
  uint64_t counter_;
  Philox4x32 block_{};
  int lane_ = 4;
};

class Transform {
 public:
  virtual ~Transform();
  // image: [C, H, W]; the result is a new tensor (the input is never modified).
  virtual Tensor apply(const Tensor& image, SampleRng& rng) const = 0;
  virtual std::string describe() const = 0;
};

std::shared_ptr<Transform> compose(std::vector<std::shared_ptr<Transform>> transforms);
// uint8 -> float32 * scale; float inputs become float32 unscaled (readers such as MnistDataset
// already give [0, 1] floats).
std::shared_ptr<Transform> to_float(double scale = 1.0 / 255);
// (x - mean[c]) / std[c] on float32; a single mean/std applies to every channel.
std::shared_ptr<Transform> normalize(std::vector<float> mean, std::vector<float> std);
// Pads every side with `padding` zeros, then crops h x w at a uniform position (top drawn first).
std::shared_ptr<Transform> random_crop(int64_t h, int64_t w, int64_t padding = 0);
// torchvision RandomResizedCrop.get_params (10 tries, then the central fallback), then bilinear
// resize of the crop to h x w.
std::shared_ptr<Transform> random_resized_crop(int64_t h, int64_t w, double scale_lo = 0.08, double scale_hi = 1.0,
                                               double ratio_lo = 3.0 / 4, double ratio_hi = 4.0 / 3);
std::shared_ptr<Transform> random_horizontal_flip(double p = 0.5);
// Offsets round((H - h) / 2) half to even as torchvision; zero fill where the crop is larger.
std::shared_ptr<Transform> center_crop(int64_t h, int64_t w);
// Bilinear, align_corners=false (torch.nn.functional.interpolate); uint8 results are rounded.
std::shared_ptr<Transform> resize(int64_t h, int64_t w);
// Shorter side to s, longer side int(s * long / short) (torchvision Resize(int)).
std::shared_ptr<Transform> resize_shorter(int64_t s);

// Building blocks, exposed for tests and for readers.
// Window [top, top + h) x [left, left + w) of a [C, H, W] image; out-of-image pixels are zero.
Tensor crop_image(const Tensor& image, int64_t top, int64_t left, int64_t h, int64_t w);
Tensor flip_image(const Tensor& image);
Tensor resize_image(const Tensor& image, int64_t h, int64_t w);

}  // namespace kiln
