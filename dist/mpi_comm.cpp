// MpiComm: the communicator over MPI. It owns three duplicates of its parent communicator: `data`
// for the library collectives and the user's send/recv, `control` for the signatures and kiln's
// ring allreduce (own tags, so they never match a user's message), `probe` for liveness pings. Errors return
// (MPI_ERRORS_RETURN) and become kiln::Error "mpi allreduce 'bucket 3' (rank 1 of 4): <reason>".
//
// Every operation is nonblocking (MPI_Iallreduce, MPI_Isend ...) and completed by progress(), the
// one place that waits: MPI_Testsome in a loop that spins briefly, then sleeps up to 1 ms, warns
// once on stderr past warn_after_s naming the ranks not heard from, and throws past timeout_s.
// With options().check, each collective is preceded by a signature exchange (every rank sends
// its {seq, collective, dtype, count, root, op, name} to every other rank, O(size^2) small
// messages): the pending receives say exactly which ranks have not arrived, and a difference is
// a kiln::Error on every rank, after which the communicator is still usable. After a timeout it
// is not (its state with the silent rank is unknown): later calls throw; make a new one.
// Before it throws, a timed-out rank pings the ranks it waits for (all others when it is inside a
// library collective, where no signature says who stalled): every waiting rank answers pings
// from its wait loop, so the ranks that stay silent are the stopped or dead ones, and the error
// names them.
//
// CUDA tensors go through pinned host copies unless MPIX_Query_cuda_support() says the library
// reads device memory. Integer average is a truncating division of the sum.
//   ctest --test-dir build -L mpi
#include "dist/mpi_comm.h"

#if defined(KILN_HAVE_MPI)

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <mutex>
#include <thread>
#include <vector>

#include "dist/host_reduce.h"
#include "dist/signature.h"
#include "engine/cuda_copy.h"

namespace kiln::dist {
namespace {

using Clock = std::chrono::steady_clock;

bool g_serialized = false;
std::mutex g_mpi_mutex;

// Held around each MPI call when the library runs at MPI_THREAD_SERIALIZED.
struct MpiLock {
  std::unique_lock<std::mutex> lock;
  MpiLock() {
    if (g_serialized) lock = std::unique_lock<std::mutex>(g_mpi_mutex);
  }
};

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, size_t(len));
}

constexpr int kSignatureTag = 7001;
constexpr int kCollective = -1;     // Requests::peers of a collective (no single peer)
constexpr int kUnnamedSend = -2;    // of a send that names nobody when pending
constexpr int kAnyPeer = -3;        // of a receive from any rank (expect_from() names the likely ones)
constexpr int kRingTag = 7002;
constexpr int kPingTag = 7003;  // liveness probes on their own communicator (probe_)
constexpr int kPongTag = 7004;
constexpr size_t kRingSegmentBytes = size_t(1) << 20;

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    case DType::int32: return MPI_INT32_T;
    case DType::int64: return MPI_INT64_T;
    case DType::float16: case DType::bfloat16: return MPI_UINT16_T;
    case DType::uint8: case DType::boolean: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

// kiln's MPI_Ops for float16 and bfloat16 (sum, max, min): created on first use, freed by
// finalize() through release_mpi_ops().
MPI_Op g_half_ops[2][3] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}, {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};

template <int kDt, int kOp>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  static constexpr ReduceOp ops[3] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};
  reduce_into(inout, in, *len, kDt == 0 ? DType::float16 : DType::bfloat16, ops[kOp]);
}

MPI_Op mpi_op(DType t, ReduceOp op) {
  int o = (op == ReduceOp::max) ? 1 : (op == ReduceOp::min) ? 2 : 0;
  if (t != DType::float16 && t != DType::bfloat16) return o == 1 ? MPI_MAX : o == 2 ? MPI_MIN : MPI_SUM;
  int d = t == DType::float16 ? 0 : 1;
  MPI_Op& slot = g_half_ops[d][o];
  if (slot == MPI_OP_NULL) {
    static MPI_User_function* const fns[2][3] = {{half_op<0, 0>, half_op<0, 1>, half_op<0, 2>},
                                                  {half_op<1, 0>, half_op<1, 1>, half_op<1, 2>}};
    MpiLock lock;
    MPI_Op_create(fns[d][o], /*commute=*/1, &slot);
  }
  return slot;
}

// Who a rank is, exchanged when a communicator is made: so that a rank that stops answering can be
// looked up in /proc when it runs on the same host (stopped, or dead), which no MPI call says.
struct Identity {
  int64_t pid = 0;
  int64_t start_ticks = 0;  // /proc/<pid>/stat field 22: a reused pid has another
  char host[64] = {};
};

// The state letter and start time of /proc/<pid>/stat ('?' when there is no such process).
std::pair<char, int64_t> proc_state(int64_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!f || !std::getline(f, text)) return {'?', 0};
  const size_t close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return {'?', 0};
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  char state = '?';
  int64_t start = 0;
  for (int i = 3; rest >> field; ++i) {  // field 3 is the state, 22 the start time
    if (i == 3) state = field.empty() ? '?' : field[0];
    if (i == 22) {
      start = std::atoll(field.c_str());
      break;
    }
  }
  return {state, start};
}

