// The communication thread: one worker, a FIFO of tasks, handles with sticky errors.
//   ctest --test-dir build -R comm_thread
#include "dist/comm_thread.h"

#include "dist/timeline.h"

namespace kiln::dist {

struct CommThread::Handle::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
};

struct CommThread::Task {
  std::string what;
  std::function<void()> fn;
  std::shared_ptr<Handle::State> state;
};

void CommThread::Handle::wait() const {
  if (!state_) return;
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool CommThread::Handle::ready() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

CommThread::Handle CommThread::submit(std::string what, std::function<void()> fn) {
  auto task = std::make_shared<Task>();
  task->what = std::move(what);
  task->fn = std::move(fn);
  task->state = std::make_shared<Handle::State>();
  Handle h;
  h.state_ = task->state;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return h;
}

void CommThread::loop() {
  timeline::set_thread_name("communication");
  for (;;) {
    std::shared_ptr<Task> task;
    std::exception_ptr failed;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      failed = failed_;
    }
    std::exception_ptr error = failed;
    if (!error) {
      try {
        timeline::Span span("communication", task->what);
        task->fn();
      } catch (...) {
        error = std::current_exception();
        std::lock_guard<std::mutex> lock(mu_);
        failed_ = error;
      }
    }
    {
      std::lock_guard<std::mutex> lock(task->state->mu);
      task->state->done = true;
      task->state->error = error;
    }
    task->state->cv.notify_all();
  }
}

}  // namespace kiln::dist
