// The emulated CUDA device (kernels/cuda/emu/device.h): the runtime API of
// kernels/cuda/emu/include/cuda_runtime_api.h served on the host, the memory protection that makes
// host access to device memory fault, and the stream sanitizer.
// Tests: tests/emu_device/ (ctest --test-dir build-emu-device -L emu_device), tests/gpu.
#include "kernels/cuda/emu/device.h"

#include <cuda_runtime_api.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/common/error.h"

struct CUstream_st {
  int device = 0;
  bool blocking = true;  // synchronises with the legacy default stream (cudaStreamDefault)
  bool legacy = false;   // the device's legacy default stream (cudaStream_t 0)
  uint32_t id = 0;       // its index in every vector clock
  std::vector<uint64_t> clock;
};

struct CUevent_st {
  int device = 0;
  bool timing = true;
  bool recorded = false;
  std::vector<uint64_t> clock;
  double ms = 0;  // host time when recorded (work runs when issued, so that is when it completed)
};

namespace kiln::cuda::emu_device {

namespace {

using Clock = std::vector<uint64_t>;

uint64_t at(const Clock& c, uint32_t i) { return i < c.size() ? c[i] : 0; }
void join(Clock& a, const Clock& b) {
  if (a.size() < b.size()) a.resize(b.size(), 0);
  for (size_t i = 0; i < b.size(); ++i) a[i] = std::max(a[i], b[i]);
}

// One access of device memory: the seq-th operation of stream `stream` (0: none).
struct Access {
  uint32_t stream = 0;
  uint64_t seq = 0;
  int device = -1;
  const char* what = nullptr;  // the kernel's name (a literal, from KILN_LAUNCH), or the runtime call
  bool kernel = false;
};

// A tracked piece of device memory: a cudaMalloc region, or a block of the caching allocator.
struct Region {
  char* begin = nullptr;
  size_t size = 0;
  int device = 0;
  bool block = false;
  bool freed = false;  // blocks only: returned to the allocator, history kept for its reuse
  Access last_write;
  std::vector<Access> reads;  // since the last write, the last per stream
};

struct DeviceMem {
  char* base = nullptr;
  size_t capacity = 0;  // bytes the device reports and serves
  std::map<size_t, size_t> free_ranges;  // offset -> length
  std::unique_ptr<CUstream_st> legacy;
  std::vector<CUstream_st*> streams;  // every live stream of the device, the legacy one included
};

constexpr int kMaxDevices = 16;
constexpr size_t kAlign = 256;            // cudaMalloc's alignment
constexpr size_t kHuge = size_t(2) << 20;  // a transparent huge page: allocations of 2 MiB and up start on one

// For the fault handler, which may not lock: the devices' mappings.
std::atomic<int> g_mapped{0};
char* g_base[kMaxDevices];
size_t g_size[kMaxDevices];
struct sigaction g_old_segv;

struct State {
  std::recursive_mutex mu;
  std::vector<DeviceMem> devices;
  Arch arch;
  std::string arch_name = "sm_90";
  uint32_t next_stream = 1;
  Clock host;  // what the host has waited for
  std::map<char*, Region> raw;     // cudaMalloc / cudaMallocAsync regions
  std::map<char*, Region> blocks;  // caching-allocator blocks, live or freed
  std::map<void*, size_t> pinned;
  int open_depth = 0;
  SanitizerStats stats;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  State();
};

thread_local int t_device = 0;
thread_local cudaError_t t_last = cudaSuccess;

size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// The value of an environment variable, or nullptr when unset or empty.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

long parse_int(const char* name, const char* v, long def, long lo, long hi) {
  if (!v) return def;
  char* end = nullptr;
  const long r = std::strtol(v, &end, 10);
  KILN_CHECK(end && *end == '\0' && r >= lo && r <= hi, name, "='", v, "': expected an integer in [", lo, ", ", hi,
             "]");
  return r;
}

size_t parse_bytes(const char* name, const char* v, size_t def) {
  if (!v) return def;
  char* end = nullptr;
  const unsigned long long r = std::strtoull(v, &end, 10);
  size_t mult = 1;
  if (end && (*end == 'K' || *end == 'k')) mult = size_t(1) << 10, ++end;
  else if (end && (*end == 'M' || *end == 'm')) mult = size_t(1) << 20, ++end;
  else if (end && (*end == 'G' || *end == 'g')) mult = size_t(1) << 30, ++end;
  KILN_CHECK(end && *end == '\0' && r >= 1 && r <= (1ull << 40) / mult, name, "='", v,
             "': expected a size from 1 byte to 1T (a number with K, M or G)");
  return size_t(r) * mult;
}

// Per architecture: the dynamic shared memory a block may opt in to (the CUDA programming guide's
// "maximum amount of shared memory per thread block", compute capabilities table).
struct ArchRow {
  const char* name;
  int major, minor;
  size_t optin_kib;
};
constexpr ArchRow kArchs[] = {{"sm_37", 3, 7, 48}, {"sm_50", 5, 0, 48},  {"sm_60", 6, 0, 48},
                              {"sm_70", 7, 0, 96}, {"sm_75", 7, 5, 64},  {"sm_80", 8, 0, 163},
                              {"sm_86", 8, 6, 99}, {"sm_89", 8, 9, 99},  {"sm_90", 9, 0, 227}};

void on_fault(int sig, siginfo_t* info, void* uctx);

}  // namespace

void install_fault_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  sigaction(SIGSEGV, &sa, &old);
  if (old.sa_sigaction != on_fault) g_old_segv = old;
}

