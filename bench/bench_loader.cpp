// DataLoader throughput: images/s for one epoch of Fashion-MNIST (batch 128, the mnist-cnn
// recipe's transform: to_float + normalize) and of CIFAR-sized synthetic data with the CIFAR
// training transform (random crop 32 pad 4 + flip + normalize), for 0, 1 and 2 workers.
//   cmake --build build -j2 --target bench_loader && ./build/bench/bench_loader [fashion-mnist dir]
#include <chrono>
#include <cstdio>

#include "io/data/dataloader.h"
#include "io/data/datasets.h"
#include "io/data/synthetic.h"

using namespace kiln;

namespace {

double images_per_second(std::shared_ptr<const Dataset> data, std::shared_ptr<const Transform> t, int workers,
                         int64_t max_batches) {
  DataLoaderOptions o;
  o.batch_size = 128;
  o.workers = workers;
  o.seed = 1;
  DataLoader dl(std::move(data), o, std::move(t));
  dl.start_epoch(0);
  Batch b;
  int64_t images = 0, batches = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (batches < max_batches && dl.next(b)) {
    images += b.size;
    ++batches;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(images) / s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  try {
    auto t0 = std::chrono::steady_clock::now();
    Splits s = open_dataset_dir(dir);
    double load = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %lld train images opened in %.2f s\n", s.name.c_str(), (long long)s.train->size(), load);
    for (int w : {0, 1, 2})
      std::printf("  %-14s workers=%d  %9.0f images/s\n", s.name.c_str(), w,
                  images_per_second(s.train, s.default_transform(true), w, 1 << 30));
  } catch (const std::exception& e) {
    std::printf("skipping %s: %s\n", dir.c_str(), e.what());
  }
  Splits c = open_dataset_dir("synthetic:3x32x32:10:20000");
  c.name = "cifar10";  // the CIFAR training recipe on synthetic 32x32 images
  for (int w : {0, 1, 2})
    std::printf("  %-14s workers=%d  %9.0f images/s\n", "cifar-like", w,
                images_per_second(c.train, c.default_transform(true), w, 100));
  return 0;
}
