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
#include "dist/mpi_detail.h"
#include "dist/mpi_liveness.h"
#include "dist/signature.h"
#include "engine/cuda_copy.h"

namespace kiln::dist {
namespace {

using mpi_detail::Clock;
using mpi_detail::kRingTag;
using mpi_detail::kSignatureTag;
using mpi_detail::MpiLock;

std::string mpi_error_string(int rc) { return mpi_detail::error_string(rc); }

constexpr int kCollective = -1;     // Requests::peers of a collective (no single peer)
constexpr int kUnnamedSend = -2;    // of a send that names nobody when pending
constexpr int kAnyPeer = -3;        // of a receive from any rank (expect_from() names the likely ones)
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
    liveness_ = std::make_unique<MpiLiveness>(probe_, rank_, size_);
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
    if (options_.algorithm == AllreduceAlgorithm::ring) {
      ring_allreduce(ctx, static_cast<char*>(s.ptr), n, t.dtype(), op);
    } else if (options_.algorithm == AllreduceAlgorithm::hierarchical) {
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
      const std::string dead = liveness_->dead_peers(expected_);
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
      liveness_->set_wait(first_pending_peer(r), c.suspended_s);
      liveness_->answer_pings(options_.timeout_s);
      double waited = std::chrono::duration<double>(now - c.start).count();
      // Dead peers (same host: /proc) are looked for every 0.1 s: a launcher that ends the job on a
      // death (Open MPI 5's within about 0.5 s) must not beat kiln's own line naming the rank.
      if (waited > 0.1 && now - last_dead_check > std::chrono::milliseconds(100)) {
        last_dead_check = now;
        const std::string dead = liveness_->dead_peers(pending_peers(r));
        if (!dead.empty()) {
          abandon(r);
          broken_ = true;
          broken_why_ = std::string("the communicator is unusable after ") + c.what + " '" + c.name + "'" +
                        seq_str(c) + " lost a rank";
          KILN_THROW("rank ", rank_, ": ", c.what, " '", c.name, "'", seq_str(c), ": ", dead, liveness_->self_suspended(c.start, c.suspended_s, options_.timeout_s));
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
        const std::string silent = liveness_->blame(pending_peers(r), options_.timeout_s);
        if (!silent.empty()) who = silent;
        const char* why = silent.empty() ? " (dead, stopped, or issuing a different collective)" : "";
        abandon(r);
        broken_ = true;
        broken_why_ = std::string("the communicator is unusable after ") + c.what + " '" + c.name + "'" +
                      seq_str(c) + " timed out";
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%.0f", options_.timeout_s);
        KILN_THROW("rank ", rank_, ": ", c.what, " '", c.name, "'", seq_str(c), " timed out after ", secs,
                   " s waiting for ", who, why, liveness_->self_suspended(c.start, c.suspended_s, options_.timeout_s));
      }
    }
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

  // The first peer a wait still needs (-1: a collective or none), for the answer to a ping.
  int32_t first_pending_peer(const Requests& r) const {
    const std::vector<int> ranks = pending_peers(r);
    return ranks.empty() ? -1 : ranks.front();
  }

  std::string pending(const Requests& r) const {
    const std::vector<int> ranks = pending_peers(r);
    if (ranks.empty()) {
      for (size_t i = 0; i < r.reqs.size(); ++i)
        if (r.reqs[i] != MPI_REQUEST_NULL && r.peers[i] == kAnyPeer) return "any rank";
      return "rank(s) unknown (inside the MPI library's collective)";
    }
    return MpiLiveness::ranks_text(ranks);
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
  std::unique_ptr<MpiLiveness> liveness_;  // every rank's identity, pings, blame
  std::vector<int> expected_;     // expect_from()
  Clock::time_point last_liveness_{};  // recv from any rank: the last look at expected_
  NodeGroups groups_;  // hierarchical allreduce
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

namespace mpi_detail {
bool g_serialized = false;
std::mutex& call_mutex() {
  static std::mutex m;
  return m;
}
std::string error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, size_t(len));
}
}  // namespace mpi_detail

namespace detail {
bool mpi_serialized() { return mpi_detail::g_serialized; }
void set_mpi_serialized(bool s) { mpi_detail::g_serialized = s; }
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