namespace {

State::State() {
  if (const char* a = env("KILN_EMU_ARCH")) {
    const ArchRow* row = nullptr;
    for (const ArchRow& r : kArchs)
      if (std::strcmp(r.name, a) == 0) row = &r;
    std::string known;
    for (const ArchRow& r : kArchs) known += std::string(known.empty() ? "" : " ") + r.name;
    KILN_CHECK(row, "KILN_EMU_ARCH='", a, "' is not an emulated architecture (", known, ")");
    arch.major = row->major;
    arch.minor = row->minor;
    arch.max_shared_optin = row->optin_kib * 1024;
    arch_name = row->name;
  }
  const int n = int(parse_int("KILN_EMU_DEVICES", env("KILN_EMU_DEVICES"), 2, 0, kMaxDevices));
  const size_t capacity = round_up(
      parse_bytes("KILN_EMU_DEVICE_MEMORY", env("KILN_EMU_DEVICE_MEMORY"), size_t(4) << 30), page_size());
  devices.resize(size_t(n));
  for (int d = 0; d < n; ++d) {
    DeviceMem& m = devices[size_t(d)];
    void* p = mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    KILN_CHECK(p != MAP_FAILED, "emulated device cuda:", d, ": cannot reserve ", capacity, " bytes of address space: ",
               std::strerror(errno));
    // Huge pages where the kernel offers them: an Open's mprotect then flips one entry per 2 MiB
    // rather than 512 (nets with hundreds of MiB of weights launch thousands of kernels).
    (void)madvise(p, capacity, MADV_HUGEPAGE);
    m.base = static_cast<char*>(p);
    m.capacity = capacity;
    m.free_ranges[0] = capacity;
    m.legacy = std::make_unique<CUstream_st>();
    m.legacy->device = d;
    m.legacy->legacy = true;
    m.legacy->id = next_stream++;
    m.streams.push_back(m.legacy.get());
    g_base[d] = m.base;
    g_size[d] = capacity;
  }
  g_mapped.store(n, std::memory_order_release);
  if (n > 0) {
    void* warm[2];
    (void)backtrace(warm, 2);  // loads the unwinder now: the fault handler must not
    install_fault_handler();
  }
}

State& state() {
  static State* s = new State();  // never destroyed: streams and events may outlive static destructors
  return *s;
}

// ---------------------------------------------------------------- host access: the fault handler

void say(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}

void on_fault(int, siginfo_t* info, void* uctx) {
  char* a = static_cast<char*>(info->si_addr);
  int dev = -1;
  const int n = g_mapped.load(std::memory_order_acquire);
  for (int d = 0; d < n; ++d)
    if (a >= g_base[d] && a < g_base[d] + g_size[d]) dev = d;
  if (dev < 0) {
    sigaction(SIGSEGV, &g_old_segv, nullptr);  // not ours: the instruction faults again, as before
    return;
  }
  const char* rw = "accessed";
#if defined(__x86_64__)
  rw = (static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) ? "wrote" : "read";
#else
  (void)uctx;
#endif
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "\nkiln emulated device: the host %s device memory outside a kernel or a copy: address %p, "
                "offset %zu of cuda:%d's memory.\nOn a GPU this faults or reads garbage: copy to the host first "
                "(Tensor::to(Device()), cudaMemcpyAsync). The host code that did it:\n",
                rw, static_cast<void*>(a), size_t(a - g_base[dev]), dev);
  say(buf);
  State& s = state();
  if (s.mu.try_lock()) {
    for (auto* m : {&s.blocks, &s.raw}) {
      auto it = m->upper_bound(a);
      if (it == m->begin()) continue;
      --it;
      if (a < it->first + it->second.size) {
        std::snprintf(buf, sizeof buf, "  (inside %s of %zu bytes at %p, offset %zu)\n",
                      it->second.block ? "a caching-allocator block" : "a cudaMalloc allocation", it->second.size,
                      static_cast<void*>(it->first), size_t(a - it->first));
        say(buf);
        break;
      }
    }
    s.mu.unlock();
  }
  void* frames[64];
  const int nf = backtrace(frames, 64);
  backtrace_symbols_fd(frames, nf, 2);
  signal(SIGSEGV, SIG_DFL);  // returning re-executes the access, which now ends the process
}

