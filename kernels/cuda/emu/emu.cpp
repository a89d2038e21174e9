// The emulator's scheduler: threads of a block as fibers (ucontext, or a small x86-64 switch), switched at __syncthreads()
// and warp collectives (see emu.h); a thread that waits or ends passes control straight to the
// next ready thread, and only the last of a round returns to the scheduler. Fibers and their stacks live in a per-OS-thread pool and are
// reused across blocks and launches; each fiber loops "run the kernel, report done, wait".
// Test: ctest --test-dir build -L emu
#include "kernels/cuda/emu/emu.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kernels/common/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define KILN_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_EMU_ASAN 1
#endif
#endif
#if defined(KILN_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// On x86-64 a hand-written switch saves only what the ABI says a call preserves (callee-saved
// registers, MXCSR and the x87 control word): about 20x faster than swapcontext, which also
// saves and restores the signal mask with a system call. Elsewhere, or with KILN_EMU_UCONTEXT,
// ucontext does both creation and switching.
#if defined(__x86_64__) && defined(__linux__) && !defined(KILN_EMU_UCONTEXT)
#define KILN_EMU_FAST_SWITCH 1
extern "C" void kiln_emu_switch(void** save_sp, void* next_sp);
asm(R"(
  .text
  .globl kiln_emu_switch
  .hidden kiln_emu_switch
  .type kiln_emu_switch, @function
  .p2align 4
kiln_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kiln_emu_switch, .-kiln_emu_switch
)");
#endif

// Bounds of the section static shared memory lives in (KILN_SHARED), from the linker.
extern "C" unsigned char __start_kiln_emu_shared[] __attribute__((weak));
extern "C" unsigned char __stop_kiln_emu_shared[] __attribute__((weak));