// When this process last ran again after not running for over 2 s (SIGSTOP then SIGCONT, a
// frozen host), and for how long (steady-clock ns; 0: never): a rank stopped while the others gave
// up on it must not blame them for its own stop. A thread ticks every 100 ms and a gap between two
// ticks is time the whole process did not run. SIGCONT itself says nothing: Open MPI sends it to
// every rank when it ends a job.
std::atomic<int64_t> g_resumed_ns{0}, g_stopped_for_ns{0};
void watch_stops() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::thread([] {
      Clock::time_point last = Clock::now();
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const Clock::time_point now = Clock::now();
        if (now - last > std::chrono::seconds(2)) {
          g_stopped_for_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count());
          g_resumed_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
        }
        last = now;
      }
    }).detach();
  });
}

Identity my_identity() {
  Identity id;
  id.pid = int64_t(::getpid());
  id.start_ticks = proc_state(id.pid).second;
  ::gethostname(id.host, sizeof(id.host) - 1);
  return id;
}

// Why a request exists: its peer rank (-1: a collective, no single peer) and whether timing out
// may cancel it.
struct Requests {
  std::vector<MPI_Request> reqs;
  std::vector<int> peers;
  std::vector<char> is_recv;
  void add(MPI_Request r, int peer, bool recv) {
    reqs.push_back(r);
    peers.push_back(peer);
    is_recv.push_back(recv);
  }
};

