// open_dataset_dir: a train/test pair of data sets from a path, recognising the layouts kiln
// reads, plus the usual transforms for each kind (Splits::default_transform).
//   folder of IDX files (train-images-idx3-ubyte[.gz] ...)   -> "mnist" / "fashion-mnist"
//   CIFAR binary folder (data_batch_1.bin / train.bin, or its cifar-10-batches-bin /
//     cifar-100-binary subfolder)                             -> "cifar10" / "cifar100"
//   ImageNet-style tree (train/ and val/ of class folders)    -> "imagenet"
//   file.npz: x_train/y_train/x_test/y_test, or images/masks split 90/10 in file order -> "npz"
//   "synthetic:CxHxW:CLASSES:N": N training samples, N/10 (at least 1) test samples -> "synthetic"
//   "timeseries:PATH[:window=6][:horizon=1][:stride=1][:inputs=a,b][:targets=c][:train=0.8][:sep=;]":
//     a CSV or .npy table (io/data/timeseries.h) as sliding windows [window, inputs] -> targets,
//     split by time: the first `train` share of the rows trains, the rest is the test split;
//     normalised with the training rows' statistics -> "timeseries" (regression)
//   ctest --test-dir build -R test_dataloader
#pragma once

#include <memory>
#include <string>

#include "io/data/dataset.h"
#include "io/data/transforms.h"

namespace kiln {

struct Splits {
  std::shared_ptr<const Dataset> train, test;
  std::string name;     // mnist, fashion-mnist, cifar10, cifar100, imagenet, npz, synthetic
  Shape sample_shape;   // input shape after default_transform (imagenet: [3, 224, 224])
  int64_t classes = 0;  // label count; for mask targets the mask channels
  bool segmentation = false;  // targets are masks (npz images/masks)
  bool regression = false;    // targets are values to predict (time series; `classes` counts them)

  // The usual recipe: mnist: normalize (mean/std of the set); cifar: train random_crop 32 pad 4 +
  // flip + normalize, test normalize; imagenet: train random_resized_crop 224 + flip, test
  // resize_shorter 256 + center_crop 224, then to_float + normalize; npz and synthetic: to_float
  // only. Readers that already give [0, 1] floats pass through to_float unchanged.
  std::shared_ptr<const Transform> default_transform(bool train) const;
};

// Throws kiln::Error saying what it looked for when `path` matches none of the layouts.
Splits open_dataset_dir(const std::string& path);

// A data set as `kiln train --data` names it: a path (a folder, an .npz file), a "synthetic:..."
// spec, or the name of an installed data set (io/data/catalogue.h find_dataset: under data_root()
// or /usr/share/datasets), whose Splits::name is then that name. kiln::Error naming where it
// looked, and how to install it, when it is none of them.
Splits open_dataset(const std::string& spec);

}  // namespace kiln