namespace kiln::cuda {
inline namespace emu {

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread uint3 blockDim;
__thread uint3 gridDim;

namespace detail {
namespace {

// Big enough for ASan-instrumented kernels and an exception unwinding through them; pages are
// committed only when touched. One guard page below each stack turns an overflow into a fault.
constexpr size_t kStackSize = 256 * 1024;

enum class State : uint8_t { ready, barrier, warp, done, failed };

struct Fiber {
#if defined(KILN_EMU_FAST_SWITCH)
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
  size_t index = 0;                // in the pool: thread index within the block
  unsigned char* stack = nullptr;  // mapping base (guard page first)
  bool fresh = true;               // needs makecontext before it runs (new, or abandoned mid-kernel)
  State state = State::ready;
  uint3 tid{0, 0, 0};
  // At a barrier: its site. At a warp collective: the operation, its arguments and the result.
  const char* file = nullptr;
  int line = 0;
  WarpOp op = WarpOp::sync;
  unsigned mask = 0;
  int arg = 0, width = 32;
  uint64_t value = 0, result = 0;
#if defined(KILN_EMU_ASAN)
  void* fake_stack = nullptr;
#endif
};

struct Grid {
  const char* kernel = "?";
  void (*thunk)(void*) = nullptr;
  void* ctx = nullptr;
  std::exception_ptr error;
  unsigned char* shared = nullptr;
  size_t shmem = 0;
};

struct Scheduler {
#if defined(KILN_EMU_FAST_SWITCH)
  void* main_sp = nullptr;
#else
  ucontext_t main_ctx;
#endif
  std::vector<std::unique_ptr<Fiber>> pool;
  Fiber* current = nullptr;
  Grid* grid = nullptr;
  size_t nthreads = 0;       // threads of the block being run
  Fiber* failed = nullptr;   // the fiber whose kernel threw, for run_block
  bool from_main = false;    // whether the running fiber was entered from the scheduler
#if defined(KILN_EMU_ASAN)
  const void* main_bottom = nullptr;
  size_t main_size = 0;
  void* main_fake_stack = nullptr;
#endif
  ~Scheduler() {
    for (auto& f : pool)
      if (f->stack) munmap(f->stack, kStackSize + size_t(getpagesize()));
  }
};

thread_local Scheduler tls_sched;

unsigned char* stack_top_region(Fiber* f) { return f->stack + getpagesize(); }

// Fiber -> scheduler.
void yield_to_main() {
  Scheduler& s = tls_sched;
  Fiber* f = s.current;
#if defined(KILN_EMU_ASAN)
  __sanitizer_start_switch_fiber(&f->fake_stack, s.main_bottom, s.main_size);
#endif
#if defined(KILN_EMU_FAST_SWITCH)
  kiln_emu_switch(&f->sp, s.main_sp);
#else
  swapcontext(&f->ctx, &s.main_ctx);
#endif
#if defined(KILN_EMU_ASAN)
  __sanitizer_finish_switch_fiber(f->fake_stack, nullptr, nullptr);
#endif
}

void switch_out();

void fiber_main() {
  Scheduler& s = tls_sched;
#if defined(KILN_EMU_ASAN)
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
  if (s.from_main) {
    s.main_bottom = bottom;
    s.main_size = size;
  }
#endif
  for (;;) {
    Fiber* f = s.current;
    try {
      s.grid->thunk(s.grid->ctx);
      f->state = State::done;
    } catch (...) {
      s.grid->error = std::current_exception();
      f->state = State::failed;
      s.failed = f;
    }
    switch_out();
  }
}

// A fiber's first frame, when it is new or was abandoned mid-kernel.
void prepare(Fiber* f) {
  if (f->fresh) {
#if defined(KILN_EMU_ASAN)
    // Frames abandoned mid-kernel leave their redzones poisoned.
    __asan_unpoison_memory_region(stack_top_region(f), kStackSize);
#endif
#if defined(KILN_EMU_FAST_SWITCH)
    // The frame kiln_emu_switch pops: MXCSR/x87 control word, six registers, then it returns
    // into fiber_main with the stack aligned as after a call (a null return address above).
    auto top = reinterpret_cast<uintptr_t>(stack_top_region(f) + kStackSize) & ~uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(&fiber_main);
    for (int r = 0; r < 6; ++r) *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(uintptr_t(0x1f80) | (uintptr_t(0x037f) << 32));
    f->sp = sp;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = stack_top_region(f);
    f->ctx.uc_stack.ss_size = kStackSize;
    f->ctx.uc_link = nullptr;
    makecontext(&f->ctx, fiber_main, 0);
#endif
    f->fresh = false;
  }
}

// Fiber -> the next ready thread of the block, or the scheduler when there is none (or this one
// failed). Going straight from thread to thread halves the switches of a barrier round.
void switch_out() {
  Scheduler& s = tls_sched;
  Fiber* f = s.current;
  Fiber* next = nullptr;
  if (f->state != State::failed)
    for (size_t j = f->index + 1; j < s.nthreads; ++j)
      if (s.pool[j]->state == State::ready) {
        next = s.pool[j].get();
        break;
      }
  if (!next) {
    yield_to_main();
    return;
  }
  prepare(next);
  threadIdx = next->tid;
  s.current = next;
  s.from_main = false;
#if defined(KILN_EMU_ASAN)
  __sanitizer_start_switch_fiber(&f->fake_stack, stack_top_region(next), kStackSize);
#endif
#if defined(KILN_EMU_FAST_SWITCH)
  kiln_emu_switch(&f->sp, next->sp);
#else
  swapcontext(&f->ctx, &next->ctx);
#endif
#if defined(KILN_EMU_ASAN)
  __sanitizer_finish_switch_fiber(f->fake_stack, nullptr, nullptr);
#endif
}

// Scheduler -> fiber f, until the fibers it chains to yield back.
void resume(Scheduler& s, Fiber* f) {
  prepare(f);
  threadIdx = f->tid;
  s.current = f;
  s.from_main = true;
#if defined(KILN_EMU_ASAN)
  __sanitizer_start_switch_fiber(&s.main_fake_stack, stack_top_region(f), kStackSize);
#endif
#if defined(KILN_EMU_FAST_SWITCH)
  kiln_emu_switch(&s.main_sp, f->sp);
#else
  swapcontext(&s.main_ctx, &f->ctx);
#endif
#if defined(KILN_EMU_ASAN)
  __sanitizer_finish_switch_fiber(s.main_fake_stack, nullptr, nullptr);
#endif
  s.current = nullptr;
}

void grow_pool(Scheduler& s, size_t n) {
  while (s.pool.size() < n) {
    auto f = std::make_unique<Fiber>();
    const size_t page = size_t(getpagesize());
    void* p = mmap(nullptr, kStackSize + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    KILN_CHECK(p != MAP_FAILED, "emu: cannot map a fiber stack of ", kStackSize, " bytes");
    mprotect(p, page, PROT_NONE);
    f->stack = static_cast<unsigned char*>(p);
    f->index = s.pool.size();
    s.pool.push_back(std::move(f));
  }
}

std::string where(const Grid& g, const uint3& block, const Fiber* f) {
  std::string w = std::string("emu: kernel '") + g.kernel + "' block (" + std::to_string(block.x) + "," +
                  std::to_string(block.y) + "," + std::to_string(block.z) + ")";
  if (f)
    w += " thread (" + std::to_string(f->tid.x) + "," + std::to_string(f->tid.y) + "," + std::to_string(f->tid.z) + ")";
  return w + ": ";
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync: return "__syncwarp";
    case WarpOp::shfl_idx: return "__shfl_sync";
    case WarpOp::shfl_up: return "__shfl_up_sync";
    case WarpOp::shfl_down: return "__shfl_down_sync";
    case WarpOp::shfl_xor: return "__shfl_xor_sync";
    case WarpOp::ballot: return "__ballot_sync";
    case WarpOp::any: return "__any_sync";
    case WarpOp::all: return "__all_sync";
  }
  return "?";
}

const char* state_name(State s) {
  switch (s) {
    case State::ready: return "running";
    case State::barrier: return "waiting at __syncthreads";
    case State::warp: return "at another warp collective";
    case State::done: return "exited";
    case State::failed: return "failed";
  }
  return "?";
}

// Computes the collective for the lanes of `mask` in warp base..base+31 (all present, checked).
void finish_collective(Fiber** lanes, unsigned mask) {
  Fiber* any = nullptr;
  unsigned ballot = 0;
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1u) {
      any = lanes[l];
      if (lanes[l]->value) ballot |= 1u << l;
    }
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u)) continue;
    Fiber* f = lanes[l];
    const int w = f->width;
    const int seg = l & ~(w - 1);
    int src = l;
    switch (any->op) {
      case WarpOp::sync: break;
      case WarpOp::shfl_idx: src = seg + ((f->arg % w + w) % w); break;
      case WarpOp::shfl_up: src = (l - seg) >= f->arg ? l - f->arg : l; break;
      case WarpOp::shfl_down: src = (l - seg) + f->arg < w ? l + f->arg : l; break;
      case WarpOp::shfl_xor: src = l ^ f->arg; if (src < seg || src >= seg + w) src = l; break;
      case WarpOp::ballot: f->result = ballot; break;
      case WarpOp::any: f->result = ballot != 0; break;
      case WarpOp::all: f->result = (ballot & mask) == mask; break;
    }
    if (any->op >= WarpOp::shfl_idx && any->op <= WarpOp::shfl_xor)
      // A source lane outside the mask is undefined on a GPU; the emulator gives the lane its own value.
      f->result = lanes[src] && (mask >> src & 1u) ? lanes[src]->value : f->value;
  }
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1u) lanes[l]->state = State::ready;
}

