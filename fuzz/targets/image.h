// The image-folder path shared by the jpeg and png targets: decode to RGB as ImageFolder::get
// does, then the ImageNet validation transform (resize_shorter 256, center_crop 224, to_float,
// normalize) that `kiln train` applies to every validation image.
#pragma once

#include "io/data/datasets.h"
#include "io/data/image_folder.h"

namespace kiln::fuzz {

inline void decode_and_validate(const uint8_t* data, size_t size) {
  static const auto transform = [] {
    Splits s;
    s.name = "imagenet";
    return s.default_transform(false);
  }();
  Tensor image = decode_image_bytes(data, size, "fuzz-image", 3);
  SampleRng rng(0, 0, 0);
  transform->apply(image, rng);
}

}  // namespace kiln::fuzz