// The end of a device's allocated memory (what lies beyond is free and stays inaccessible).
size_t live_end(const DeviceMem& m) {
  if (m.free_ranges.empty()) return m.capacity;
  const auto last = std::prev(m.free_ranges.end());
  return last->first + last->second == m.capacity ? last->first : m.capacity;
}

// Device memory is accessible while an Open lives (a kernel, a copy, a memset). mprotect's cost
// grows with the resident pages it covers, so only each device's allocated span is flipped, the
// same span on the way in and out. Allocation happens outside an Open (host code).
class Open {
 public:
  explicit Open(State& s) : s_(s) {
    if (s_.open_depth++ > 0) return;
    spans_.reserve(s_.devices.size());
    for (const DeviceMem& m : s_.devices) spans_.push_back(std::min(round_up(live_end(m), kHuge), m.capacity));
    protect(PROT_READ | PROT_WRITE);
  }
  ~Open() {
    if (--s_.open_depth == 0) protect(PROT_NONE);
  }
  Open(const Open&) = delete;
  Open& operator=(const Open&) = delete;

 private:
  void protect(int prot) {
    for (size_t d = 0; d < spans_.size(); ++d)
      if (spans_[d]) mprotect(s_.devices[d].base, spans_[d], prot);
  }
  State& s_;
  std::vector<size_t> spans_;
};

// ---------------------------------------------------------------- device memory

int device_of(const State& s, const void* p) {
  const char* c = static_cast<const char*>(p);
  for (size_t d = 0; d < s.devices.size(); ++d)
    if (c >= s.devices[d].base && c < s.devices[d].base + s.devices[d].capacity) return int(d);
  return -1;
}

char* arena_alloc(State& s, int dev, size_t bytes) {
  DeviceMem& m = s.devices[size_t(dev)];
  const size_t n = round_up(std::max<size_t>(bytes, 1), kAlign);
  const size_t align = n >= kHuge ? kHuge : kAlign;
  for (auto it = m.free_ranges.begin(); it != m.free_ranges.end(); ++it) {
    const size_t start = it->first, len = it->second, off = round_up(start, align);
    if (off + n > start + len) continue;
    m.free_ranges.erase(it);
    if (off > start) m.free_ranges[start] = off - start;
    if (start + len > off + n) m.free_ranges[off + n] = start + len - (off + n);
    char* p = m.base + off;
    // Uninitialised device memory reads as NaN. The pages are flipped alone (an Open covers the
    // allocated span as it was when it began).
    const size_t pg = page_size(), lo = off / pg * pg, hi = round_up(off + n, pg);
    mprotect(m.base + lo, hi - lo, PROT_READ | PROT_WRITE);
    std::memset(p, 0xff, n);
    if (s.open_depth == 0) mprotect(m.base + lo, hi - lo, PROT_NONE);
    return p;
  }
  return nullptr;
}

