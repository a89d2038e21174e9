// The emulated CUDA device (kernels/cuda/emu/device.h): its state, the memory protection that
// makes host access to device memory fault, device memory, the stream sanitizer, kernel launches
// and the caching allocator's trace. The runtime API of kernels/cuda/emu/include/cuda_runtime_api.h
// is served from here by kernels/cuda/emu/runtime_api.cpp (what both share: device_detail.h).
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
#include "kernels/cuda/emu/device_detail.h"

namespace kiln::cuda::emu_device {

using namespace device_detail;  // NOLINT: the state this file keeps

namespace {

uint64_t at(const Clock& c, uint32_t i) { return i < c.size() ? c[i] : 0; }

constexpr int kMaxDevices = 16;
constexpr size_t kAlign = 256;            // cudaMalloc's alignment
constexpr size_t kHuge = size_t(2) << 20;  // a transparent huge page: allocations of 2 MiB and up start on one

// For the fault handler, which may not lock: the devices' mappings.
std::atomic<int> g_mapped{0};
char* g_base[kMaxDevices];
size_t g_size[kMaxDevices];
struct sigaction g_old_segv;

size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

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

namespace device_detail {

thread_local int t_device = 0;
thread_local cudaError_t t_last = cudaSuccess;

void join(Clock& a, const Clock& b) {
  if (a.size() < b.size()) a.resize(b.size(), 0);
  for (size_t i = 0; i < b.size(); ++i) a[i] = std::max(a[i], b[i]);
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

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

}  // namespace device_detail

// ---------------------------------------------------------------- host access: the fault handler

namespace {

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

}  // namespace

// ---------------------------------------------------------------- device memory

namespace device_detail {

int device_of(const State& s, const void* p) {
  const char* c = static_cast<const char*>(p);
  for (size_t d = 0; d < s.devices.size(); ++d)
    if (c >= s.devices[d].base && c < s.devices[d].base + s.devices[d].capacity) return int(d);
  return -1;
}

}  // namespace device_detail

namespace {

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

}  // namespace

// ---------------------------------------------------------------- streams and the sanitizer

namespace device_detail {

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

}  // namespace device_detail

namespace {

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

// Drops the block regions inside [p, p + n) (a segment going back to the device).
void drop_blocks(State& s, char* p, size_t n) {
  auto it = s.blocks.lower_bound(p);
  while (it != s.blocks.end() && it->first < p + n) it = s.blocks.erase(it);
}

}  // namespace

namespace device_detail {

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

}  // namespace device_detail

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