void run_block(Scheduler& s, Grid& g, const uint3& bid, size_t nthreads) {
  blockIdx = bid;
  // Shared memory starts NaN-filled (0xff bytes), so reads before writes show up.
  if (g.shared) std::memset(g.shared, 0xff, g.shmem);
  unsigned char* const shared_begin = __start_kiln_emu_shared;
  unsigned char* const shared_end = __stop_kiln_emu_shared;
  if (shared_begin && shared_end > shared_begin) std::memset(shared_begin, 0xff, size_t(shared_end - shared_begin));
  for (size_t i = 0; i < nthreads; ++i) s.pool[i]->state = State::ready;
  s.nthreads = nthreads;
  s.failed = nullptr;
  for (;;) {
    for (size_t i = 0; i < nthreads; ++i) {
      if (s.pool[i]->state != State::ready) continue;
      resume(s, s.pool[i].get());
      if (Fiber* f = s.failed) {
        s.failed = nullptr;
        // Abandon the block: the other fibers are suspended mid-kernel, their stacks are reset.
        for (size_t k = 0; k < nthreads; ++k)
          if (s.pool[k]->state != State::done) s.pool[k]->fresh = true;
        std::exception_ptr e = g.error;
        g.error = nullptr;
        try {
          std::rethrow_exception(e);
        } catch (const Error& err) {
          throw Error(where(g, bid, f) + err.message());
        } catch (const std::exception& err) {
          throw Error(where(g, bid, f) + err.what());
        }
      }
    }
    auto fail = [&](Fiber* f, const std::string& what) {
      for (size_t k = 0; k < nthreads; ++k)
        if (s.pool[k]->state != State::done) s.pool[k]->fresh = true;
      throw Error(where(g, bid, f) + what);
    };
    // Every thread waits, has exited or has failed: release complete warp collectives first.
    bool released = false;
    size_t at_barrier = 0, done = 0;
    for (size_t base = 0; base < nthreads; base += 32) {
      Fiber* lanes[32] = {};
      for (size_t l = 0; l < 32 && base + l < nthreads; ++l) lanes[l] = s.pool[base + l].get();
      for (int l = 0; l < 32; ++l) {
        Fiber* f = lanes[l];
        if (!f || f->state != State::warp) continue;
        if (!(f->mask >> l & 1u))
          fail(f, std::string(op_name(f->op)) + " with a mask that leaves out the calling lane " + std::to_string(l));
        for (int m = 0; m < 32; ++m) {
          if (!(f->mask >> m & 1u)) continue;
          Fiber* o = lanes[m];
          if (!o)
            fail(f, std::string(op_name(f->op)) + " mask names lane " + std::to_string(m) + ", past the block's threads");
          if (o->state != State::warp || o->mask != f->mask || o->op != f->op)
            fail(f, std::string(op_name(f->op)) + " at " + "mask 0x" + [&] {
                   char b[16];
                   std::snprintf(b, sizeof b, "%08x", f->mask);
                   return std::string(b);
                 }() + ": lane " + std::to_string(m) + " never arrives (" +
                        (o->state == State::warp ? std::string(op_name(o->op)) + " with another mask" : state_name(o->state)) +
                        ")");
        }
        finish_collective(lanes, f->mask);
        released = true;
      }
    }
    if (released) continue;
    Fiber* first_done = nullptr;
    Fiber* first_barrier = nullptr;
    for (size_t i = 0; i < nthreads; ++i) {
      Fiber* f = s.pool[i].get();
      if (f->state == State::done) {
        ++done;
        if (!first_done) first_done = f;
      } else if (f->state == State::barrier) {
        ++at_barrier;
        if (!first_barrier) first_barrier = f;
        else if (f->line != first_barrier->line ||
                 (f->file != first_barrier->file && std::strcmp(f->file, first_barrier->file) != 0))
          fail(f, std::string("barrier divergence: waits at __syncthreads (") + f->file + ":" + std::to_string(f->line) +
                      ") while thread (" + std::to_string(first_barrier->tid.x) + "," + std::to_string(first_barrier->tid.y) +
                      "," + std::to_string(first_barrier->tid.z) + ") waits at another (" + first_barrier->file + ":" +
                      std::to_string(first_barrier->line) + ")");
      }
    }
    if (done == nthreads) return;
    if (done > 0)
      fail(first_done, std::string("barrier divergence: exited while other threads wait at __syncthreads (") +
                           first_barrier->file + ":" + std::to_string(first_barrier->line) + ")");
    for (size_t i = 0; i < nthreads; ++i) s.pool[i]->state = State::ready;
  }
}