// An operation in flight, for messages.
struct OpContext {
  const char* what;
  std::string name;
  int64_t seq;
  Clock::time_point start = Clock::now();
  bool warned = false;
  double suspended_s = 0;  // time within the wait this process did not run (SIGSTOP, a frozen host)
};

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm parent, CommOptions o) : Communicator(std::move(o)) {
    MpiLock lock;
    MPI_Comm_dup(parent, &data_);
    MPI_Comm_dup(parent, &control_);
    MPI_Comm_dup(parent, &probe_);
    MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(probe_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(data_, &rank_);
    MPI_Comm_size(data_, &size_);
    ids_.resize(size_t(size_));
    watch_stops();
    Identity me = my_identity();
    MPI_Allgather(&me, sizeof(Identity), MPI_BYTE, ids_.data(), sizeof(Identity), MPI_BYTE, probe_);
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    cuda_aware_ = MPIX_Query_cuda_support() == 1;
#endif
  }
  ~MpiComm() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    MpiLock lock;
    MPI_Comm_free(&data_);
    MPI_Comm_free(&control_);
    MPI_Comm_free(&probe_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void allreduce(const Tensor& t, ReduceOp op, const std::string& name) override {
    check_tensor(t, "allreduce", name, true);
    OpContext ctx{"allreduce", name, seq_};
    announce(ctx, CollectiveKind::allreduce, t.dtype(), t.numel(), -1, op);
    Staged s(this, t, true);
    const int64_t n = t.numel();
    if (n == 0 || size_ == 1) return;
    if (options_.algorithm == "ring") {
      ring_allreduce(ctx, static_cast<char*>(s.ptr), n, t.dtype(), op);
    } else if (options_.algorithm == "hierarchical") {
      hierarchical_allreduce(s.host.defined() ? s.host : t, op == ReduceOp::average ? ReduceOp::sum : op, name);
    } else {
      check_count(ctx, n);
      Requests r;
      MPI_Request req;
      call(ctx, [&] { return MPI_Iallreduce(MPI_IN_PLACE, s.ptr, int(n), mpi_type(t.dtype()), mpi_op(t.dtype(), op), data_, &req); });
      r.add(req, -1, false);
      progress(ctx, r);
    }
    if (op == ReduceOp::average) divide(s.ptr, n, t.dtype(), size_);
    s.finish();
  }

  void broadcast(const Tensor& t, int root, const std::string& name) override {
    check_tensor(t, "broadcast", name, false);
    OpContext ctx{"broadcast", name, seq_};
    KILN_CHECK(root >= 0 && root < size_, where(ctx), ": root ", root, " is not a rank (size ", size_, ")");
    announce(ctx, CollectiveKind::broadcast, t.dtype(), t.numel(), root, ReduceOp::sum);
    Staged s(this, t, rank_ == root);
    if (t.numel() == 0 || size_ == 1) return;
    check_count(ctx, t.numel());
    Requests r;
    MPI_Request req;
    call(ctx, [&] { return MPI_Ibcast(s.ptr, int(t.numel()), mpi_type(t.dtype()), root, data_, &req); });
    r.add(req, -1, false);
    progress(ctx, r);
    s.finish();
  }

  void allgather(const Tensor& in, const Tensor& out, const std::string& name) override {
    check_tensor(in, "allgather", name, false);
    check_tensor(out, "allgather", name, false);
    OpContext ctx{"allgather", name, seq_};
    KILN_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size_, where(ctx), ": out ", out.str(),
               " must have size() * in.numel() = ", size_, " * ", in.numel(), " elements of ", in.dtype());
    announce(ctx, CollectiveKind::allgather, in.dtype(), in.numel(), -1, ReduceOp::sum);
    Staged si(this, in, true), so(this, out, false);
    if (in.numel() == 0) return;
    check_count(ctx, in.numel());
    Requests r;
    MPI_Request req;
    MPI_Datatype ty = mpi_type(in.dtype());
    call(ctx, [&] { return MPI_Iallgather(si.ptr, int(in.numel()), ty, so.ptr, int(in.numel()), ty, data_, &req); });
    r.add(req, -1, false);
    progress(ctx, r);
    so.finish();
  }

  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, const std::string& name) override {
    check_tensor(in, "reduce_scatter", name, true);
    check_tensor(out, "reduce_scatter", name, true);
    OpContext ctx{"reduce_scatter", name, seq_};
    KILN_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size_, where(ctx), ": in ", in.str(),
               " must have size() * out.numel() = ", size_, " * ", out.numel(), " elements of ", out.dtype());
    announce(ctx, CollectiveKind::reduce_scatter, out.dtype(), out.numel(), -1, op);
    Staged si(this, in, true), so(this, out, false);
    const int64_t n = out.numel();
    if (n == 0) return;
    check_count(ctx, n);
    Requests r;
    MPI_Request req;
    call(ctx, [&] {
      return MPI_Ireduce_scatter_block(si.ptr, so.ptr, int(n), mpi_type(out.dtype()), mpi_op(out.dtype(), op), data_, &req);
    });
    r.add(req, -1, false);
    progress(ctx, r);
    if (op == ReduceOp::average) divide(so.ptr, n, out.dtype(), size_);
    so.finish();
  }

  void barrier(const std::string& name) override {
    OpContext ctx{"barrier", name, seq_};
    announce(ctx, CollectiveKind::barrier, DType::uint8, 0, -1, ReduceOp::sum);
    if (size_ == 1) return;
    Requests r;
    MPI_Request req;
    call(ctx, [&] { return MPI_Ibarrier(data_, &req); });
    r.add(req, -1, false);
    progress(ctx, r);
  }

  void send(const Tensor& t, int dst, int tag) override {
    OpContext ctx{"send", "tag " + std::to_string(tag) + " to rank " + std::to_string(dst), -1};
    check_p2p(ctx, t, dst, tag, false);
    Staged s(this, t, true);
    size_t bytes = size_t(t.numel()) * t.element_size();
    Requests r;
    MPI_Request req;
    call(ctx, [&] { return MPI_Isend(s.ptr, int(bytes), MPI_BYTE, dst, tag, data_, &req); });
    r.add(req, dst, false);
    progress(ctx, r);
  }

  int recv(const Tensor& t, int src, int tag) override {
    OpContext ctx{"recv", "tag " + std::to_string(tag) + " from " +
                              (src == kAnySource ? std::string("any rank") : "rank " + std::to_string(src)), -1};
    check_p2p(ctx, t, src, tag, true);
    // A receive from any rank may never wait long (an asynchronous parameter server always has
    // some worker's push to take), so the wait's own check for dead peers would not run: once a
    // second, the ranks expect_from() named are looked at here too.
    if (src == kAnySource && !expected_.empty() && Clock::now() - last_liveness_ > std::chrono::seconds(1)) {
      last_liveness_ = Clock::now();
      const std::string dead = dead_peers(expected_);
      KILN_CHECK(dead.empty(), "rank ", rank_, ": ", ctx.what, " '", ctx.name, "': ", dead);
    }
    Staged s(this, t, false);
    size_t bytes = size_t(t.numel()) * t.element_size();
    Requests r;
    MPI_Request req;
    call(ctx, [&] {
      return MPI_Irecv(s.ptr, int(bytes), MPI_BYTE, src == kAnySource ? MPI_ANY_SOURCE : src, tag, data_, &req);
    });
    r.add(req, src == kAnySource ? kAnyPeer : src, true);
    MPI_Status st;
    progress(ctx, r, {}, &st);
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    KILN_CHECK(size_t(got) == bytes, where(ctx), ": the message from rank ", st.MPI_SOURCE, " has ", got,
               " bytes; the tensor ", t.str(), " has ", bytes);
    s.finish();
    return st.MPI_SOURCE;
  }

  void expect_from(const std::vector<int>& ranks) override { expected_ = ranks; }

  std::unique_ptr<Communicator> split(int color, int key) override {
    OpContext ctx{"split", "", seq_};  // colors differ across ranks by design
    announce(ctx, CollectiveKind::split, DType::uint8, 0, -1, ReduceOp::sum);
    MPI_Comm nc = MPI_COMM_NULL;
    call(ctx, [&] { return MPI_Comm_split(data_, color < 0 ? MPI_UNDEFINED : color, key, &nc); });
    if (nc == MPI_COMM_NULL) return nullptr;
    auto c = std::make_unique<MpiComm>(nc, options_);
    MpiLock lock;
    MPI_Comm_free(&nc);
    return c;
  }

 private:
  // A CUDA tensor's bytes in pinned host memory for the library (unless it is CUDA-aware);
  // finish() copies results back. CPU tensors are used in place.
  struct Staged {
    void* ptr;
    Tensor host;
    const Tensor& t;
    Staged(MpiComm* c, const Tensor& tensor, bool copy_in) : ptr(tensor.data_ptr()), t(tensor) {
      if (tensor.device().is_cpu() || c->cuda_aware_ || tensor.numel() == 0) return;
      host = cuda::pin_memory(empty({tensor.numel()}, TensorOptions(tensor.dtype())));
      ptr = host.data_ptr();
      if (copy_in) cuda::copy_bytes(ptr, Device(), tensor.data_ptr(), tensor.device(), bytes());
    }
    size_t bytes() const { return size_t(t.numel()) * t.element_size(); }
    void finish() {
      if (host.defined()) cuda::copy_bytes(t.data_ptr(), t.device(), ptr, Device(), bytes());
    }
  };

  std::string where(const OpContext& c) const {
    std::string s = std::string("mpi ") + c.what;
    if (!c.name.empty()) s += " '" + c.name + "'";
    return s + " (rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  }

  template <class F>
  void call(const OpContext& c, F&& f) {
    int rc;
    {
      MpiLock lock;
      rc = f();
    }
    if (rc != MPI_SUCCESS) KILN_THROW(where(c), ": ", mpi_error_string(rc));
  }

  void check_tensor(const Tensor& t, const char* what, const std::string& name, bool reduce) {
    KILN_CHECK(!broken_, "mpi ", what, " '", name, "' (rank ", rank_, "): ", broken_why_);
    KILN_CHECK(t.is_contiguous(), "mpi ", what, " '", name, "': the tensor must be contiguous (", t.str(), ")");
    KILN_CHECK(!reduce || reducible(t.dtype()), "mpi ", what, " '", name, "': cannot reduce ", t.dtype(),
               " tensors (float32, float64, float16, bfloat16, int32, int64)");
  }
  void check_count(const OpContext& c, int64_t n) {
    KILN_CHECK(n <= INT_MAX, where(c), ": ", n, " elements exceed MPI's int count; split the tensor");
  }
  void check_p2p(const OpContext& c, const Tensor& t, int peer, int tag, bool recv) {
    KILN_CHECK(!broken_, where(c), ": ", broken_why_);
    KILN_CHECK(t.is_contiguous(), where(c), ": the tensor must be contiguous (", t.str(), ")");
    KILN_CHECK((peer >= 0 && peer < size_) || (recv && peer == kAnySource), where(c), ": rank ", peer,
               " is not a rank (size ", size_, ")");
    KILN_CHECK(tag >= 0, where(c), ": tags are >= 0 (got ", tag, ")");
    KILN_CHECK(size_t(t.numel()) * t.element_size() <= size_t(INT_MAX), where(c), ": ", t.str(),
               " exceeds MPI's int byte count");
  }

  // The one place that waits. Runs until every request is done, calling on_done(i) as request i
  // completes; warns past warn_after_s and throws past timeout_s naming the peers of the
  // requests still pending (recvs: ranks not heard from).
  void progress(OpContext& c, Requests& r, const std::function<void(int)>& on_done = {},
                MPI_Status* status_of_first = nullptr) {
    const int n = int(r.reqs.size());
    std::vector<int> idx(n);
    std::vector<MPI_Status> st(n);
    int remaining = n;
    int idle = 0, sleeps = 0;
    Clock::time_point since_progress = Clock::now(), last_look = Clock::now(), last_dead_check = Clock::now();
    const double yield_limit =
        std::find(r.peers.begin(), r.peers.end(), kCollective) != r.peers.end() ? 5.0 : 0.2;
    while (remaining > 0) {
      int out = 0, rc;
      {
        MpiLock lock;
        rc = MPI_Testsome(n, r.reqs.data(), &out, idx.data(), st.data());
      }
      if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) KILN_THROW(where(c), ": ", mpi_error_string(rc));
      if (out == MPI_UNDEFINED) break;
      for (int k = 0; k < out; ++k) {
        if (rc == MPI_ERR_IN_STATUS && st[k].MPI_ERROR != MPI_SUCCESS)
          KILN_THROW(where(c), ": ", mpi_error_string(st[k].MPI_ERROR));
        if (idx[k] == 0 && status_of_first) *status_of_first = st[k];
        if (on_done) on_done(idx[k]);
      }
      remaining -= out;
      if (out > 0) {
        idle = 0;
        sleeps = 0;
        since_progress = Clock::now();
        continue;
      }
      // Nonblocking collectives progress only inside MPI_Test* calls (Open MPI's libnbc moves one
      // round per call), so test often while the operation is young: spin for 2 ms, then yield
      // between tests up to 200 ms, then sleep with a period growing to 1 ms (a long wait is a
      // straggler; it should not burn a core). A library collective shows no progress until it
      // completes and runs after every rank announced it, so it yields for up to 5 s. Measured:
      // sleeping early made a 64 MiB MPI_Iallreduce on 2 ranks 12x slower.
      ++idle;
      double young = std::chrono::duration<double>(Clock::now() - since_progress).count();
      if (young < 2e-3) {
        if ((idle & 63) != 0) continue;
      } else if (young < yield_limit) {
        std::this_thread::yield();
        if ((idle & 63) != 0) continue;
      } else {
        ++sleeps;
        std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 20 * sleeps)));
      }
      // A gap of over a second between two looks means this process did not run (SIGSTOP, a
      // frozen VM): the wait did not last that long as far as this rank can tell, and the peers
      // it would blame were not the ones who stalled.
      const Clock::time_point now = Clock::now();
      if (now - last_look > std::chrono::seconds(1)) {
        c.start += now - last_look;
        c.suspended_s += std::chrono::duration<double>(now - last_look).count();
      }
      last_look = now;
      waiting_on_ = first_pending_peer(r);
      wait_stopped_ms_ = int32_t(std::min(c.suspended_s * 1e3, 2e9));
      answer_pings();
      double waited = std::chrono::duration<double>(now - c.start).count();
      // Dead peers (same host: /proc) are looked for every 0.1 s: a launcher that ends the job on a
      // death (Open MPI 5's within about 0.5 s) must not beat kiln's own line naming the rank.
      if (waited > 0.1 && now - last_dead_check > std::chrono::milliseconds(100)) {
        last_dead_check = now;
        const std::string dead = dead_peers(pending_peers(r));
        if (!dead.empty()) {
          abandon(r);
          broken_ = true;
          broken_why_ = std::string("the communicator is unusable after ") + c.what + " '" + c.name + "'" +
                        seq_str(c) + " lost a rank";
          KILN_THROW("rank ", rank_, ": ", c.what, " '", c.name, "'", seq_str(c), ": ", dead, self_suspended(c));
        }
      }
      if (waited > options_.warn_after_s && !c.warned) {
        c.warned = true;
        std::string who = pending(r);
        std::fprintf(stderr, "kiln: rank %d has waited %.0f s for %s '%s'%s: %s %s not arrived\n", rank_, waited,
                     c.what, c.name.c_str(), seq_str(c).c_str(), who.c_str(),
                     who.compare(0, 6, "ranks ") == 0 ? "have" : "has");
        std::fflush(stderr);
      }
      if (waited > options_.timeout_s) {
        std::string who = pending(r);
        // Inside a library collective every rank announced itself, so the signatures cannot say
        // who stalled; and a rank waiting on a stalled rank looks silent to the others too. Ask:
        // a rank that waits answers pings; a stopped or dead one does not.
        const std::string silent = blame(pending_peers(r));
        if (!silent.empty()) who = silent;
        const char* why = silent.empty() ? " (dead, stopped, or issuing a different collective)" : "";
        abandon(r);
        broken_ = true;
        broken_why_ = std::string("the communicator is unusable after ") + c.what + " '" + c.name + "'" +
                      seq_str(c) + " timed out";
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%.0f", options_.timeout_s);
        KILN_THROW("rank ", rank_, ": ", c.what, " '", c.name, "'", seq_str(c), " timed out after ", secs,
                   " s waiting for ", who, why, self_suspended(c));
      }
    }
  }

  // What a rank that was itself stopped during the wait adds to its error, so that, woken while
  // the job ends, it does not blame the ranks that gave up on it.
  std::string self_suspended(const OpContext& c) const {
    const int64_t resumed = g_resumed_ns.load();
    const int64_t start = std::chrono::duration_cast<std::chrono::nanoseconds>(c.start.time_since_epoch()).count();
    const bool resumed_lately = resumed > 0 && double(start - resumed) < options_.timeout_s * 1e9;
    if (c.suspended_s <= 0 && !resumed_lately) return "";
    char b[200];
    if (resumed_lately)
      std::snprintf(b, sizeof b, " (this rank itself did not run for %.1f s, until %.1f s ago: stopped or frozen; the "
                    "others may have ended the job because of it)",
                    double(g_stopped_for_ns.load()) * 1e-9,
                    double(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count() -
                           resumed) * 1e-9);
    else
      std::snprintf(b, sizeof b, " (this rank itself did not run for %.1f s of the wait: stopped or frozen; the others "
                    "may have ended the job because of it)", c.suspended_s);
    return b;
  }

  static std::string seq_str(const OpContext& c) { return c.seq >= 0 ? " #" + std::to_string(c.seq) : ""; }

  // The ranks a wait still needs: the peers of its pending requests, and for a receive from any
  // rank the ones expect_from() named.
  std::vector<int> pending_peers(const Requests& r) const {
    std::vector<int> ranks;
    for (size_t i = 0; i < r.reqs.size(); ++i) {
      if (r.reqs[i] == MPI_REQUEST_NULL) continue;
      if (r.peers[i] >= 0) ranks.push_back(r.peers[i]);
      if (r.peers[i] == kAnyPeer) ranks.insert(ranks.end(), expected_.begin(), expected_.end());
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    return ranks;
  }

  // Answers the liveness pings other ranks sent (called while this rank waits).
  void answer_pings() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      {
        MpiLock lock;
        if (MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, probe_, &flag, &st) != MPI_SUCCESS || !flag) return;
        int32_t token = 0;
        MPI_Recv(&token, 1, MPI_INT32_T, st.MPI_SOURCE, kPingTag, probe_, MPI_STATUS_IGNORE);
        // The answer is whom this rank waits for (-1: a collective, or nobody in particular), so a
        // pinger can follow the chain of waits to the rank that stalled, and for how many ms this
        // rank itself lately did not run: a stopped rank that the launcher continues as it ends
        // the job answers, and must still be the one named. Static: the buffer must outlive the
        // freed request.
        static thread_local int32_t answer[64][2];
        static thread_local unsigned next = 0;
        int32_t* a = answer[next++ % 64];
        a[0] = waiting_on_.load();
        a[1] = stopped_lately_ms();
        MPI_Request req;  // tiny: eager, completes without the pinger's help
        MPI_Isend(a, 2, MPI_INT32_T, st.MPI_SOURCE, kPongTag, probe_, &req);
        MPI_Request_free(&req);
      }
    }
  }

  // How long this rank did not run (ms, 0: it ran), if that ended within the last --comm-timeout
  // or during the current wait: what a ping's answer reports.
  int32_t stopped_lately_ms() const {
    const int64_t resumed = g_resumed_ns.load();
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    int32_t ms = wait_stopped_ms_.load();
    if (resumed > 0 && double(now - resumed) < options_.timeout_s * 1e9)
      ms = std::max(ms, int32_t(std::min(double(g_stopped_for_ns.load()) * 1e-6, 2e9)));
    return ms;
  }

  // The first peer a wait still needs (-1: a collective or none), for the answer to a ping.
  int32_t first_pending_peer(const Requests& r) const {
    const std::vector<int> ranks = pending_peers(r);
    return ranks.empty() ? -1 : ranks.front();
  }

  // "pid 4711 on node3: stopped (state T)", "pid 4711 on node3: gone", or "" when the rank runs
  // on another host (nothing to look at) or is running.
  std::string local_state(int r, bool* dead = nullptr) const {
    const Identity& id = ids_[size_t(r)];
    if (std::strncmp(id.host, ids_[size_t(rank_)].host, sizeof(id.host)) != 0 || id.pid <= 0) return "";
    const auto [state, start] = proc_state(id.pid);
    const std::string who = "pid " + std::to_string(id.pid) + " on " + id.host;
    const bool gone = state == '?' || state == 'Z' || state == 'X' || (id.start_ticks && start != id.start_ticks);
    if (dead) *dead = gone;
    if (gone) return who + ": its process is gone (" + (state == 'Z' ? "a zombie" : "exited or killed") + ")";
    if (state == 'T' || state == 't') return who + ": stopped (state " + std::string(1, state) + ", SIGSTOP or a debugger)";
    return "";
  }

  // "rank 1 (pid 4711 on node3: its process is gone ...) has died" for the candidates (every
  // other rank when empty) this host can see are dead; "" when none is.
  std::string dead_peers(std::vector<int> candidates) const {
    if (candidates.empty())
      for (int p = 0; p < size_; ++p)
        if (p != rank_) candidates.push_back(p);
    std::string out;
    for (int p : candidates) {
      bool dead = false;
      const std::string st = local_state(p, &dead);
      if (dead) out += std::string(out.empty() ? "" : "; ") + "rank " + std::to_string(p) + " (" + st + ") has died";
    }
    return out;
  }

  // Pings `candidates` (every other rank when empty) for up to `window` seconds. Returns those
  // that stay silent; the others' answers (whom each waits for, and how long each lately did not
  // run) go to *waits and *stopped_ms.
  std::vector<int> ping(std::vector<int> candidates, double window, std::map<int, int>* waits,
                        std::map<int, int>* stopped_ms = nullptr) {
    if (candidates.empty())
      for (int p = 0; p < size_; ++p)
        if (p != rank_) candidates.push_back(p);
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    std::vector<int32_t> out(candidates.size(), rank_), in(2 * candidates.size(), -1);
    std::vector<MPI_Request> sends(candidates.size()), recvs(candidates.size());
    {
      MpiLock lock;
      for (size_t i = 0; i < candidates.size(); ++i) {
        MPI_Irecv(&in[2 * i], 2, MPI_INT32_T, candidates[i], kPongTag, probe_, &recvs[i]);
        MPI_Isend(&out[i], 1, MPI_INT32_T, candidates[i], kPingTag, probe_, &sends[i]);
      }
    }
    const auto t0 = Clock::now();
    std::vector<char> answered(candidates.size(), 0);
    size_t left = candidates.size();
    while (left > 0 && std::chrono::duration<double>(Clock::now() - t0).count() < window) {
      answer_pings();  // the others probe too
      {
        MpiLock lock;
        for (size_t i = 0; i < candidates.size(); ++i) {
          if (answered[i]) continue;
          int done = 0;
          MPI_Test(&recvs[i], &done, MPI_STATUS_IGNORE);
          if (done) answered[i] = 1, --left;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<int> silent;
    {
      MpiLock lock;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (!answered[i]) {
          silent.push_back(candidates[i]);
          MPI_Cancel(&recvs[i]);
          MPI_Request_free(&recvs[i]);
        } else {
          if (waits) (*waits)[candidates[i]] = in[2 * i];
          if (stopped_ms && in[2 * i + 1] > 0) (*stopped_ms)[candidates[i]] = in[2 * i + 1];
        }
        MPI_Request_free(&sends[i]);  // a ping to a dead rank may never complete
      }
    }
    return silent;
  }

  // Whom to blame for a timed-out wait on `candidates` (every other rank when empty): the ranks
  // that do not answer a ping, found by following the chain of waits from the ranks this one
  // waits for ("rank 2, which waits for rank 1 (no answer to a ping in 0.8 s: pid 4711 on node3:
  // stopped ...)"). A rank that answers but reports that it lately did not run for seconds (stopped,
  // then continued by the launcher as the job ends) is named the same way. "" when everyone answers
  // and nobody's wait leads to a silent or stopped rank.
  std::string blame(std::vector<int> candidates) {
    const double window = std::min(3.0, std::max(0.5, options_.timeout_s / 10));
    std::vector<char> seen(size_t(size_), 0);
    seen[size_t(rank_)] = 1;
    std::string chain;
    for (int hop = 0; hop < size_; ++hop) {
      for (int p : candidates) seen[size_t(p)] = 1;
      std::map<int, int> waits, stopped_ms;
      const std::vector<int> silent = ping(candidates, window, &waits, &stopped_ms);
      if (!silent.empty()) {
        std::string why;
        for (int p : silent) {
          const std::string st = local_state(p);
          if (!st.empty()) why += "; rank " + std::to_string(p) + ", " + st;
        }
        char w[32];
        std::snprintf(w, sizeof w, "%.1f", window);
        return chain + ranks_text(silent) + " (no answer to a ping in " + w + " s" +
               (why.empty() ? std::string(": stopped, dead, or blocked outside kiln's communication") : why) + ")";
      }
      if (!stopped_ms.empty()) {
        std::vector<int> stopped;
        std::string why;
        for (const auto& [p, ms] : stopped_ms) {
          stopped.push_back(p);
          char w[160];
          std::snprintf(w, sizeof w, "%srank %d did not run for %.1f s before it answered a ping: stopped or frozen",
                        why.empty() ? "" : "; ", p, ms * 1e-3);
          why += w;
        }
        return chain + ranks_text(stopped) + " (" + why + ")";
      }
      // Everyone answered and ran: the stall is further down the chain of waits, if anywhere.
      std::vector<int> next;
      std::string via;
      for (const auto& [p, target] : waits) {
        if (target < 0 || target >= size_ || seen[size_t(target)]) continue;
        next.push_back(target);
        via += (via.empty() ? "" : " and ") + ("rank " + std::to_string(p) + ", which waits for ");
      }
      if (next.empty()) return "";
      chain += via;
      candidates = next;
    }
    return "";
  }

  std::string pending(const Requests& r) const {
    const std::vector<int> ranks = pending_peers(r);
    if (ranks.empty()) {
      for (size_t i = 0; i < r.reqs.size(); ++i)
        if (r.reqs[i] != MPI_REQUEST_NULL && r.peers[i] == kAnyPeer) return "any rank";
      return "rank(s) unknown (inside the MPI library's collective)";
    }
    return ranks_text(ranks);
  }

  // "rank 3" or "ranks 0, 1".
  static std::string ranks_text(const std::vector<int>& ranks) {
    std::string s = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s;
  }

  // After a timeout: cancel the receives (MPI allows it), let sends finish on their own; a
  // collective cannot be cancelled and is left behind (the communicator is marked broken).
  void abandon(Requests& r) {
    MpiLock lock;
    for (size_t i = 0; i < r.reqs.size(); ++i) {
      if (r.reqs[i] == MPI_REQUEST_NULL) continue;
      if (r.is_recv[i]) {
        MPI_Cancel(&r.reqs[i]);
        MPI_Request_free(&r.reqs[i]);
      } else if (r.peers[i] != kCollective) {
        MPI_Request_free(&r.reqs[i]);
      }
    }
  }

  // The signature exchange (see the top of the file).
  void announce(OpContext& c, CollectiveKind kind, DType dt, int64_t count, int root, ReduceOp op) {
    KILN_CHECK(!broken_, where(c), ": ", broken_why_);
    ++seq_;  // consumed only here: a call refused by a local check above does not shift the count
    if (!options_.check || size_ == 1) return;
    // mine at [size_], rank p's at [p]; kept alive past a timeout because sends may still read it.
    auto buf = std::make_unique<Signature[]>(size_t(size_) + 1);
    Signature& mine = buf[size_];
    mine = make_signature(c.seq, kind, dt, count, root, op, c.name);
    Requests r;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request q;
      call(c, [&] { return MPI_Irecv(&buf[p], sizeof(Signature), MPI_BYTE, p, kSignatureTag, control_, &q); });
      r.add(q, p, true);
    }
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request q;
      call(c, [&] { return MPI_Isend(&mine, sizeof(Signature), MPI_BYTE, p, kSignatureTag, control_, &q); });
      r.add(q, kUnnamedSend, false);  // a send's completion says nothing about whether the peer arrived
    }
    try {
      progress(c, r);
    } catch (...) {
      graveyard_.push_back(std::move(buf));
      throw;
    }
    buf[rank_] = mine;
    std::string diff = signature_mismatch(buf.get(), size_);
    KILN_CHECK(diff.empty(), diff);
  }

  void ring_allreduce(OpContext& c, char* buf, int64_t n, DType dt, ReduceOp op);

  // Hierarchical (dist/comm.h NodeGroups): the node and leader communicators are made at the
  // first call, which every rank makes (a collective).
  void hierarchical_allreduce(const Tensor& t, ReduceOp op, const std::string& name) {
    if (!groups_.node) groups_ = split_by_node(*this);
    dist::hierarchical_allreduce(groups_, t, op, name);
  }

  MPI_Comm data_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL;
  MPI_Comm probe_ = MPI_COMM_NULL;  // liveness pings, answered by any rank that waits
  int rank_ = 0, size_ = 1;
  int64_t seq_ = 0;
  bool cuda_aware_ = false;
  bool broken_ = false;
  std::string broken_why_;
  std::vector<std::unique_ptr<Signature[]>> graveyard_;
  std::vector<Identity> ids_;     // every rank's pid and host, for blame
  std::vector<int> expected_;     // expect_from()
  Clock::time_point last_liveness_{};  // recv from any rank: the last look at expected_
  NodeGroups groups_;  // hierarchical allreduce
  std::atomic<int32_t> waiting_on_{-1};  // the peer the current wait needs (answer to pings)
  std::atomic<int32_t> wait_stopped_ms_{0};  // how long this process did not run during the current wait
};