void arena_free(State& s, int dev, char* p, size_t bytes) {
  DeviceMem& m = s.devices[size_t(dev)];
  size_t off = size_t(p - m.base), n = round_up(std::max<size_t>(bytes, 1), kAlign);
  // Give whole pages back to the host.
  const size_t pg = page_size(), lo = round_up(off, pg), hi = (off + n) / pg * pg;
  if (hi > lo) madvise(m.base + lo, hi - lo, MADV_DONTNEED);
  auto next = m.free_ranges.lower_bound(off);
  if (next != m.free_ranges.end() && next->first == off + n) {
    n += next->second;
    next = m.free_ranges.erase(next);
  }
  if (next != m.free_ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      n += prev->second;
      m.free_ranges.erase(prev);
    }
  }
  m.free_ranges[off] = n;
}

Region* find_in(std::map<char*, Region>& m, const void* p) {
  char* c = const_cast<char*>(static_cast<const char*>(p));
  auto it = m.upper_bound(c);
  if (it == m.begin()) return nullptr;
  --it;
  return c < it->first + it->second.size ? &it->second : nullptr;
}

// The innermost tracked region holding p: a caching-allocator block, else a cudaMalloc region.
Region* find(State& s, const void* p) {
  if (Region* r = find_in(s.blocks, p)) return r;
  return find_in(s.raw, p);
}

// ---------------------------------------------------------------- streams and the sanitizer

std::string stream_name(const State& s, uint32_t id, int device) {
  if (device >= 0 && size_t(device) < s.devices.size() && s.devices[size_t(device)].legacy->id == id)
    return "the default stream of cuda:" + std::to_string(device);
  return "stream " + std::to_string(id) + " of cuda:" + std::to_string(device);
}

std::string describe(const State& s, const Access& a) {
  const std::string name = a.what ? a.what : "?";
  return (a.kernel ? "kernel '" + name + "'" : name) + " on " + stream_name(s, a.stream, a.device);
}

std::string describe(const Region& r) {
  char b[160];
  std::snprintf(b, sizeof b, "%s of %zu bytes at %p on cuda:%d", r.block ? "a caching-allocator block" : "an allocation",
                r.size, static_cast<void*>(r.begin), r.device);
  return b;
}

CUstream_st* resolve(State& s, cudaStream_t stream, int device) {
  if (stream) return stream;
  KILN_CHECK(device >= 0 && size_t(device) < s.devices.size(), "emulated device: no cuda:", device);
  return s.devices[size_t(device)].legacy.get();
}

// What every operation on `st` starts from: what the host has waited for, and the legacy default
// stream's implicit synchronisation with blocking streams.
void order(State& s, CUstream_st* st) {
  join(st->clock, s.host);
  DeviceMem& m = s.devices[size_t(st->device)];
  if (st->legacy) {
    for (CUstream_st* o : m.streams)
      if (o->blocking && o != st) join(st->clock, o->clock);
  } else if (st->blocking) {
    join(st->clock, m.legacy->clock);
  }
  if (st->clock.size() <= st->id) st->clock.resize(st->id + 1, 0);
}

// A new operation of `st`: returns its access stamp.
Access begin_op(State& s, CUstream_st* st, const char* what) {
  order(s, st);
  st->clock[st->id] += 1;
  return Access{st->id, st->clock[st->id], st->device, what};
}

bool ordered(const CUstream_st* st, const Access& a) {
  return a.stream == 0 || a.stream == st->id || at(st->clock, a.stream) >= a.seq;
}

[[noreturn]] void race(State& s, const Access& me, bool me_write, const Access& other, bool other_write,
                       const Region& r, const void* p) {
  s.stats.races += 1;
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", p);
  KILN_THROW("stream sanitizer: ", describe(s, me), me_write ? " writes " : " reads ", addr, " in ", describe(r),
             ", which ", describe(s, other), other_write ? " last wrote" : " read",
             "; nothing orders the two (no cudaStreamWaitEvent on an event recorded after the first, no "
             "synchronisation), so on a GPU they may run at the same time");
}

