// Parameter servers and their workers (dist/ps.h): sharding, the server loop (synchronous rounds,
// Downpour, SSP bound) and the worker's push/pull.
//   ctest --test-dir build -R mpi.test_ps
#include "dist/ps.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <sstream>

#include "engine/autograd.h"
#include "engine/ops/elementwise.h"

namespace kiln::dist {
namespace {

enum Kind : int { kPush = 1, kPull = 2, kDone = 3, kFinal = 4 };  // kFinal: done + wants the result
constexpr int kHeaderLen = 4;  // kind, worker clock, lr, payload numel

const char* kind_name(int k) {
  switch (k) {
    case kPush: return "PUSH";
    case kPull: return "PULL";
    case kDone: return "DONE";
    case kFinal: return "FINAL";
  }
  return "?";
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Tensor make_header(int kind, int64_t clock, double lr, int64_t numel) {
  return from_vector(std::vector<double>{double(kind), double(clock), lr, double(numel)}, {kHeaderLen},
                     TensorOptions(DType::float64));
}

int64_t bytes_of(const Tensor& t) { return t.numel() * int64_t(t.element_size()); }

// The flat buffer of one shard: dtype and device of its parameters (all alike, else an Error).
Tensor shard_buffer(const NamedTensors& params, const std::vector<int>& idx, int64_t numel, int server) {
  if (idx.empty()) return Tensor();
  const Tensor& first = params[size_t(idx[0])].second;
  for (int i : idx) {
    const Tensor& p = params[size_t(i)].second;
    KILN_CHECK(p.dtype() == first.dtype() && p.device() == first.device(), "parameter server ", server,
               ": parameters '", params[size_t(idx[0])].first, "' (", first.str(), ") and '",
               params[size_t(i)].first, "' (", p.str(), ") share a shard but differ in dtype or device");
  }
  return empty({numel}, TensorOptions(first.dtype()).with_device(first.device()));
}

// View of buf's elements [off, off + numel(shape)) shaped like p.
Tensor slot(const Tensor& buf, int64_t off, const Tensor& p) { return buf.narrow(0, off, p.numel()).view(p.sizes()); }

void broadcast_from_chief(Communicator& comm, const NamedTensors& params) {
  KILN_CHECK(comm.backend() != "nccl", "parameter servers receive from any rank, which NCCL cannot: give "
             "ParameterServer and PsWorker an 'mpi' communicator (parameters may still live on a GPU)");
  NoGradGuard ng;
  for (const auto& [name, p] : params) {
    KILN_CHECK(p.is_contiguous(), "parameter server: parameter '", name, "' is not contiguous");
    comm.broadcast(p.detach(), 0, "ps init " + name);
    p.bump_version();  // written by the communicator (caches of its values, folded batch norm)
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Options and roles

void check_ps_options(int size, const PsOptions& o) {
  KILN_CHECK(o.servers >= 1, "parameter servers: PsOptions::servers (--ps) is ", o.servers,
             "; a parameter-server job needs at least 1 server rank");
  KILN_CHECK(size <= 0 || o.servers < size, "parameter servers: PsOptions::servers (--ps) is ", o.servers, " on ", size,
             " rank(s), which leaves no worker; use at most ", size - 1);
  KILN_CHECK(o.staleness >= -1, "parameter servers: PsOptions::staleness (--staleness) is ", o.staleness,
             "; use -1 (unbounded) or a bound >= 0");
  KILN_CHECK(!o.synchronous || o.staleness == -1, "parameter servers: PsOptions::staleness (--staleness) ",
             o.staleness, " applies to asynchronous servers only; synchronous ones wait for every worker");
  KILN_CHECK(o.tag >= 0, "parameter servers: PsOptions::tag is ", o.tag, "; tags are >= 0");
}

bool is_server(const Communicator& comm, const PsOptions& o) {
  check_ps_options(comm.size(), o);
  return comm.rank() >= comm.size() - o.servers;
}

int ps_num_workers(int size, const PsOptions& o) { return size - o.servers; }

int ps_server_rank(int size, const PsOptions& o, int server) { return size - o.servers + server; }

PsShardMap shard_parameters(const NamedTensors& params, int servers) {
  KILN_CHECK(servers >= 1, "shard_parameters: ", servers, " servers; need at least 1");
  PsShardMap m;
  m.owner.assign(params.size(), -1);
  m.params.assign(size_t(servers), {});
  m.numel.assign(size_t(servers), 0);
  std::vector<int> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return params[size_t(a)].second.numel() > params[size_t(b)].second.numel(); });
  for (int i : order) {
    int s = int(std::min_element(m.numel.begin(), m.numel.end()) - m.numel.begin());  // first least loaded
    m.owner[size_t(i)] = s;
    m.numel[size_t(s)] += params[size_t(i)].second.numel();
  }
  for (size_t i = 0; i < params.size(); ++i) m.params[size_t(m.owner[i])].push_back(int(i));
  return m;
}

std::string PsStats::str() const {
  std::ostringstream os;
  os << "pushes " << pushes << ", pulls " << pulls << ", optimizer steps " << steps << ", sent "
     << bytes_sent / 1e6 << " MB, received " << bytes_received / 1e6 << " MB, staleness mean " << mean_staleness
     << " max " << max_staleness << ", update lag mean " << mean_update_lag << " max " << max_update_lag
     << ", deferred pulls " << deferred_pulls << ", waited " << wait_s << " s";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Server

struct ParameterServer::Impl {
  NamedTensors shard;             // this server's parameters (the model's own tensors)
  std::unique_ptr<optim::Optimizer> opt;
  Tensor recv_buf, acc_buf, reply_buf;
  int workers = 0;
  std::vector<int64_t> clock;     // pushes received per worker
  std::vector<char> active, pushed, pending;  // not done; pushed this round (sync); pull waiting
  std::vector<int64_t> version_at_pull;        // optimizer steps at the worker's last pull
  int n_pushed = 0;               // sync: pushes in the current round
  double lr = 0;
  int final_waiter = -1;          // the chief after FINAL
  double sum_staleness = 0, sum_lag = 0;
};

ParameterServer::ParameterServer(Communicator& comm, const NamedTensors& params, PsOptions o)
    : impl_(std::make_unique<Impl>()), comm_(comm), o_(std::move(o)) {
  KILN_CHECK(is_server(comm_, o_), "ParameterServer on rank ", comm_.rank(), ": with ", o_.servers,
             " server(s) of ", comm_.size(), " ranks, servers are ranks ", comm_.size() - o_.servers, "..",
             comm_.size() - 1);
  broadcast_from_chief(comm_, params);
  map_ = shard_parameters(params, o_.servers);
  index_ = comm_.rank() - (comm_.size() - o_.servers);
  Impl& m = *impl_;
  for (int i : map_.params[size_t(index_)]) m.shard.push_back(params[size_t(i)]);
  int64_t n = map_.numel[size_t(index_)];
  m.recv_buf = shard_buffer(params, map_.params[size_t(index_)], n, index_);
  if (m.recv_buf.defined()) {
    m.reply_buf = empty_like(m.recv_buf);
    if (o_.synchronous) m.acc_buf = zeros_like(m.recv_buf);
    m.opt = optim::make_optimizer(o_.optimizer, m.shard);
  }
  m.workers = ps_num_workers(comm_.size(), o_);
  m.clock.assign(size_t(m.workers), 0);
  m.active.assign(size_t(m.workers), 1);
  m.pushed.assign(size_t(m.workers), 0);
  m.pending.assign(size_t(m.workers), 0);
  m.version_at_pull.assign(size_t(m.workers), 0);
  m.lr = o_.optimizer.lr;
}

ParameterServer::~ParameterServer() = default;

optim::Optimizer* ParameterServer::optimizer() { return impl_->opt.get(); }

const PsStats& ParameterServer::run() {
  Impl& m = *impl_;
  const int W = m.workers;
  const int64_t numel = map_.numel[size_t(index_)];
  Tensor header = empty({kHeaderLen}, TensorOptions(DType::float64));
  NoGradGuard ng;

  // One optimizer step with grads viewing `buf`.
  auto apply = [&](const Tensor& buf) {
    int64_t off = 0;
    for (auto& [name, p] : m.shard) {
      p.set_grad(slot(buf, off, p));
      off += p.numel();
    }
    m.opt->set_lr(m.lr);
    m.opt->step();
    for (auto& [name, p] : m.shard) p.set_grad(Tensor());
    stats_.steps++;
  };
  auto min_active_clock = [&]() {
    int64_t lo = -1;
    for (int w = 0; w < W; ++w)
      if (m.active[size_t(w)] && (lo < 0 || m.clock[size_t(w)] < lo)) lo = m.clock[size_t(w)];
    return lo;
  };
  auto answerable = [&](int w) {
    if (o_.synchronous) return !m.pushed[size_t(w)];
    if (o_.staleness < 0) return true;
    return m.clock[size_t(w)] - min_active_clock() <= o_.staleness;
  };
  auto send_params = [&](int w) {
    int64_t off = 0;
    for (auto& [name, p] : m.shard) {
      slot(m.reply_buf, off, p).copy_(p.detach());
      off += p.numel();
    }
    comm_.send(m.reply_buf, w, o_.tag + 2);
    stats_.bytes_sent += bytes_of(m.reply_buf);
  };
  auto serve_pending = [&]() {
    for (int w = 0; w < W; ++w) {
      if (!m.pending[size_t(w)] || !answerable(w)) continue;
      int64_t gap = o_.synchronous ? 0 : m.clock[size_t(w)] - std::max<int64_t>(0, min_active_clock());
      stats_.max_staleness = std::max(stats_.max_staleness, gap);
      m.sum_staleness += double(gap);
      stats_.pulls++;
      send_params(w);
      m.version_at_pull[size_t(w)] = stats_.steps;
      m.pending[size_t(w)] = 0;
    }
  };
  // Synchronous: the round closes when every running worker has pushed (the done ones no longer count).
  auto try_close_round = [&]() {
    if (!o_.synchronous || m.n_pushed == 0) return;
    for (int w = 0; w < W; ++w)
      if (m.active[size_t(w)] && !m.pushed[size_t(w)]) return;
    if (m.n_pushed > 1) m.acc_buf.copy_(ops::mul(m.acc_buf, 1.0 / m.n_pushed));
    apply(m.acc_buf);
    m.acc_buf.zero_();
    std::fill(m.pushed.begin(), m.pushed.end(), 0);
    m.n_pushed = 0;
  };
  auto waiting_for = [&]() {
    std::ostringstream os;
    const char* sep = "";
    for (int w = 0; w < W; ++w)
      if (m.active[size_t(w)]) { os << sep << w; sep = ", "; }
    return os.str();
  };

  int done = 0;
  int w = -1;
  try {
    while (done < W) {
      double t0 = now_s();
      w = comm_.recv(header, kAnySource, o_.tag);
      stats_.wait_s += now_s() - t0;
      stats_.bytes_received += bytes_of(header);
      std::vector<double> h = header.to_vector();
      int kind = int(h[0]);
      KILN_CHECK(w >= 0 && w < W, "parameter server ", index_, " (rank ", comm_.rank(), "): got a ",
                 kind_name(kind), " from rank ", w, ", which is not a worker (workers are ranks 0..", W - 1, ")");
      KILN_CHECK(m.active[size_t(w)], "parameter server ", index_, ": ", kind_name(kind), " from worker ", w,
                 " after it said it was done");
      if (kind == kPush) {
        KILN_CHECK(int64_t(h[3]) == numel, "parameter server ", index_, " (rank ", comm_.rank(), "): worker ",
                   w, " pushes ", int64_t(h[3]), " elements, this shard holds ", numel,
                   " (do all ranks build the same model?)");
        KILN_CHECK(!(o_.synchronous && m.pushed[size_t(w)]), "parameter server ", index_, ": worker ", w,
                   " pushed twice in one synchronous round");
        KILN_CHECK(int64_t(h[1]) == m.clock[size_t(w)] + 1, "parameter server ", index_, ": worker ", w,
                   " pushes its step ", int64_t(h[1]), " after ", m.clock[size_t(w)], " pushes");
        comm_.recv(m.recv_buf, w, o_.tag + 1);
        stats_.bytes_received += bytes_of(m.recv_buf);
        stats_.pushes++;
        m.clock[size_t(w)]++;
        m.lr = h[2];
        int64_t lag = stats_.steps - m.version_at_pull[size_t(w)];
        stats_.max_update_lag = std::max(stats_.max_update_lag, lag);
        m.sum_lag += double(lag);
        if (o_.synchronous) {
          if (m.n_pushed == 0) m.acc_buf.copy_(m.recv_buf);
          else m.acc_buf.copy_(ops::add(m.acc_buf, m.recv_buf));
          m.pushed[size_t(w)] = 1;
          m.n_pushed++;
          try_close_round();
        } else {
          apply(m.recv_buf);
        }
        serve_pending();  // a push may close a round or advance the slowest clock
      } else if (kind == kPull) {
        m.pending[size_t(w)] = 1;
        if (!answerable(w)) stats_.deferred_pulls++;
        serve_pending();
      } else if (kind == kDone || kind == kFinal) {
        m.active[size_t(w)] = 0;
        done++;
        if (kind == kFinal) m.final_waiter = w;
        try_close_round();
        serve_pending();
      } else {
        KILN_THROW("parameter server ", index_, ": unknown message kind ", h[0], " from worker ", w);
      }
    }
    if (m.final_waiter >= 0 && numel > 0) send_params(m.final_waiter);
  } catch (const Error& e) {
    throw Error("parameter server " + std::to_string(index_) + " (rank " + std::to_string(comm_.rank()) +
                "), serving workers still running [" + waiting_for() + "]: " + e.what());
  }
  if (stats_.pulls > 0) stats_.mean_staleness = m.sum_staleness / double(stats_.pulls);
  if (stats_.pushes > 0) stats_.mean_update_lag = m.sum_lag / double(stats_.pushes);
  return stats_;
}

// ---------------------------------------------------------------------------------------------
// Worker

PsWorker::PsWorker(Communicator& comm, const NamedTensors& params, PsOptions o)
    : comm_(comm), o_(std::move(o)), params_(params) {
  KILN_CHECK(!is_server(comm_, o_), "PsWorker on rank ", comm_.rank(), ": with ", o_.servers, " server(s) of ",
             comm_.size(), " ranks, this rank is a server (run a ParameterServer there)");
  broadcast_from_chief(comm_, params_);
  map_ = shard_parameters(params_, o_.servers);
  for (int s = 0; s < o_.servers; ++s)
    buf_.push_back(shard_buffer(params_, map_.params[size_t(s)], map_.numel[size_t(s)], s));
  lr_ = o_.optimizer.lr;
}

PsWorker::~PsWorker() = default;

void PsWorker::pull_from(int s) {
  const int rank = ps_server_rank(comm_.size(), o_, s);
  comm_.recv(buf_[size_t(s)], rank, o_.tag + 2);
  stats_.bytes_received += bytes_of(buf_[size_t(s)]);
  stats_.pulls++;
  NoGradGuard ng;
  int64_t off = 0;
  for (int i : map_.params[size_t(s)]) {
    const Tensor& p = params_[size_t(i)].second;
    p.detach().copy_(slot(buf_[size_t(s)], off, p));
    off += p.numel();
  }
}

void PsWorker::push_pull() {
  KILN_CHECK(!finished_, "PsWorker::push_pull on rank ", comm_.rank(), " after finish()");
  double t0 = now_s();
  NoGradGuard ng;
  const int size = comm_.size();
  int s = 0;
  try {
    // All pushes first, so the servers apply their shards concurrently.
    for (s = 0; s < o_.servers; ++s) {
      const Tensor& buf = buf_[size_t(s)];
      if (!buf.defined()) continue;  // more servers than parameters: nothing here
      int64_t off = 0;
      for (int i : map_.params[size_t(s)]) {
        const Tensor& p = params_[size_t(i)].second;
        Tensor g = p.grad();
        Tensor dst = slot(buf, off, p);
        if (g.defined()) dst.copy_(g);
        else dst.zero_();
        off += p.numel();
      }
      Tensor h = make_header(kPush, clock_ + 1, lr_, buf.numel());
      const int rank = ps_server_rank(size, o_, s);
      comm_.send(h, rank, o_.tag);
      comm_.send(buf, rank, o_.tag + 1);
      stats_.bytes_sent += bytes_of(h) + bytes_of(buf);
      stats_.pushes++;
    }
    ++clock_;
    // Then one server at a time: a server only ever sends to a worker already waiting for it.
    for (s = 0; s < o_.servers; ++s) {
      if (!buf_[size_t(s)].defined()) continue;
      Tensor h = make_header(kPull, clock_, lr_, 0);
      comm_.send(h, ps_server_rank(size, o_, s), o_.tag);
      stats_.bytes_sent += bytes_of(h);
      pull_from(s);
    }
  } catch (const Error& e) {
    throw Error("PS worker " + std::to_string(comm_.rank()) + " at step " + std::to_string(clock_) +
                ", exchanging with parameter server " + std::to_string(s) + " (rank " +
                std::to_string(ps_server_rank(size, o_, s)) + "): " + e.what());
  }
  stats_.wait_s += now_s() - t0;
}

void PsWorker::finish() {
  KILN_CHECK(!finished_, "PsWorker::finish on rank ", comm_.rank(), " called twice");
  finished_ = true;
  const int size = comm_.size();
  int s = 0;
  try {
    for (s = 0; s < o_.servers; ++s) {
      Tensor h = make_header(is_chief() ? kFinal : kDone, clock_, lr_, 0);
      comm_.send(h, ps_server_rank(size, o_, s), o_.tag);
      stats_.bytes_sent += bytes_of(h);
    }
    if (is_chief())
      for (s = 0; s < o_.servers; ++s)
        if (buf_[size_t(s)].defined()) pull_from(s);
  } catch (const Error& e) {
    throw Error("PS worker " + std::to_string(comm_.rank()) + " finishing with parameter server " +
                std::to_string(s) + " (rank " + std::to_string(ps_server_rank(size, o_, s)) + "): " + e.what());
  }
}

}  // namespace kiln::dist
