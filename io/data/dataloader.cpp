// DataLoader. See dataloader.h. Workers claim batch numbers in order from a shared counter (no
// further than `prefetch` ahead of the consumer), build them outside the lock and file them by
// number; next() waits for the next number. start_epoch bumps a generation so batches still
// being built for an abandoned epoch are dropped when they arrive.
#include "io/data/dataloader.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "engine/cuda_copy.h"
#include "kernels/common/parallel.h"

namespace kiln {

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int rank, int world_size) {
  KILN_CHECK(n > 0, "DataLoader: the data set is empty");
  KILN_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "DataLoader: rank ", rank, " not in [0, world_size ",
             world_size, ")");
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[size_t(i)] = i;
  if (shuffle) {
    // Fisher-Yates on its own stream (a key no per-sample SampleRng uses).
    SampleRng rng(seed ^ 0xD1B54A32D192ED03ull, epoch, int64_t(1) << 40);
    for (int64_t i = n - 1; i > 0; --i) std::swap(all[size_t(i)], all[size_t(rng.randint(0, i + 1))]);
  }
  int64_t per_rank = (n + world_size - 1) / world_size;
  std::vector<int64_t> mine;
  mine.reserve(size_t(per_rank));
  for (int64_t k = 0; k < per_rank; ++k) mine.push_back(all[size_t((k * world_size + rank) % n)]);
  return mine;
}

namespace {

Tensor stack(const std::vector<Tensor>& parts, const std::vector<int64_t>& indices, const char* what) {
  const Tensor& first = parts[0];
  KILN_CHECK(first.defined(), "DataLoader: sample ", indices[0], " has an undefined ", what);
  Shape shape = first.sizes();
  shape.insert(shape.begin(), int64_t(parts.size()));
  Tensor out = empty(shape, first.dtype());
  size_t bytes = size_t(first.numel()) * first.element_size();
  char* d = static_cast<char*>(out.data_ptr());
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    KILN_CHECK(p.defined() && p.sizes() == first.sizes() && p.dtype() == first.dtype(), "DataLoader: sample ",
               indices[i], " has ", what, " ", p.defined() ? shape_str(p.sizes()) + " " + dtype_name(p.dtype()) : "undefined",
               " but sample ", indices[0], " has ", shape_str(first.sizes()), " ", dtype_name(first.dtype()),
               " (a batch needs equal shapes: add a resize/crop transform)");
    Tensor c = p.contiguous();
    if (bytes) std::memcpy(d + i * bytes, c.data_ptr(), bytes);
  }
  return out;
}

}  // namespace

Batch collate(const std::vector<Example>& examples, const std::vector<int64_t>& indices) {
  KILN_CHECK(!examples.empty() && examples.size() == indices.size(), "collate: ", examples.size(), " examples, ",
             indices.size(), " indices");
  std::vector<Tensor> xs, ys;
  for (const Example& e : examples) {
    xs.push_back(e.input);
    ys.push_back(e.target);
  }
  Batch b;
  b.input = stack(xs, indices, "input");
  b.target = stack(ys, indices, "target");
  b.size = int64_t(examples.size());
  b.indices = indices;
  return b;
}

struct DataLoader::Shared {
  std::mutex m;
  std::condition_variable work_cv, done_cv;
  bool stop = false;
  uint64_t generation = 0;
  std::shared_ptr<const std::vector<int64_t>> order;
  int64_t epoch = 0;
  int64_t batches = 0;
  int64_t claim_next = 0;    // next batch number a worker takes
  int64_t consume_next = 0;  // next batch number next() returns
  struct Result {
    Batch batch;
    std::exception_ptr error;
  };
  std::map<int64_t, Result> ready;
  std::vector<std::thread> threads;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> data, DataLoaderOptions opts,
                       std::shared_ptr<const Transform> transform, std::shared_ptr<const Transform> target_transform)
    : data_(std::move(data)),
      opts_(opts),
      transform_(std::move(transform)),
      target_transform_(std::move(target_transform)),
      shared_(std::make_unique<Shared>()) {
  KILN_CHECK(data_ != nullptr, "DataLoader: null data set");
  KILN_CHECK(data_->size() > 0, "DataLoader: the data set is empty");
  KILN_CHECK(opts_.batch_size > 0, "DataLoader: batch_size ", opts_.batch_size, " must be positive");
  KILN_CHECK(opts_.workers >= 0, "DataLoader: workers ", opts_.workers, " must be >= 0");
  KILN_CHECK(opts_.world_size >= 1 && opts_.rank >= 0 && opts_.rank < opts_.world_size, "DataLoader: rank ",
             opts_.rank, " not in [0, world_size ", opts_.world_size, ")");
  if (opts_.prefetch < 1) opts_.prefetch = 1;
  KILN_CHECK(batches_per_epoch() > 0, "DataLoader: drop_last leaves no batch: ", samples_per_epoch(),
             " samples per rank, batch_size ", opts_.batch_size);
  KILN_CHECK(opts_.workers <= kMaxWorkers, "DataLoader: workers ", opts_.workers, " is more than ", kMaxWorkers);
  // A thread that cannot start (EAGAIN: out of memory or over a thread limit) throws from the
  // std::thread constructor; the ones already running are stopped and joined first, since a
  // joinable std::thread destroyed while unwinding ends the process.
  try {
    for (int i = 0; i < opts_.workers; ++i) shared_->threads.emplace_back([this] { worker_loop(); });
  } catch (const std::exception& e) {
    const size_t started = shared_->threads.size();
    stop_workers();
    KILN_THROW("DataLoader: cannot start data-loader thread ", started + 1, " of ", opts_.workers, " (", e.what(),
               "); use fewer workers (--workers)");
  }
}

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(shared_->m);
    shared_->stop = true;
  }
  shared_->work_cv.notify_all();
  for (std::thread& t : shared_->threads)
    if (t.joinable()) t.join();
}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::samples_per_epoch() const { return (data_->size() + opts_.world_size - 1) / opts_.world_size; }