void access(State& s, CUstream_st* st, const Access& me, Region& r, bool write, const void* p) {
  s.stats.accesses += 1;
  if (r.freed) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "%p", p);
    KILN_THROW("emulated device: ", describe(s, me), write ? " writes " : " reads ", addr, " in ", describe(r),
               ", which the caching allocator has taken back (use after free)");
  }
  if (!ordered(st, r.last_write)) race(s, me, write, r.last_write, true, r, p);
  if (write)
    for (const Access& a : r.reads)
      if (!ordered(st, a)) race(s, me, true, a, false, r, p);
  if (write) {
    r.last_write = me;
    r.reads.clear();
  } else {
    auto it = std::find_if(r.reads.begin(), r.reads.end(), [&](const Access& a) { return a.stream == me.stream; });
    if (it != r.reads.end())
      *it = me;
    else
      r.reads.push_back(me);
  }
}

// The region [p, p + bytes) must lie in: an allocation of device memory, whole.
Region& checked_region(State& s, const void* p, size_t bytes, const char* call, const char* role) {
  Region* r = find(s, p);
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", p);
  KILN_CHECK(r, call, ": the ", role, " ", addr, " is in cuda:", device_of(s, p),
             "'s memory but in no allocation (freed, or never allocated)");
  const char* c = static_cast<const char*>(p);
  KILN_CHECK(c + bytes <= r->begin + r->size, call, ": ", bytes, " bytes at the ", role, " ", addr, " run past the end of ",
             describe(*r), " by ", size_t(c + bytes - (r->begin + r->size)), " bytes");
  return *r;
}

cudaError_t fail(cudaError_t e) {
  t_last = e;
  return e;
}

bool valid_device(const State& s, int d) { return d >= 0 && size_t(d) < s.devices.size(); }

double now_ms(const State& s) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s.t0).count();
}

// The copy of cudaMemcpy*Async: checks and records both ends, then copies.
cudaError_t copy(void* dst, const void* src, size_t bytes, cudaStream_t stream, int device, const char* call) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!valid_device(s, device)) return fail(cudaErrorInvalidDevice);
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  CUstream_st* st = resolve(s, stream, device);
  const Access me = begin_op(s, st, call);
  const bool dst_dev = device_of(s, dst) >= 0, src_dev = device_of(s, src) >= 0;
  if (src_dev) access(s, st, me, checked_region(s, src, bytes, call, "source"), false, src);
  if (dst_dev) access(s, st, me, checked_region(s, dst, bytes, call, "destination"), true, dst);
  Open open(s);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t fill(void* p, int value, size_t bytes, cudaStream_t stream, const char* call) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (bytes == 0) return cudaSuccess;
  if (device_of(s, p) < 0) return fail(cudaErrorInvalidValue);
  CUstream_st* st = resolve(s, stream, t_device);
  const Access me = begin_op(s, st, call);
  access(s, st, me, checked_region(s, p, bytes, call, "destination"), true, p);
  Open open(s);
  std::memset(p, value, bytes);
  return cudaSuccess;
}

void host_waits(State& s, const Clock& c) { join(s.host, c); }

void device_sync(State& s, int device) {
  for (CUstream_st* st : s.devices[size_t(device)].streams) host_waits(s, st->clock);
}

void all_sync(State& s) {
  for (size_t d = 0; d < s.devices.size(); ++d) device_sync(s, int(d));
}

// Drops the block regions inside [p, p + n) (a segment going back to the device).
void drop_blocks(State& s, char* p, size_t n) {
  auto it = s.blocks.lower_bound(p);
  while (it != s.blocks.end() && it->first < p + n) it = s.blocks.erase(it);
}

cudaError_t malloc_on(void** ptr, size_t bytes, cudaStream_t stream, const char* call) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (s.devices.empty()) return fail(cudaErrorNoDevice);
  char* p = arena_alloc(s, t_device, bytes);
  if (!p) return fail(cudaErrorMemoryAllocation);
  Region r;
  r.begin = p;
  r.size = bytes ? bytes : 1;
  r.device = t_device;
  if (stream) {  // stream-ordered: allocated "on" the stream
    CUstream_st* st = resolve(s, stream, t_device);
    order(s, st);
    r.last_write = Access{st->id, st->clock[st->id], st->device, call};
  }
  s.raw[p] = r;
  *ptr = p;
  return cudaSuccess;
}

