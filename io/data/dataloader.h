// DataLoader: batches of a Dataset for training, PyTorch's DataLoader + DistributedSampler.
// Each epoch's order is a seeded shuffle f(seed, epoch) (or 0..n-1), padded by wrapping to a
// multiple of world_size and split by rank (indices rank, rank + world, ...), so every rank gets
// the same number of batches. Worker threads load, transform and stack batches ahead of the
// consumer (at most `prefetch` batches in flight); batches come out in order and are identical
// for any number of workers, because each sample's randomness is SampleRng(seed, epoch, index).
// Workers (and the calling thread with workers = 0, while it loads) run the kernels' parallel_for
// serially (SerialScope): per-sample ops are too small for the op team, and loader threads must
// not oversubscribe the cores.
//   ctest --test-dir build -R test_dataloader
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "io/data/dataset.h"
#include "io/data/transforms.h"

namespace kiln {

// input [B, ...] (uint8 stays uint8 unless a transform converts it), target stacked [B, ...].
struct Batch {
  Tensor input;
  Tensor target;
  int64_t size = 0;
  std::vector<int64_t> indices;  // data set index of each row
};

// More loader threads than this is a mistake (a thread per sample, a typo), not a setting.
constexpr int kMaxWorkers = 1024;

struct DataLoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  bool drop_last = false;
  int workers = 2;   // 0: load in the calling thread; at most kMaxWorkers
  int prefetch = 4;  // batches in flight at most (>= 1)
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  bool pin_memory = false;  // batches in page-locked host memory (CUDA builds): their copy to a GPU
                            // is asynchronous, so the next batch loads while the device computes
};

// The sample order of one rank for one epoch (before batching): a pure function of its
// arguments. Exposed for tests and for samplers elsewhere.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int rank, int world_size);

// Stacks examples: inputs must share shape and dtype, as must targets. Throws kiln::Error
// naming the first mismatching row.
Batch collate(const std::vector<Example>& examples, const std::vector<int64_t>& indices);

class DataLoader {
 public:
  // target_transform (masks): applied to the target with a fresh SampleRng of the same key as
  // the input's, so the same random steps (crop, flip) draw the same values for image and mask.
  DataLoader(std::shared_ptr<const Dataset> data, DataLoaderOptions opts,
             std::shared_ptr<const Transform> transform = nullptr,
             std::shared_ptr<const Transform> target_transform = nullptr);
  ~DataLoader();  // stops and joins the workers (they finish at most their current batch)
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const;  // of this rank's shard
  int64_t samples_per_epoch() const;  // of this rank's shard, padding included
  const DataLoaderOptions& options() const { return opts_; }
  const Dataset& dataset() const { return *data_; }

  // Starts (or restarts) an epoch; the first batch returned is batch `skip_batches` (resume).
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch; false at the end of the epoch. A failure loading a sample is rethrown here
  // as kiln::Error naming the sample index, in batch order.
  bool next(Batch& out);
  int64_t epoch() const { return epoch_; }
  int64_t next_batch_index() const;  // batches consumed so far this epoch, skip included

  // Range-for over one epoch, as over a LibTorch loader:
  //   for (Batch& batch : loader) { ... }        // epoch 0, then 1, ... one per loop
  // begin() starts the epoch after the last one (or runs the one start_epoch() has just set up,
  // its skip_batches included); the batches then come from next().
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;
    Iterator() = default;
    Batch& operator*() { return batch_; }
    Batch* operator->() { return &batch_; }
    Iterator& operator++() {
      if (loader_ && !loader_->next(batch_)) loader_ = nullptr;
      return *this;
    }
    bool operator==(const Iterator& o) const { return loader_ == o.loader_; }
    bool operator!=(const Iterator& o) const { return loader_ != o.loader_; }

   private:
    friend class DataLoader;
    explicit Iterator(DataLoader* loader) : loader_(loader) { ++*this; }
    DataLoader* loader_ = nullptr;
    Batch batch_;
  };
  Iterator begin();
  Iterator end() { return Iterator(); }

 private:
  struct Shared;
  Batch load_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const;
  void worker_loop();
  void stop_workers();  // sets stop, wakes and joins every started worker

  std::shared_ptr<const Dataset> data_;
  DataLoaderOptions opts_;
  std::shared_ptr<const Transform> transform_;
  std::shared_ptr<const Transform> target_transform_;
  int64_t epoch_ = -1;
  bool fresh_ = false;  // start_epoch() called and no batch taken since: begin() runs that epoch
  std::unique_ptr<Shared> shared_;
};

}  // namespace kiln