Fiber* current_fiber(const char* what) {
  Fiber* f = tls_sched.current;
  KILN_CHECK(f, "emu: ", what, " called outside a kernel launched through the emulator");
  return f;
}

}  // namespace

void syncthreads(const char* file, int line) {
  Fiber* f = current_fiber("__syncthreads");
  f->state = State::barrier;
  f->file = file;
  f->line = line;
  switch_out();
}

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Fiber* f = current_fiber(op_name(op));
  KILN_CHECK(width > 0 && width <= 32 && (width & (width - 1)) == 0, op_name(op), ": width ", width,
             " is not a power of two up to 32");
  f->state = State::warp;
  f->op = op;
  f->mask = mask;
  f->value = value;
  f->arg = arg;
  f->width = width;
  switch_out();
  return f->result;
}

unsigned char* dynamic_shared() {
  Scheduler& s = tls_sched;
  KILN_CHECK(s.grid, "emu: dynamic shared memory used outside a kernel launched through the emulator");
  return s.grid->shared;
}

void run_grid(const char* kernel, dim3 grid, dim3 block, size_t shmem, void (*thunk)(void*), void* ctx) {
  Scheduler& s = tls_sched;
  KILN_CHECK(!s.grid, "emu: kernel '", kernel, "' launched from inside kernel '", s.grid ? s.grid->kernel : "",
             "' (dynamic parallelism is not emulated)");
  const size_t nthreads = size_t(block.x) * block.y * block.z;
  grow_pool(s, nthreads);
  Grid g;
  g.kernel = kernel ? kernel : "?";
  g.thunk = thunk;
  g.ctx = ctx;
  g.shmem = shmem;
  // Exactly the launch's size on the heap, so AddressSanitizer sees overruns of it.
  std::unique_ptr<unsigned char[]> shared(shmem ? new unsigned char[shmem] : nullptr);
  g.shared = shared.get();
  for (size_t i = 0; i < nthreads; ++i) {
    Fiber* f = s.pool[i].get();
    f->tid = uint3{unsigned(i % block.x), unsigned(i / block.x % block.y), unsigned(i / (size_t(block.x) * block.y))};
  }
  blockDim = uint3{block.x, block.y, block.z};
  gridDim = uint3{grid.x, grid.y, grid.z};
  s.grid = &g;
  struct Reset {
    Scheduler& s;
    ~Reset() { s.grid = nullptr; }
  } reset{s};
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) run_block(s, g, uint3{x, y, z}, nthreads);
}

}  // namespace detail
}  // namespace emu
}  // namespace kiln::cuda