// cudaFree synchronises the device first; cudaFreeAsync is stream-ordered (the driver's pool makes
// a reuse wait for the freeing stream), so the region simply goes.
cudaError_t free_raw(void* ptr, bool synchronise) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!ptr) return cudaSuccess;
  auto it = s.raw.find(static_cast<char*>(ptr));
  if (it == s.raw.end()) return fail(cudaErrorInvalidDevicePointer);
  if (synchronise) all_sync(s);
  drop_blocks(s, it->second.begin, it->second.size);
  arena_free(s, it->second.device, it->second.begin, it->second.size);
  s.raw.erase(it);
  return cudaSuccess;
}

}  // namespace

// ---------------------------------------------------------------- the C++ side (device.h)

void launch(const char* name, Stream stream, const Args& args, void (*run)(void*), void* ctx) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const char* kernel = name ? name : "a kernel";
  KILN_CHECK(valid_device(s, t_device), "launch of kernel '", kernel, "': no emulated cuda:", t_device);
  CUstream_st* st = resolve(s, stream, t_device);
  KILN_CHECK(st->device == t_device, "launch of kernel '", kernel, "' on a stream of cuda:", st->device, " while cuda:",
             t_device, " is current (cudaErrorInvalidResourceHandle on a GPU)");
  Access me = begin_op(s, st, kernel);
  me.kernel = true;
  // One access per region: a kernel that reads and writes a block writes it.
  std::vector<std::pair<Region*, const void*>> regions;
  std::vector<bool> writes;
  for (const Arg& a : args.list()) {
    const int dev = device_of(s, a.ptr);
    if (dev < 0) {
      if (!a.exact) continue;
      char addr[32];
      std::snprintf(addr, sizeof addr, "%p", a.ptr);
      const bool pinned = [&] {
        auto it = s.pinned.upper_bound(const_cast<void*>(a.ptr));
        if (it == s.pinned.begin()) return false;
        --it;
        return static_cast<const char*>(a.ptr) < static_cast<const char*>(it->first) + it->second;
      }();
      KILN_CHECK(pinned, "launch of kernel '", kernel, "': argument ", addr,
                 " is a host address; a kernel can dereference only device memory");
      continue;
    }
    Region* r = find(s, a.ptr);
    if (!a.exact && (!r || r->freed)) continue;  // a struct's field the kernel may not use
    if (!r) {
      char addr[32];
      std::snprintf(addr, sizeof addr, "%p", a.ptr);
      KILN_THROW("launch of kernel '", kernel, "': argument ", addr, " is in cuda:", dev,
                 "'s memory but in no allocation (freed, or never allocated)");
    }
    KILN_CHECK(r->device == t_device, "launch of kernel '", kernel, "' on cuda:", t_device, ": argument in ",
               describe(*r), " (peer access is not enabled)");
    auto it = std::find_if(regions.begin(), regions.end(), [&](const auto& x) { return x.first == r; });
    if (it == regions.end()) {
      regions.emplace_back(r, a.ptr);
      writes.push_back(a.write);
    } else if (a.write) {
      writes[size_t(it - regions.begin())] = true;
    }
  }
  for (size_t i = 0; i < regions.size(); ++i) access(s, st, me, *regions[i].first, writes[i], regions[i].second);
  Open open(s);
  run(ctx);
}

const Arch& arch() { return state().arch; }

bool is_device_pointer(const void* p) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  return device_of(s, p) >= 0;
}

SanitizerStats sanitizer_stats() {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  return s.stats;
}

}  // namespace kiln::cuda::emu_device

// ---------------------------------------------------------------- the caching allocator's trace

