// Synchronous data parallelism (Horovod, PyTorch's DistributedDataParallel): every rank holds
// the whole model, runs forward and backward on its shard of the batch, and the gradients are
// averaged over the ranks before each rank's optimizer applies the same update.
//
//   dist::DataParallel dp(*model, comm, thread, {});   // checks structure, broadcasts rank 0's state
//   for (;;) {
//     bool have = loader.next(batch);
//     if (dp.begin_step(have) == 0) break;              // every rank is out of batches
//     Tensor loss = ...;                                // a rank without a batch replays its last
//     loss.backward();                                  // one with the loss scaled by 0 (join)
//     dp.finish_gradients();                            // averaged .grad on every rank
//     optimizer.step();
//   }
//
// Gradients are packed into fusion buckets of about bucket_mb in reverse registration order (the
// order backward makes them final). A leaf's post-accumulate hook copies its gradient into its
// bucket; when the bucket's last gradient arrives the bucket is all-reduced on the communication
// thread while backward goes on (overlap); finish_gradients() waits for the buckets, divides by
// the number of ranks that had a batch and writes the result back into .grad. With fp16
// compression the buckets travel as float16. A parameter without a gradient on a rank (unused in
// its forward) contributes zeros, so all ranks still issue the same collectives.
//
// Before anything else the ranks compare the model's structure (every parameter's and buffer's
// name, dtype and shape): a mismatch is a kiln::Error on every rank naming the ranks and the first
// tensor that differs, never a hang.
//   ctest --test-dir build -L mpi -R sync
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/comm_thread.h"
#include "layers/module.h"

namespace kiln::dist {

struct SyncOptions {
  double bucket_mb = 25;          // fusion bucket size (DDP's bucket_cap_mb, Horovod's fusion threshold)
  bool overlap = true;            // all-reduce buckets during backward; false: all after backward
  bool fp16_compression = false;  // buckets cross the wire as float16 (Horovod's Compression.fp16)
  bool broadcast_buffers = true;  // buffers (batch-norm running statistics) from rank 0 at start
};

class DataParallel {
 public:
  DataParallel(Module& model, Communicator& comm, CommThread& thread, SyncOptions options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Copies rank 0's parameters and (with broadcast_buffers) buffers to every rank (the
  // constructor does it once; call again after loading a checkpoint on rank 0 only).
  void broadcast_state();

  // Called by every rank before each step's forward: how many ranks have a batch. 0: all are
  // done. A rank with `have_batch` false while others go on must still run a step with zero
  // gradients (replay a batch with the loss scaled by 0), so the collectives match. The same
  // exchange carries stop requests (SIGTERM on some ranks): *stop_any says whether any rank made
  // one, so all stop at the same step.
  int begin_step(bool have_batch, bool stop_requested = false, bool* stop_any = nullptr);

  // After backward: launches the buckets not launched yet (parameters without a gradient give
  // zeros), waits for all of them and writes the average over the active ranks into .grad.
  void finish_gradients();

  int active_ranks() const { return active_; }
  // Buckets in launch order: the dotted parameter names of each.
  std::vector<std::vector<std::string>> bucket_names() const;
  // Seconds the last finish_gradients() waited for communication (the part not overlapped).
  double last_wait_seconds() const { return last_wait_s_; }
  const SyncOptions& options() const { return options_; }

 private:
  struct Bucket;
  struct Slot;
  void check_structure();
  void build_buckets();
  void pack(size_t slot);
  void on_grad_ready(size_t slot);
  void launch(size_t bucket);

  Communicator& comm_;
  CommThread& thread_;
  SyncOptions options_;
  NamedTensors params_, buffers_;
  std::vector<Slot> slots_;        // one per parameter that requires grad, registration order
  std::vector<Bucket> buckets_;    // launch order (reverse registration order)
  std::shared_ptr<bool> alive_;    // hooks outlive this object; they check it
  int active_ = 0;
  int64_t step_ = 0;
  double last_wait_s_ = 0;
};

}  // namespace kiln::dist
