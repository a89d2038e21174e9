// ImageFolder: an ImageNet-style tree, root/<class>/<image>, torchvision's ImageFolder. Classes
// are the sorted sub-folder names, samples sorted by path; JPEG (libjpeg-turbo) and PNG (libpng)
// are decoded on get() into uint8 [C, H, W]. Decoding errors, truncated or garbage files throw
// kiln::Error naming the file (libjpeg/libpng errors are caught with setjmp, never exit).
//   ctest --test-dir build -R test_image_folder
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/data/dataset.h"

namespace kiln {

// The decode limit: an image of more than kMaxImageValues values (height x width x channels,
// 2^28: e.g. 16384 x 16384 gray, 9459 x 9459 RGB) is refused from its header, before decoding;
// a PNG also when its rows could not fit in the file at deflate's 1032:1.
constexpr int64_t kMaxImageValues = int64_t(1) << 28;

// uint8 [C, H, W] with C = 1 (gray) or 3 (RGB): PNG palette and low bit depths are expanded,
// 16-bit reduced to 8, alpha dropped; JPEG gray stays gray, YCbCr/RGB becomes RGB (CMYK throws).
// `channels` 3 replicates gray to RGB, 1 converts RGB to gray (ITU-R 601 luma), 0 keeps the file's.
Tensor decode_image(const std::string& path, int channels = 0);
// The same from the file's bytes in memory (JPEG or PNG by signature); `name` starts messages.
Tensor decode_image_bytes(const uint8_t* data, size_t size, const std::string& name, int channels = 0);
Tensor decode_jpeg(const uint8_t* data, size_t size, const std::string& name);
Tensor decode_png(const uint8_t* data, size_t size, const std::string& name);

class ImageFolder : public Dataset {
 public:
  // extensions: lower-case with the dot, matched case-insensitively. channels as decode_image
  // (3 by default, torchvision's RGB convert).
  explicit ImageFolder(const std::string& root,
                       std::vector<std::string> extensions = {".jpg", ".jpeg", ".png"}, int channels = 3);
  int64_t size() const override { return int64_t(samples_.size()); }
  // input uint8 [C, H, W], target int64 scalar class index.
  Example get(int64_t index) const override;
  std::string source(int64_t index) const override;
  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(int64_t index) const { return samples_.at(size_t(index)).first; }
  int64_t label(int64_t index) const { return samples_.at(size_t(index)).second; }

 private:
  std::string root_;
  int channels_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int64_t>> samples_;
};

}  // namespace kiln