namespace kiln::cuda::trace {

using namespace kiln::cuda::emu_device;  // NOLINT: this file's own namespace

void block_allocated(const void* p, size_t bytes, int device, Stream stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  CUstream_st* st = resolve(s, stream, device);
  order(s, st);
  char* b = const_cast<char*>(static_cast<const char*>(p));
  // Earlier blocks overlapping this one: each must be free, and its every use ordered before now.
  std::vector<Region> keep;
  auto it = s.blocks.upper_bound(b);
  if (it != s.blocks.begin()) --it;
  while (it != s.blocks.end() && it->first < b + bytes) {
    Region& r = it->second;
    if (r.begin + r.size <= b) {
      ++it;
      continue;
    }
    KILN_CHECK(r.freed, "caching allocator: hands out ", bytes, " bytes at ", p, " overlapping ", describe(r),
               ", which is still allocated");
    auto check = [&](const Access& a, bool w) {
      if (ordered(st, a)) return;
      s.stats.races += 1;
      KILN_THROW("stream sanitizer: the caching allocator reuses ", describe(r), " on ",
                 stream_name(s, st->id, st->device), ", but ", describe(s, a), w ? " wrote" : " read",
                 " it before it was freed and nothing orders that use before the reuse: the block was freed and "
                 "reused while another stream may still use it (record_stream on that stream would hold it)");
    };
    check(r.last_write, true);
    for (const Access& a : r.reads) check(a, false);
    if (r.begin < b) {
      Region head = r;
      head.size = size_t(b - r.begin);
      keep.push_back(head);
    }
    if (r.begin + r.size > b + bytes) {
      Region tail = r;
      tail.begin = b + bytes;
      tail.size = size_t(r.begin + r.size - tail.begin);
      keep.push_back(tail);
    }
    it = s.blocks.erase(it);
  }
  for (const Region& r : keep) s.blocks[r.begin] = r;
  Region r;
  r.begin = b;
  r.size = bytes;
  r.device = device;
  r.block = true;
  r.last_write = Access{st->id, st->clock[st->id], st->device, "allocation"};
  s.blocks[b] = r;
}

void block_freed(const void* p, size_t) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  auto it = s.blocks.find(const_cast<char*>(static_cast<const char*>(p)));
  if (it != s.blocks.end()) it->second.freed = true;
}

}  // namespace kiln::cuda::trace

// ---------------------------------------------------------------- the runtime API

using kiln::cuda::emu_device::State;
using namespace kiln::cuda::emu_device;  // NOLINT: the C API below is this namespace's

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = int(state().devices.size());
  return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  State& s = state();
  if (!prop) return fail(cudaErrorInvalidValue);
  if (!valid_device(s, device)) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "kiln emulated device (%s)", s.arch_name.c_str());
  prop->totalGlobalMem = s.devices[size_t(device)].capacity;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = s.arch.max_shared_optin;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = s.arch.major;
  prop->minor = s.arch.minor;
  prop->multiProcessorCount = 2;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (!value) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = int(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = int(p.sharedMemPerBlockOptin); break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(state(), device)) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!valid_device(s, t_device)) return fail(cudaErrorNoDevice);
  device_sync(s, t_device);
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return t_last; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorStubLibrary: return "cudaErrorStubLibrary";
    case cudaErrorSystemDriverMismatch: return "cudaErrorSystemDriverMismatch";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (KILN_EMU_DEVICES=0)";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
  }
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) { return malloc_on(ptr, bytes, nullptr, "cudaMalloc"); }
cudaError_t cudaFree(void* ptr) { return free_raw(ptr, true); }
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  // Stream-ordered: the pool makes a reuse wait for the free's stream, so the new region starts
  // with an allocation on `stream` and no history.
  return malloc_on(ptr, bytes, stream ? stream : resolve(state(), nullptr, t_device), "cudaMallocAsync");
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) { return free_raw(ptr, false); }

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!ptr) return fail(cudaErrorInvalidValue);
  void* p = std::aligned_alloc(4096, round_up(std::max<size_t>(bytes, 1), 4096));
  if (!p) return fail(cudaErrorMemoryAllocation);
  s.pinned[p] = std::max<size_t>(bytes, 1);
  *ptr = p;
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault); }
cudaError_t cudaFreeHost(void* ptr) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!ptr) return cudaSuccess;
  auto it = s.pinned.find(ptr);
  if (it == s.pinned.end()) return fail(cudaErrorInvalidValue);
  all_sync(s);
  s.pinned.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

