// Synchronous data parallelism: structure check, state broadcast, gradient buckets all-reduced
// on the communication thread during backward, join for ranks out of batches.
//   ctest --test-dir build -L mpi -R sync
#include "dist/sync.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "dist/timeline.h"
#include "dist/wire.h"
#include "engine/autograd.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/optim.h"

namespace kiln::dist {
namespace {

std::string describe(const std::string& kind, const std::string& name, const Tensor& t) {
  std::ostringstream os;
  os << kind << " '" << name << "' " << dtype_name(t.dtype()) << shape_str(t.sizes());
  return os.str();
}

// One line per tensor: what the ranks compare.
std::vector<std::string> structure_lines(const NamedTensors& params, const NamedTensors& buffers) {
  std::vector<std::string> lines;
  for (const auto& [n, t] : params) lines.push_back(describe("parameter", n, t));
  for (const auto& [n, t] : buffers) lines.push_back(describe("buffer", n, t));
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

struct DataParallel::Slot {
  std::string name;
  std::string pack_span;  // "pack <name>": timeline names made once
  Tensor param;
  size_t bucket = 0;
  int64_t offset = 0;  // elements into the bucket's buffer
  bool ready = false;
};

struct DataParallel::Bucket {
  std::vector<size_t> slots;
  Tensor flat;            // the packed gradients (float16 with compression)
  size_t pending = 0;     // gradients not yet packed this step
  bool launched = false;
  CommThread::Handle handle;
  std::string name, allreduce_span, wait_span, unpack_span;  // "bucket 3", ...: made once
};

DataParallel::DataParallel(Module& model, Communicator& comm, CommThread& thread, SyncOptions options)
    : comm_(comm), thread_(thread), options_(options), alive_(std::make_shared<bool>(true)) {
  KILN_CHECK(options_.bucket_mb > 0, "DataParallel: bucket size must be positive, got ", options_.bucket_mb, " MB");
  params_ = model.named_parameters();
  buffers_ = model.named_buffers();
  check_structure();
  broadcast_state();
  build_buckets();
}

DataParallel::~DataParallel() { *alive_ = false; }

void DataParallel::check_structure() {
  const std::vector<std::string> mine = structure_lines(params_, buffers_);
  const std::string text = join_lines(mine);
  const int n = comm_.size(), me = comm_.rank();
  // Cheap first: every rank's hash and count.
  Tensor local = zeros({2}, DType::int64);
  local.data<int64_t>()[0] = int64_t(fnv1a(text));
  local.data<int64_t>()[1] = int64_t(mine.size());
  Tensor all = zeros({2 * int64_t(n)}, DType::int64);
  thread_.run("structure check", [&] { comm_.allgather(local, all, "model structure"); });
  bool same = true;
  for (int r = 1; r < n; ++r)
    same = same && all.data<int64_t>()[2 * r] == all.data<int64_t>()[0] &&
           all.data<int64_t>()[2 * r + 1] == all.data<int64_t>()[1];
  if (same) return;

  // Someone differs: rank 0's description goes to everyone, each rank finds its first difference,
  // and every rank gathers all of them, so the error reads the same everywhere.
  Tensor len = zeros({1}, DType::int64);
  len.data<int64_t>()[0] = int64_t(text.size());
  thread_.run("structure check", [&] { comm_.broadcast(len, 0, "model structure length"); });
  Tensor root = me == 0 ? bytes_tensor(text, size_t(text.size())) : zeros({len.data<int64_t>()[0]}, DType::uint8);
  thread_.run("structure check", [&] { comm_.broadcast(root, 0, "model structure"); });
  std::vector<std::string> theirs;
  {
    std::istringstream is(std::string(static_cast<const char*>(root.data_ptr()), size_t(root.numel())));
    for (std::string line; std::getline(is, line);) theirs.push_back(line);
  }
  std::string detail;
  for (size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
    const std::string a = i < theirs.size() ? theirs[i] : "nothing";
    const std::string b = i < mine.size() ? mine[i] : "nothing";
    if (a != b) {
      detail = "rank " + std::to_string(me) + " has " + b + " where rank 0 has " + a + " (tensor " +
               std::to_string(i) + ")";
      break;
    }
  }
  constexpr int64_t kDetail = 240;
  Tensor details = zeros({kDetail * n}, DType::uint8);
  Tensor d = bytes_tensor(detail.substr(0, kDetail - 1), kDetail);  // NUL-terminated
  thread_.run("structure check", [&] { comm_.allgather(d, details, "model structure differences"); });
  std::string msg = "the model differs across ranks (every rank must build the same model):";
  for (int r = 0; r < n; ++r) {
    std::string s = tensor_string(details, r * kDetail, kDetail);
    if (!s.empty()) msg += "\n  " + s;
  }
  KILN_THROW(msg);
}

void DataParallel::broadcast_state() {
  NoGradGuard no_grad;
  auto send = [&](const NamedTensors& list, const char* kind) {
    for (const auto& item : list) {
      // Not a structured binding: C++17 lets no lambda capture one (clang refuses; gcc accepts).
      const std::string& name = item.first;
      const Tensor& t = item.second;
      Tensor c = t.contiguous();
      thread_.run("broadcast " + name, [&] { comm_.broadcast(c, 0, std::string(kind) + " " + name); });
      if (!c.is_same(t)) t.detach().copy_(c);
      t.bump_version();  // written by the communicator (caches of its values, folded batch norm)
    }
  };
  send(params_, "parameter");
  if (options_.broadcast_buffers) send(buffers_, "buffer");
}

void DataParallel::build_buckets() {
  for (const auto& [name, t] : params_)
    if (t.requires_grad()) slots_.push_back({name, "pack " + name, t});
  const double cap = options_.bucket_mb * 1024 * 1024;
  // Reverse registration order: backward finishes the last layers first.
  double bytes = 0;
  for (size_t k = slots_.size(); k-- > 0;) {
    Slot& s = slots_[k];
    const DType wire = options_.fp16_compression && s.param.is_floating_point() ? DType::float16 : s.param.dtype();
    bool fresh = buckets_.empty() || bytes >= cap;
    if (!fresh) {
      const Slot& first = slots_[buckets_.back().slots.front()];
      DType first_wire = options_.fp16_compression && first.param.is_floating_point() ? DType::float16 : first.param.dtype();
      fresh = first_wire != wire || first.param.device() != s.param.device();
    }
    if (fresh) {
      buckets_.emplace_back();
      bytes = 0;
    }
    s.bucket = buckets_.size() - 1;
    buckets_.back().slots.push_back(k);
    bytes += double(s.param.numel()) * double(element_size(wire));
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    b.name = "bucket " + std::to_string(i);
    b.allreduce_span = "allreduce " + b.name;
    b.wait_span = "wait " + b.name;
    b.unpack_span = "unpack " + b.name;
    const Slot& first = slots_[b.slots.front()];
    const DType wire = options_.fp16_compression && first.param.is_floating_point() ? DType::float16 : first.param.dtype();
    int64_t n = 0;
    for (size_t k : b.slots) {
      slots_[k].offset = n;
      n += slots_[k].param.numel();
    }
    b.flat = zeros({n}, TensorOptions(wire).with_device(first.param.device()));
  }
  std::weak_ptr<bool> alive = alive_;
  for (size_t k = 0; k < slots_.size(); ++k) {
    slots_[k].param.register_post_accumulate_grad_hook([this, alive, k](Tensor&) {
      auto a = alive.lock();
      if (a && *a) on_grad_ready(k);
    });
  }
}

std::vector<std::vector<std::string>> DataParallel::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (const Bucket& b : buckets_) {
    out.emplace_back();
    for (size_t k : b.slots) out.back().push_back(slots_[k].name);
  }
  return out;
}

int DataParallel::begin_step(bool have_batch, bool stop_requested, bool* stop_any) {
  Tensor flags = zeros({2}, DType::int32);
  flags.data<int32_t>()[0] = have_batch ? 1 : 0;
  flags.data<int32_t>()[1] = stop_requested ? 1 : 0;
  thread_.run("join", [&] { comm_.allreduce(flags, ReduceOp::sum, "ranks with a batch"); });
  active_ = flags.data<int32_t>()[0];
  if (stop_any) *stop_any = flags.data<int32_t>()[1] > 0;
  for (Bucket& b : buckets_) {
    b.pending = b.slots.size();
    b.launched = false;
  }
  for (Slot& s : slots_) s.ready = false;
  ++step_;
  return active_;
}

void DataParallel::pack(size_t k) {
  Slot& s = slots_[k];
  Bucket& b = buckets_[s.bucket];
  timeline::Span span("copy", s.pack_span);
  NoGradGuard no_grad;
  Tensor g = s.param.grad();
  Tensor dst = b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.sizes());
  if (g.defined()) dst.copy_(g);
  else dst.zero_();  // unused in this rank's forward
  s.ready = true;
  --b.pending;
}

void DataParallel::on_grad_ready(size_t k) {
  Slot& s = slots_[k];
  if (s.ready || buckets_[s.bucket].launched) return;  // packed already this step
  pack(k);
  if (buckets_[s.bucket].pending == 0 && options_.overlap) launch(s.bucket);
}

void DataParallel::launch(size_t index) {
  Bucket& b = buckets_[index];
  if (b.launched) return;
  for (size_t k : b.slots)
    if (!slots_[k].ready) pack(k);  // gradients that never arrived this step
  b.launched = true;
  // On a GPU the packing copies ran on the compute stream: finish them before another thread's
  // collective reads the buffer.
  if (b.flat.device().is_cuda()) cuda::synchronize();
  Tensor flat = b.flat;
  const std::string* name = &b.name;  // buckets_ does not change after build_buckets()
  b.handle = thread_.submit(b.allreduce_span, [this, flat, name] { comm_.allreduce(flat, ReduceOp::sum, *name); });
}

void DataParallel::finish_gradients() {
  KILN_CHECK(step_ > 0, "DataParallel::finish_gradients: call begin_step() first");
  for (size_t i = 0; i < buckets_.size(); ++i) launch(i);
  const auto t0 = std::chrono::steady_clock::now();
  NoGradGuard no_grad;
  const double scale = active_ > 0 ? 1.0 / double(active_) : 0.0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    {
      timeline::Span span("wait", b.wait_span);
      b.handle.wait();
    }
    timeline::Span span("copy", b.unpack_span);
    // Uncompressed buckets hold the parameters' dtype: one scaling pass over the bucket; float16
    // buckets are scaled per gradient, after widening.
    const bool compressed = b.flat.dtype() != slots_[b.slots.front()].param.dtype();
    if (!compressed) ops::scale_(b.flat, scale);
    for (size_t k : b.slots) {
      Slot& s = slots_[k];
      Tensor src = b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.sizes());
      Tensor g = s.param.grad();
      if (!g.defined() || g.dtype() != s.param.dtype()) {
        g = zeros(s.param.sizes(), TensorOptions(s.param.dtype()).with_device(s.param.device()));
        s.param.set_grad(g);
      }
      g.copy_(src);
      if (!compressed) continue;
      if (g.is_contiguous()) ops::scale_(g, scale);
      else g.copy_(ops::mul(g, scale));  // channels-last gradients
    }
  }
  last_wait_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kiln::dist