// kiln's ring: reduce-scatter then allgather, n-1 steps each; chunk c of the buffer is
// [off(c), off(c) + len(c)) with the remainder spread over the first chunks. Each step moves one
// chunk to the next rank in segments of 1 MiB, so reducing a received segment overlaps the
// transfer of the next.
void MpiComm::ring_allreduce(OpContext& c, char* buf, int64_t n, DType dt, ReduceOp op) {
  const int p = size_, r = rank_;
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  const size_t esz = element_size(dt);
  const int64_t base = n / p, rem = n % p;
  auto off = [&](int ch) { return ch * base + std::min<int64_t>(ch, rem); };
  auto len = [&](int ch) { return base + (ch < rem ? 1 : 0); };
  const int64_t seg = std::max<int64_t>(1, int64_t(kRingSegmentBytes / esz));
  std::vector<char> tmp(size_t(len(0)) * esz);

  for (int phase = 0; phase < 2; ++phase) {
    const bool reduce = phase == 0;
    for (int s = 0; s < p - 1; ++s) {
      const int send_c = reduce ? (r - s + p) % p : (r + 1 - s + p) % p;
      const int recv_c = reduce ? (r - s - 1 + p) % p : (r - s + p) % p;
      Requests q;
      std::vector<int64_t> seg_start;  // per recv request
      for (int64_t i = 0; i < len(recv_c); i += seg) {
        int64_t m = std::min(seg, len(recv_c) - i);
        char* dst = reduce ? tmp.data() + i * esz : buf + (off(recv_c) + i) * esz;
        MPI_Request req;
        call(c, [&] { return MPI_Irecv(dst, int(m * esz), MPI_BYTE, prev, kRingTag, control_, &req); });
        q.add(req, prev, true);
        seg_start.push_back(i);
      }
      const size_t nrecv = q.reqs.size();
      for (int64_t i = 0; i < len(send_c); i += seg) {
        int64_t m = std::min(seg, len(send_c) - i);
        MPI_Request req;
        call(c, [&] {
          return MPI_Isend(buf + (off(send_c) + i) * esz, int(m * esz), MPI_BYTE, next, kRingTag, control_, &req);
        });
        q.add(req, next, false);
      }
      std::function<void(int)> on_done;
      if (reduce) {
        on_done = [&](int k) {
          if (size_t(k) >= nrecv) return;
          int64_t i = seg_start[size_t(k)];
          int64_t m = std::min(seg, len(recv_c) - i);
          reduce_into(buf + (off(recv_c) + i) * esz, tmp.data() + i * esz, m, dt, op);
        };
      }
      progress(c, q, on_done);
    }
  }
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(CommOptions options) {
  detail::init_mpi_now();
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, std::move(options));
}

namespace detail {
bool mpi_serialized() { return g_serialized; }
void set_mpi_serialized(bool s) { g_serialized = s; }
void release_mpi_ops() {
  for (auto& row : g_half_ops)
    for (MPI_Op& o : row)
      if (o != MPI_OP_NULL) MPI_Op_free(&o);
}
}  // namespace detail

}  // namespace kiln::dist

#else  // !KILN_HAVE_MPI

namespace kiln::dist {
std::unique_ptr<Communicator> make_mpi_communicator(CommOptions) {
  KILN_THROW("communicator backend mpi: kiln was built without MPI (cmake found no MPI library; KILN_WITH_MPI)");
}
namespace detail {
bool mpi_serialized() { return false; }
void set_mpi_serialized(bool) {}
void release_mpi_ops() {}
}  // namespace detail
}  // namespace kiln::dist

#endif
