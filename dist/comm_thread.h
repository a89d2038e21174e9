// The communication thread: collectives run here, in submission order, while the caller goes on
// computing (the overlap of Horovod's background thread and DDP's reducer). Every rank submits
// the same collectives in the same order (they come from the same backward pass), so one queue
// per process keeps the ranks' call sequences identical, which is what MPI and NCCL require.
//
//   dist::CommThread thread;
//   auto h = thread.submit("allreduce bucket 0", [&] { comm.allreduce(buf, ReduceOp::sum); });
//   ... compute ...
//   h.wait();                      // rethrows what the collective threw (a timeout, a mismatch)
//
// After a task throws, the error is sticky: later tasks are not run and their wait() rethrows it,
// because the ranks' sequences may no longer agree.
//   ctest --test-dir build -R comm_thread
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace kiln::dist {

class CommThread {
 public:
  class Handle {
   public:
    Handle() = default;
    void wait() const;    // blocks until the task ran; rethrows its exception
    bool ready() const;
    bool valid() const { return state_ != nullptr; }

   private:
    friend class CommThread;
    struct State;
    std::shared_ptr<State> state_;
  };

  CommThread();
  ~CommThread();  // runs what is queued, then joins
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `fn`; `what` names it in the timeline.
  Handle submit(std::string what, std::function<void()> fn);
  // Runs `fn` on the thread and waits for it (for collectives the caller needs at once, which
  // must still be ordered after what is queued).
  void run(std::string what, std::function<void()> fn) { submit(std::move(what), std::move(fn)).wait(); }

 private:
  struct Task;
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool stopping_ = false;
  std::exception_ptr failed_;
  std::thread thread_;
};

}  // namespace kiln::dist