namespace {
// cudaMemcpyKind against where the pointers are (cudaMemcpyDefault: wherever they are).
bool kind_matches(const State& s, const void* dst, const void* src, cudaMemcpyKind kind) {
  const bool d = device_of(s, dst) >= 0, h = device_of(s, src) >= 0;
  switch (kind) {
    case cudaMemcpyHostToHost: return !d && !h;
    case cudaMemcpyHostToDevice: return d && !h;
    case cudaMemcpyDeviceToHost: return !d && h;
    case cudaMemcpyDeviceToDevice: return d && h;
    case cudaMemcpyDefault: return true;
  }
  return false;
}
}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!kind_matches(s, dst, src, kind)) return fail(cudaErrorInvalidMemcpyDirection);
  const int device = stream ? stream->device : t_device;
  return copy(dst, src, bytes, stream, device, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!kind_matches(s, dst, src, kind)) return fail(cudaErrorInvalidMemcpyDirection);
  const cudaError_t e = copy(dst, src, bytes, nullptr, t_device, "cudaMemcpy");
  if (e == cudaSuccess && valid_device(s, t_device)) host_waits(s, resolve(s, nullptr, t_device)->clock);
  return e;
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!valid_device(s, dst_device) || !valid_device(s, src_device)) return fail(cudaErrorInvalidDevice);
  if (bytes && (device_of(s, dst) != dst_device || device_of(s, src) != src_device)) return fail(cudaErrorInvalidValue);
  return copy(dst, src, bytes, stream, stream ? stream->device : t_device, "cudaMemcpyPeerAsync");
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return fill(ptr, value, bytes, stream, "cudaMemsetAsync");
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const cudaError_t e = fill(ptr, value, bytes, nullptr, "cudaMemset");
  if (e == cudaSuccess) host_waits(s, resolve(s, nullptr, t_device)->clock);
  return e;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!stream || (flags & ~unsigned(cudaStreamNonBlocking))) return fail(cudaErrorInvalidValue);
  if (!valid_device(s, t_device)) return fail(cudaErrorNoDevice);
  auto* st = new CUstream_st();
  st->device = t_device;
  st->blocking = !(flags & cudaStreamNonBlocking);
  st->id = s.next_stream++;
  order(s, st);
  s.devices[size_t(t_device)].streams.push_back(st);
  *stream = st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!stream || stream->legacy) return fail(cudaErrorInvalidResourceHandle);
  auto& v = s.devices[size_t(stream->device)].streams;
  auto it = std::find(v.begin(), v.end(), stream);
  if (it == v.end()) return fail(cudaErrorInvalidResourceHandle);
  v.erase(it);
  delete stream;  // its stamps stay meaningful: ids are never reused
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!valid_device(s, stream ? stream->device : t_device)) return fail(cudaErrorNoDevice);
  CUstream_st* st = resolve(s, stream, t_device);
  order(s, st);
  host_waits(s, st->clock);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaStreamSynchronize(stream); }

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (!valid_device(s, stream ? stream->device : t_device)) return fail(cudaErrorNoDevice);
  CUstream_st* st = resolve(s, stream, t_device);
  if (event->recorded) join(st->clock, event->clock);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (!event) return fail(cudaErrorInvalidValue);
  auto* e = new CUevent_st();
  e->device = t_device;
  e->timing = !(flags & cudaEventDisableTiming);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (!valid_device(s, stream ? stream->device : t_device)) return fail(cudaErrorNoDevice);
  CUstream_st* st = resolve(s, stream, t_device);
  if (st->device != event->device) return fail(cudaErrorInvalidResourceHandle);  // as on a GPU
  order(s, st);
  event->clock = st->clock;
  event->recorded = true;
  event->ms = now_ms(s);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (event->recorded) host_waits(s, event->clock);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return fail(cudaErrorInvalidValue);
  if (!start->timing || !end->timing) return fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
  *ms = float(end->ms - start->ms);
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!func || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0) return fail(cudaErrorInvalidValue);
  // As the device: more than the architecture's opt-in limit is refused.
  if (size_t(value) > arch().max_shared_optin) return fail(cudaErrorInvalidValue);
  return cudaSuccess;
}

}  // extern "C"