int64_t DataLoader::batches_per_epoch() const {
  int64_t n = samples_per_epoch(), b = opts_.batch_size;
  return opts_.drop_last ? n / b : (n + b - 1) / b;
}

int64_t DataLoader::next_batch_index() const {
  std::lock_guard<std::mutex> lock(shared_->m);
  return shared_->consume_next;
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  KILN_CHECK(epoch >= 0, "DataLoader::start_epoch: negative epoch ", epoch);
  int64_t nb = batches_per_epoch();
  KILN_CHECK(skip_batches >= 0 && skip_batches <= nb, "DataLoader::start_epoch: skip_batches ", skip_batches,
             " not in [0, ", nb, "]");
  auto order = std::make_shared<const std::vector<int64_t>>(
      epoch_order(data_->size(), opts_.shuffle, opts_.seed, epoch, opts_.rank, opts_.world_size));
  {
    std::lock_guard<std::mutex> lock(shared_->m);
    ++shared_->generation;
    shared_->order = std::move(order);
    shared_->epoch = epoch;
    shared_->batches = nb;
    shared_->claim_next = shared_->consume_next = skip_batches;
    shared_->ready.clear();
  }
  epoch_ = epoch;
  fresh_ = true;
  shared_->work_cv.notify_all();
}

Batch DataLoader::load_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const {
  int64_t begin = b * opts_.batch_size;
  int64_t end = std::min<int64_t>(begin + opts_.batch_size, int64_t(order.size()));
  std::vector<Example> examples;
  std::vector<int64_t> indices;
  for (int64_t k = begin; k < end; ++k) {
    int64_t idx = order[size_t(k)];
    try {
      Example e = data_->get(idx);
      if (transform_) {
        SampleRng rng(opts_.seed, epoch, idx);
        e.input = transform_->apply(e.input, rng);
      }
      if (target_transform_) {
        SampleRng rng(opts_.seed, epoch, idx);
        e.target = target_transform_->apply(e.target, rng);
      }
      examples.push_back(std::move(e));
    } catch (const std::exception& ex) {
      // The file, where the data set knows it: a transform's error (an image too wide for the
      // resize) names only sizes.
      const std::string src = data_->source(idx);
      KILN_THROW("DataLoader: sample ", idx, src.empty() ? "" : " (" + src + ")", " (batch ", b, ", epoch ", epoch,
                 "): ", ex.what());
    }
    indices.push_back(idx);
  }
  Batch batch = collate(examples, indices);
  if (opts_.pin_memory) {
    batch.input = cuda::pin_memory(batch.input);
    if (batch.target.defined()) batch.target = cuda::pin_memory(batch.target);
  }
  return batch;
}

void DataLoader::worker_loop() {
  SerialScope serial;  // ops inside transforms run on this thread only
  Shared& s = *shared_;
  std::unique_lock<std::mutex> lock(s.m);
  while (true) {
    s.work_cv.wait(lock, [&] {
      return s.stop || (s.order && s.claim_next < s.batches && s.claim_next < s.consume_next + opts_.prefetch);
    });
    if (s.stop) return;
    int64_t b = s.claim_next++;
    uint64_t gen = s.generation;
    auto order = s.order;
    int64_t epoch = s.epoch;
    lock.unlock();
    Shared::Result r;
    try {
      r.batch = load_batch(*order, epoch, b);
    } catch (...) {
      r.error = std::current_exception();
    }
    lock.lock();
    if (gen == s.generation) {
      s.ready[b] = std::move(r);
      s.done_cv.notify_all();
    }
  }
}

DataLoader::Iterator DataLoader::begin() {
  if (!fresh_) start_epoch(epoch_ + 1);
  fresh_ = false;
  return Iterator(this);
}

bool DataLoader::next(Batch& out) {
  KILN_CHECK(epoch_ >= 0, "DataLoader::next: call start_epoch(epoch) first, or iterate with a range-for");
  fresh_ = false;
  Shared& s = *shared_;
  if (opts_.workers == 0) {
    int64_t b;
    std::shared_ptr<const std::vector<int64_t>> order;
    {
      std::lock_guard<std::mutex> lock(s.m);
      if (s.consume_next >= s.batches) return false;
      b = s.consume_next++;
      order = s.order;
    }
    // Serially, as in a worker: a sample's transforms are small ops, and an op team forked for
    // each one costs more than it saves (ImageNet-sized JPEGs: 31 images/s on the two-thread
    // team, 90 serially; bench_loader).
    SerialScope serial;
    out = load_batch(*order, epoch_, b);
    return true;
  }
  std::unique_lock<std::mutex> lock(s.m);
  if (s.consume_next >= s.batches) return false;
  int64_t b = s.consume_next;
  s.done_cv.wait(lock, [&] { return s.ready.count(b) > 0; });
  Shared::Result r = std::move(s.ready[b]);
  s.ready.erase(b);
  ++s.consume_next;
  lock.unlock();
  s.work_cv.notify_all();
  if (r.error) std::rethrow_exception(r.error);
  out = std::move(r.batch);
  return true;
}

}  // namespace kiln
