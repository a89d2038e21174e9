// Parameter servers and their workers (dist/ps.h): sharding, the server loop (synchronous rounds,
// Downpour, SSP bound) and the worker's push/pull.
//   ctest --test-dir build -R mpi.test_ps
#include "dist/ps.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <sstream>

#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/autograd.h"
#include "engine/ops/elementwise.h"

namespace kiln::dist {
namespace {

// kFinal: done + wants the result; kReply: a server's header before the parameters it sends.
enum Kind : int { kPush = 1, kPull = 2, kDone = 3, kFinal = 4, kReply = 5, kStats = 6, kState = 7 };

const char* kind_name(int k) {
  switch (k) {
    case kPush: return "PUSH";
    case kPull: return "PULL";
    case kDone: return "DONE";
    case kFinal: return "FINAL";
    case kReply: return "REPLY";
    case kStats: return "STATS";
    case kState: return "STATE";
  }
  return "?";
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The header every message starts with, float64 on the wire in this order.
struct Header {
  static constexpr int kLen = 5;
  int kind = 0;
  int64_t clock = 0;   // a worker: its pushes; a server: its optimizer steps
  double lr = 0;       // a worker's learning rate for the step it pushes
  int64_t numel = 0;   // the payload that follows (elements or bytes)
  bool stop = false;   // a worker: it asks the job to stop; a server: the job stops after this step

  Tensor tensor() const {
    return from_vector(std::vector<double>{double(kind), double(clock), lr, double(numel), stop ? 1.0 : 0.0}, {kLen},
                       TensorOptions(DType::float64));
  }
  // A number that is not a whole number in range reads as -1 (a kind, clock or size no check takes).
  static Header of(const std::vector<double>& v) {
    KILN_CHECK(v.size() == size_t(kLen), "parameter server: a message header of ", v.size(), " numbers, not ", kLen);
    const auto whole = [](double d) { return d >= -9.0e15 && d <= 9.0e15 && d == std::floor(d) ? int64_t(d) : -1; };
    const int64_t kind = whole(v[0]);
    return {kind >= 0 && kind < 1000 ? int(kind) : -1, whole(v[1]), v[2], whole(v[3]), v[4] != 0};
  }
};

Tensor make_header(int kind, int64_t clock, double lr, int64_t numel, bool stop = false) {
  return Header{kind, clock, lr, numel, stop}.tensor();
}

int64_t bytes_of(const Tensor& t) { return t.numel() * int64_t(t.element_size()); }

// An optimizer state as one uint8 tensor: [header bytes as 8 decimal digits][header JSON]
// [tensor bytes], the header {"json": state_json, "tensors": [[name, dtype, [shape], offset], ...]}.
Tensor pack_state(const optim::Optimizer* opt) {
  nlohmann::json header = {{"json", opt ? opt->state_json() : std::string()}, {"tensors", nlohmann::json::array()}};
  NamedTensors ts = opt ? opt->state_tensors() : NamedTensors{};
  int64_t offset = 0;
  std::vector<Tensor> host;
  for (const auto& [name, t] : ts) {
    Tensor c = t.to(Device()).contiguous();
    header["tensors"].push_back({name, int(c.dtype()), c.sizes(), offset});
    offset += c.numel() * int64_t(c.element_size());
    host.push_back(c);
  }
  const std::string h = header.dump();
  char len[16];
  std::snprintf(len, sizeof len, "%08zu", h.size());
  Tensor out = empty({8 + int64_t(h.size()) + offset}, DType::uint8);
  char* p = static_cast<char*>(out.data_ptr());
  std::memcpy(p, len, 8);
  std::memcpy(p + 8, h.data(), h.size());
  char* data = p + 8 + h.size();
  for (const Tensor& c : host) {
    std::memcpy(data, c.data_ptr(), size_t(c.numel()) * c.element_size());
    data += c.numel() * int64_t(c.element_size());
  }
  return out;
}

PsOptimizerState unpack_state(const Tensor& bytes, int server) {
  const char* p = static_cast<const char*>(bytes.data_ptr());
  const int64_t n = bytes.numel();
  auto bad = [&](const std::string& why) {
    KILN_THROW("parameter server ", server, ": its optimizer state is malformed (", why, ")");
  };
  if (n < 8) bad("shorter than its header");
  const int64_t hlen = std::atoll(std::string(p, 8).c_str());
  if (hlen <= 0 || 8 + hlen > n) bad("header length " + std::to_string(hlen));
  nlohmann::json header = nlohmann::json::parse(std::string(p + 8, size_t(hlen)), nullptr, false);
  if (header.is_discarded() || !header.is_object() || !header.contains("json") || !header.contains("tensors")) bad("header");
  PsOptimizerState st;
  st.json = header["json"].get<std::string>();
  const char* data = p + 8 + hlen;
  const int64_t room = n - 8 - hlen;
  try {
    for (const auto& e : header["tensors"]) {
      const std::string name = e.at(0).get<std::string>();
      const int code = e.at(1).get<int>();
      if (code < 0 || code > int(DType::boolean)) bad("tensor '" + name + "' of dtype code " + std::to_string(code));
      const DType dt = DType(code);
      const Shape shape = e.at(2).get<std::vector<int64_t>>();
      for (int64_t d : shape)
        if (d < 0 || d > room) bad("tensor '" + name + "' of size " + std::to_string(d));
      const int64_t off = e.at(3).get<int64_t>();
      Tensor t = empty(shape, dt);
      const int64_t nb = t.numel() * int64_t(t.element_size());
      if (off < 0 || off + nb > room) bad("tensor '" + name + "' outside the message");
      std::memcpy(t.data_ptr(), data + off, size_t(nb));
      st.tensors.emplace_back(name, t);
    }
  } catch (const nlohmann::json::exception& e) {
    bad(e.what());
  }
  return st;
}

// The part of the whole job's optimizer state that concerns `shard` (parameters by name).
PsOptimizerState shard_state(const std::string& json_text, const NamedTensors& tensors, const NamedTensors& shard) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  KILN_CHECK(!j.is_discarded() && j.is_object() && j.contains("params") && j["params"].is_object(),
             "parameter server: the optimizer state to resume from is not an optimizer's state JSON");
  nlohmann::json params = nlohmann::json::object();
  PsOptimizerState st;
  for (const auto& [name, p] : shard) {
    KILN_CHECK(j["params"].contains(name), "parameter server: the optimizer state to resume from has no parameter '",
               name, "'");
    params[name] = j["params"][name];
    for (const auto& [tn, t] : tensors)
      if (tn.size() > name.size() && tn.compare(0, name.size(), name) == 0 && tn[name.size()] == '.' &&
          tn.find('.', name.size() + 1) == std::string::npos)
        st.tensors.emplace_back(tn, t);
  }
  j["params"] = params;
  st.json = j.dump();
  return st;
}

// PsStats as float64 for a STATS reply, and back.
constexpr int kStatsLen = 12;
Tensor stats_tensor(const PsStats& s) {
  return from_vector(std::vector<double>{double(s.pushes), double(s.pulls), double(s.steps), double(s.bytes_sent),
                                         double(s.bytes_received), double(s.max_staleness), s.mean_staleness,
                                         double(s.max_update_lag), s.mean_update_lag, double(s.deferred_pulls),
                                         s.wait_s, 0.0},
                     {kStatsLen}, TensorOptions(DType::float64));
}
PsStats stats_of(const std::vector<double>& v) {
  PsStats s;
  s.pushes = int64_t(v[0]), s.pulls = int64_t(v[1]), s.steps = int64_t(v[2]);
  s.bytes_sent = int64_t(v[3]), s.bytes_received = int64_t(v[4]);
  s.max_staleness = int64_t(v[5]), s.mean_staleness = v[6];
  s.max_update_lag = int64_t(v[7]), s.mean_update_lag = v[8];
  s.deferred_pulls = int64_t(v[9]), s.wait_s = v[10];
  return s;
}

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

// keep_own: take part in the broadcast but keep this rank's values (a server of a resumed job
// holds the checkpoint's parameters, loaded after the workers broadcast their initial ones).
void broadcast_from_chief(Communicator& comm, const NamedTensors& params, bool keep_own = false) {
  KILN_CHECK(comm.backend() != "nccl", "parameter servers receive from any rank, which NCCL cannot: give "
             "ParameterServer and PsWorker an 'mpi' communicator (parameters may still live on a GPU)");
  NoGradGuard ng;
  for (const auto& [name, p] : params) {
    KILN_CHECK(p.is_contiguous(), "parameter server: parameter '", name, "' is not contiguous");
    if (keep_own) {
      comm.broadcast(empty_like(p), 0, "ps init " + name);
      continue;
    }
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

// The server's state and its handling of each message kind; run() is the receive loop.
struct ParameterServer::Impl {
  explicit Impl(ParameterServer& s) : comm(s.comm_), o(s.o_), stats(s.stats_), index(s.index_) {}

  Communicator& comm;
  const PsOptions& o;
  PsStats& stats;
  const int& index;
  int64_t numel = 0;              // this shard's elements
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
  int done = 0;                   // workers that said DONE or FINAL
  double sum_staleness = 0, sum_lag = 0;
  // Stops: a worker's push asks (stop_asked); the job stops once stopping is latched, and every
  // reply says so. Synchronous servers latch at a round's close only, so all replies of one round
  // agree and every worker stops after the same step.
  bool stop_asked = false, stopping = false;

  // One optimizer step with grads viewing `buf`.
  void apply(const Tensor& buf) {
    int64_t off = 0;
    for (auto& [name, p] : shard) {
      p.set_grad(slot(buf, off, p));
      off += p.numel();
    }
    opt->set_lr(lr);
    opt->step();
    for (auto& [name, p] : shard) p.set_grad(Tensor());
    stats.steps++;
  }
  int64_t min_active_clock() const {
    int64_t lo = -1;
    for (int w = 0; w < workers; ++w)
      if (active[size_t(w)] && (lo < 0 || clock[size_t(w)] < lo)) lo = clock[size_t(w)];
    return lo;
  }
  // Whether a pull of worker w may be answered now: synchronous, once its push is in a closed
  // round; asynchronous, within the staleness bound of the slowest running worker.
  bool answerable(int w) const {
    if (o.synchronous) return !pushed[size_t(w)];
    if (o.staleness < 0) return true;
    return clock[size_t(w)] - min_active_clock() <= o.staleness;
  }
  void latch_stop() {
    if (stop_asked || (o.stop_requested && o.stop_requested())) stopping = true;
  }
  // A REPLY header and its payload to worker w; returns the bytes sent.
  int64_t reply(int w, const Tensor& payload) {
    Tensor h = make_header(kReply, stats.steps, lr, payload.numel(), stopping);
    comm.send(h, w, o.tag + 2);
    comm.send(payload, w, o.tag + 2);
    return bytes_of(h) + bytes_of(payload);
  }
  // The shard's parameters to worker w (the traffic the statistics count; STATS and STATE replies
  // are the chief's bookkeeping).
  void send_params(int w) {
    if (!o.synchronous) latch_stop();
    int64_t off = 0;
    for (auto& [name, p] : shard) {
      slot(reply_buf, off, p).copy_(p.detach());
      off += p.numel();
    }
    stats.bytes_sent += reply(w, reply_buf);
  }
  void serve_pending() {
    for (int w = 0; w < workers; ++w) {
      if (!pending[size_t(w)] || !answerable(w)) continue;
      int64_t gap = o.synchronous ? 0 : clock[size_t(w)] - std::max<int64_t>(0, min_active_clock());
      stats.max_staleness = std::max(stats.max_staleness, gap);
      sum_staleness += double(gap);
      stats.pulls++;
      send_params(w);
      version_at_pull[size_t(w)] = stats.steps;
      pending[size_t(w)] = 0;
    }
  }
  // Synchronous: the round closes when every running worker has pushed (the done ones no longer count).
  void try_close_round() {
    if (!o.synchronous || n_pushed == 0) return;
    for (int w = 0; w < workers; ++w)
      if (active[size_t(w)] && !pushed[size_t(w)]) return;
    if (n_pushed > 1) acc_buf.copy_(ops::mul(acc_buf, 1.0 / n_pushed));
    apply(acc_buf);
    acc_buf.zero_();
    std::fill(pushed.begin(), pushed.end(), 0);
    n_pushed = 0;
    latch_stop();
  }
  std::string waiting_for() const {
    std::ostringstream os;
    const char* sep = "";
    for (int w = 0; w < workers; ++w)
      if (active[size_t(w)]) { os << sep << w; sep = ", "; }
    return os.str();
  }
  // Whom the next wait is for, should it time out or another rank ask: synchronous, the workers
  // the round still needs; else (and once the round has them all) those not already waiting for
  // a reply.
  void expect_next() {
    std::vector<int> expect;
    for (int v = 0; v < workers; ++v)
      if (active[size_t(v)] && o.synchronous && !pushed[size_t(v)]) expect.push_back(v);
    if (expect.empty())
      for (int v = 0; v < workers; ++v)
        if (active[size_t(v)] && !pending[size_t(v)]) expect.push_back(v);
    comm.expect_from(expect);
  }

  void on_push(int w, const Header& h) {
    KILN_CHECK(h.numel == numel, "parameter server ", index, " (rank ", comm.rank(), "): worker ", w, " pushes ",
               h.numel, " elements, this shard holds ", numel, " (do all ranks build the same model?)");
    KILN_CHECK(!(o.synchronous && pushed[size_t(w)]), "parameter server ", index, ": worker ", w,
               " pushed twice in one synchronous round");
    KILN_CHECK(h.clock == clock[size_t(w)] + 1, "parameter server ", index, ": worker ", w, " pushes its step ",
               h.clock, " after ", clock[size_t(w)], " pushes");
    comm.recv(recv_buf, w, o.tag + 1);
    stats.bytes_received += bytes_of(recv_buf);
    stats.pushes++;
    if (h.stop) stop_asked = true;
    clock[size_t(w)]++;
    lr = h.lr;
    const int64_t lag = stats.steps - version_at_pull[size_t(w)];
    stats.max_update_lag = std::max(stats.max_update_lag, lag);
    sum_lag += double(lag);
    if (o.synchronous) {
      if (n_pushed == 0) acc_buf.copy_(recv_buf);
      else acc_buf.copy_(ops::add(acc_buf, recv_buf));
      pushed[size_t(w)] = 1;
      n_pushed++;
      try_close_round();
    } else {
      apply(recv_buf);
    }
    serve_pending();  // a push may close a round or advance the slowest clock
  }
  void on_pull(int w) {
    pending[size_t(w)] = 1;
    if (!answerable(w)) stats.deferred_pulls++;
    serve_pending();
  }
  PsStats stats_now() const {
    PsStats now = stats;
    if (now.pulls > 0) now.mean_staleness = sum_staleness / double(now.pulls);
    if (now.pushes > 0) now.mean_update_lag = sum_lag / double(now.pushes);
    return now;
  }
  void on_done(int w, bool final) {
    active[size_t(w)] = 0;
    done++;
    if (final) final_waiter = w;
    try_close_round();
    serve_pending();
  }
  void receive_one() {
    Tensor header = empty({Header::kLen}, TensorOptions(DType::float64));
    const double t0 = now_s();
    const int w = comm.recv(header, kAnySource, o.tag);
    stats.wait_s += now_s() - t0;
    stats.bytes_received += bytes_of(header);
    const Header h = Header::of(header.to_vector());
    KILN_CHECK(w >= 0 && w < workers, "parameter server ", index, " (rank ", comm.rank(), "): got a ",
               kind_name(h.kind), " from rank ", w, ", which is not a worker (workers are ranks 0..", workers - 1, ")");
    KILN_CHECK(active[size_t(w)], "parameter server ", index, ": ", kind_name(h.kind), " from worker ", w,
               " after it said it was done");
    switch (h.kind) {
      case kPush: return on_push(w, h);
      case kPull: return on_pull(w);
      case kStats: reply(w, stats_tensor(stats_now())); return;  // the chief asks at an epoch's end
      case kState: reply(w, pack_state(opt.get())); return;       // the chief, for a checkpoint
      case kDone:
      case kFinal: return on_done(w, h.kind == kFinal);
    }
    KILN_THROW("parameter server ", index, ": unknown message kind ", h.kind, " from worker ", w);
  }

  const PsStats& run() {
    NoGradGuard ng;
    try {
      while (done < workers) {
        expect_next();
        receive_one();
      }
      comm.expect_from({});
      if (final_waiter >= 0 && numel > 0) {
        send_params(final_waiter);
        reply(final_waiter, pack_state(opt.get()));  // with the final parameters, for the chief's checkpoint
      }
    } catch (const Error& e) {
      comm.expect_from({});
      throw Error("parameter server " + std::to_string(index) + " (rank " + std::to_string(comm.rank()) +
                  "), serving workers still running [" + waiting_for() + "]: " + e.what());
    }
    stats = stats_now();
    return stats;
  }
};

ParameterServer::ParameterServer(Communicator& comm, const NamedTensors& params, PsOptions o)
    : comm_(comm), o_(std::move(o)), impl_(std::make_unique<Impl>(*this)) {
  KILN_CHECK(is_server(comm_, o_), "ParameterServer on rank ", comm_.rank(), ": with ", o_.servers,
             " server(s) of ", comm_.size(), " ranks, servers are ranks ", comm_.size() - o_.servers, "..",
             comm_.size() - 1);
  // Resumed (an initial optimizer state): this rank's model holds the checkpoint's parameters; the
  // chief broadcast its initial ones before it loaded the checkpoint.
  broadcast_from_chief(comm_, params, !o_.initial_state_json.empty());
  map_ = shard_parameters(params, o_.servers);
  index_ = comm_.rank() - (comm_.size() - o_.servers);
  Impl& m = *impl_;
  m.numel = map_.numel[size_t(index_)];
  for (int i : map_.params[size_t(index_)]) m.shard.push_back(params[size_t(i)]);
  int64_t n = map_.numel[size_t(index_)];
  m.recv_buf = shard_buffer(params, map_.params[size_t(index_)], n, index_);
  if (m.recv_buf.defined()) {
    m.reply_buf = empty_like(m.recv_buf);
    if (o_.synchronous) m.acc_buf = zeros_like(m.recv_buf);
    m.opt = optim::make_optimizer(o_.optimizer, m.shard);
    if (!o_.initial_state_json.empty()) {
      const PsOptimizerState st = shard_state(o_.initial_state_json, o_.initial_state_tensors, m.shard);
      m.opt->load_state(st.json, st.tensors);
    }
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

const PsStats& ParameterServer::run() { return impl_->run(); }

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

std::vector<double> PsWorker::receive_reply(int s) {
  const int rank = ps_server_rank(comm_.size(), o_, s);
  Tensor header = empty({Header::kLen}, TensorOptions(DType::float64));
  comm_.recv(header, rank, o_.tag + 2);
  const std::vector<double> h = header.to_vector();
  const int kind = Header::of(h).kind;
  KILN_CHECK(kind == kReply, "PS worker ", comm_.rank(), ": parameter server ", s, " (rank ", rank,
             ") answered with ", kind_name(kind), ", not a REPLY");
  return h;
}

void PsWorker::pull_from(int s) {
  const int rank = ps_server_rank(comm_.size(), o_, s);
  const Header h = Header::of(receive_reply(s));
  KILN_CHECK(h.numel == buf_[size_t(s)].numel(), "PS worker ", comm_.rank(), ": parameter server ", s, " (rank ",
             rank, ") answered with ", kind_name(h.kind), " of ", h.numel, " elements; expected a REPLY of ",
             buf_[size_t(s)].numel());
  if (h.stop) stop_agreed_ = true;
  comm_.recv(buf_[size_t(s)], rank, o_.tag + 2);
  stats_.bytes_received += Header::kLen * int64_t(sizeof(double)) + bytes_of(buf_[size_t(s)]);
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
      Tensor h = make_header(kPush, clock_ + 1, lr_, buf.numel(), stop_requested_);
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

PsOptimizerState PsWorker::receive_state(int s) {
  const int rank = ps_server_rank(comm_.size(), o_, s);
  const Header h = Header::of(receive_reply(s));
  KILN_CHECK(h.numel >= 8 && h.numel < int64_t(9e15), "PS worker ", comm_.rank(), ": parameter server ", s,
             " answered a STATE request with ", kind_name(h.kind), " of ", h.numel, " bytes");
  Tensor bytes = empty({h.numel}, DType::uint8);
  comm_.recv(bytes, rank, o_.tag + 2);
  return unpack_state(bytes, s);
}

PsOptimizerState PsWorker::server_state() {
  KILN_CHECK(is_chief(), "PsWorker::server_state: only the chief (rank 0) asks the servers");
  if (finished_) return merge_optimizer_states(final_state_);
  std::vector<PsOptimizerState> shards;
  const int size = comm_.size();
  for (int s = 0; s < o_.servers; ++s) {
    if (!buf_[size_t(s)].defined()) continue;  // an empty shard has no optimizer
    comm_.send(make_header(kState, clock_, lr_, 0), ps_server_rank(size, o_, s), o_.tag);
    shards.push_back(receive_state(s));
  }
  return merge_optimizer_states(shards);
}

std::vector<PsStats> PsWorker::server_stats() {
  std::vector<PsStats> out;
  const int size = comm_.size();
  for (int s = 0; s < o_.servers; ++s) {
    const int rank = ps_server_rank(size, o_, s);
    comm_.send(make_header(kStats, clock_, lr_, 0), rank, o_.tag);
    const Header h = Header::of(receive_reply(s));
    KILN_CHECK(h.numel == kStatsLen, "PS worker ", comm_.rank(), ": parameter server ", s, " answered a STATS ",
               "request with ", h.numel, " numbers, not ", kStatsLen);
    Tensor v = empty({kStatsLen}, TensorOptions(DType::float64));
    comm_.recv(v, rank, o_.tag + 2);
    out.push_back(stats_of(v.to_vector()));
  }
  return out;
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
        if (buf_[size_t(s)].defined()) {
          pull_from(s);
          final_state_.push_back(receive_state(s));
        }
  } catch (const Error& e) {
    throw Error("PS worker " + std::to_string(comm_.rank()) + " finishing with parameter server " +
                std::to_string(s) + " (rank " + std::to_string(ps_server_rank(size, o_, s)) + "): " + e.what());
  }
}

PsOptimizerState merge_optimizer_states(const std::vector<PsOptimizerState>& shards) {
  PsOptimizerState out;
  nlohmann::json merged;
  for (const PsOptimizerState& st : shards) {
    nlohmann::json j = nlohmann::json::parse(st.json, nullptr, false);
    KILN_CHECK(!j.is_discarded() && j.is_object() && j.contains("params") && j.contains("steps"),
               "parameter servers: a shard's optimizer state is not an optimizer's state JSON");
    if (merged.is_null()) {
      merged = j;
    } else {
      for (const auto& [k, v] : j["params"].items()) merged["params"][k] = v;
      merged["steps"] = std::max(merged["steps"].get<int64_t>(), j["steps"].get<int64_t>());
    }
    out.tensors.insert(out.tensors.end(), st.tensors.begin(), st.tensors.end());
  }
  out.json = merged.is_null() ? std::string() : merged.dump();
  return out;
}

}  // namespace kiln::dist
