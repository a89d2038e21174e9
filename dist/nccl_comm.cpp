// NcclComm: the communicator over NCCL for CUDA tensors, one rank per GPU (the device its local
// rank picks). Rank 0 makes the ncclUniqueId and broadcasts it over an MPI communicator, which
// also carries the signature check (an allgather of every rank's signature before each
// collective). A process that is not one of several ranks (no launcher, or a build without MPI)
// gets a communicator of one rank over a local host communicator: the same NCCL calls on one GPU,
// which is how tools/gpu-check proves the NCCL path on a machine of one GPU. Collectives run on kiln's current stream of the device; the host then waits by
// polling a CUDA event (and ncclCommGetAsyncError) with the MPI communicator's timeout logic:
// past timeout_s the NCCL communicator is aborted (ncclCommAbort) and a kiln::Error is thrown.
// APIs newer than the NCCL of CUDA 11 are guarded by NCCL_VERSION_CODE: ncclAvg (2.10; else sum
// then scale), bfloat16 (2.10), ncclCommSplit (2.18; else split, and so the hierarchical
// all-reduce, is a kiln::Error). Hierarchical all-reduce (CommOptions::algorithm, dist/comm.h
// NodeGroups): NCCL within the node (NVLink/PCIe), NCCL among the node leaders, NCCL broadcast
// within the node; the groups come from ncclCommSplit.
// Runs on a GPU machine:  ctest --test-dir build -R gpu.test_gpu_nccl
#include "dist/nccl_comm.h"

#if defined(KILN_HAVE_NCCL)

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "dist/mpi_comm.h"
#include "dist/signature.h"
#include "engine/cuda_runtime.h"
#include "engine/ops/optim.h"

namespace kiln::dist {
namespace {

#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
#define KILN_NCCL_HAS_AVG 1
#endif

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::float32: return ncclFloat32;
    case DType::float64: return ncclFloat64;
    case DType::float16: return ncclFloat16;
#if defined(KILN_NCCL_HAS_AVG)
    case DType::bfloat16: return ncclBfloat16;
#endif
    case DType::int32: return ncclInt32;
    case DType::int64: return ncclInt64;
    case DType::uint8: case DType::boolean: return ncclUint8;
    default: break;
  }
  KILN_THROW("nccl: ", t, " tensors need a newer NCCL (bfloat16: 2.10)");
}

class NcclComm final : public Communicator {
 public:
  NcclComm(CommOptions o, std::unique_ptr<Communicator> host, int device, ncclComm_t comm)
      : Communicator(std::move(o)), host_(std::move(host)), device_(device), comm_(comm) {
    rank_ = host_->rank();
    size_ = host_->size();
  }
  ~NcclComm() override {
    groups_ = NodeGroups{};  // the communicators split from this one go first
    if (comm_) ncclCommDestroy(comm_);
  }

  // All ranks: the id from rank 0 over `host`, then ncclCommInitRank on `device`.
  static std::unique_ptr<NcclComm> create(CommOptions o, std::unique_ptr<Communicator> host, int device) {
    cuda::set_device(device);
    ncclUniqueId id;
    if (host->rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId", host->rank(), host->size());
    Tensor bytes = empty({int64_t(sizeof(id))}, TensorOptions(DType::uint8));
    std::memcpy(bytes.data_ptr(), &id, sizeof(id));
    host->broadcast(bytes, 0, "nccl unique id");
    std::memcpy(&id, bytes.data_ptr(), sizeof(id));
    ncclComm_t comm = nullptr;
    check(ncclCommInitRank(&comm, host->size(), id, host->rank()), "ncclCommInitRank", host->rank(), host->size());
    return std::make_unique<NcclComm>(std::move(o), std::move(host), device, comm);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  // CPU tensors (the ranks' control exchanges: structure and settings checks, evaluation sums,
  // clock alignment) go over the host communicator; NCCL moves device memory only.
  void allreduce(const Tensor& t, ReduceOp op, const std::string& name) override {
    if (t.device().is_cpu()) return host_->allreduce(t, op, name);
    check_tensor(t, "allreduce", name);
    announce(CollectiveKind::allreduce, t.dtype(), t.numel(), -1, op, name);
    if (t.numel() == 0) return;
    if (options_.algorithm == AllreduceAlgorithm::hierarchical && size_ > 1) {
      if (!groups_.node) groups_ = split_by_node(*this);
      hierarchical_allreduce(groups_, t, op == ReduceOp::average ? ReduceOp::sum : op, name);
      if (op == ReduceOp::average) ops::scale_(t, 1.0 / size_);
      return;
    }
    bool scale = false;
    ncclRedOp_t nop = red_op(op, t.dtype(), &scale);
    run("allreduce", name, [&](cudaStream_t s) {
      return ncclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), nccl_type(t.dtype()), nop, comm_, s);
    });
    if (scale) ops::scale_(t, 1.0 / size_);
  }

  void broadcast(const Tensor& t, int root, const std::string& name) override {
    if (t.device().is_cpu()) return host_->broadcast(t, root, name);
    check_tensor(t, "broadcast", name);
    KILN_CHECK(root >= 0 && root < size_, "nccl broadcast '", name, "': root ", root, " is not a rank");
    announce(CollectiveKind::broadcast, t.dtype(), t.numel(), root, ReduceOp::sum, name);
    if (t.numel() == 0) return;
    run("broadcast", name, [&](cudaStream_t s) {
      return ncclBroadcast(t.data_ptr(), t.data_ptr(), size_t(t.numel()), nccl_type(t.dtype()), root, comm_, s);
    });
  }

  void allgather(const Tensor& in, const Tensor& out, const std::string& name) override {
    if (in.device().is_cpu() && out.device().is_cpu()) return host_->allgather(in, out, name);
    check_tensor(in, "allgather", name);
    check_tensor(out, "allgather", name);
    KILN_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size_, "nccl allgather '", name,
               "': out ", out.str(), " must have size() * in.numel() elements of ", in.dtype());
    announce(CollectiveKind::allgather, in.dtype(), in.numel(), -1, ReduceOp::sum, name);
    if (in.numel() == 0) return;
    run("allgather", name, [&](cudaStream_t s) {
      return ncclAllGather(in.data_ptr(), out.data_ptr(), size_t(in.numel()), nccl_type(in.dtype()), comm_, s);
    });
  }

  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, const std::string& name) override {
    if (in.device().is_cpu() && out.device().is_cpu()) return host_->reduce_scatter(in, out, op, name);
    check_tensor(in, "reduce_scatter", name);
    check_tensor(out, "reduce_scatter", name);
    KILN_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size_, "nccl reduce_scatter '", name,
               "': in ", in.str(), " must have size() * out.numel() elements of ", out.dtype());
    announce(CollectiveKind::reduce_scatter, out.dtype(), out.numel(), -1, op, name);
    if (out.numel() == 0) return;
    bool scale = false;
    ncclRedOp_t nop = red_op(op, out.dtype(), &scale);
    run("reduce_scatter", name, [&](cudaStream_t s) {
      return ncclReduceScatter(in.data_ptr(), out.data_ptr(), size_t(out.numel()), nccl_type(out.dtype()), nop,
                               comm_, s);
    });
    if (scale) ops::scale_(out, 1.0 / size_);
  }

  void barrier(const std::string& name) override {
    announce(CollectiveKind::barrier, DType::uint8, 0, -1, ReduceOp::sum, name);
    if (!one_.defined()) one_ = zeros({1}, TensorOptions(DType::int32).with_device(Device(DeviceType::cuda, device_)));
    run("barrier", name, [&](cudaStream_t s) {
      return ncclAllReduce(one_.data_ptr(), one_.data_ptr(), 1, ncclInt32, ncclSum, comm_, s);
    });
  }

  void send(const Tensor& t, int dst, int tag) override {
    if (t.device().is_cpu()) return host_->send(t, dst, tag);
    check_tensor(t, "send", "");
    KILN_CHECK(dst >= 0 && dst < size_, "nccl send: rank ", dst, " is not a rank (size ", size_, ")");
    run("send", "to rank " + std::to_string(dst), [&](cudaStream_t s) {
      ncclGroupStart();
      ncclResult_t r = ncclSend(t.data_ptr(), t.numel() * t.element_size(), ncclUint8, dst, comm_, s);
      ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
  }

  int recv(const Tensor& t, int src, int tag) override {
    if (t.device().is_cpu()) return host_->recv(t, src, tag);
    check_tensor(t, "recv", "");
    KILN_CHECK(src >= 0 && src < size_, "nccl recv: source ", src,
               " must be a rank (NCCL cannot receive from any source; use the mpi backend)");
    run("recv", "from rank " + std::to_string(src), [&](cudaStream_t s) {
      ncclGroupStart();
      ncclResult_t r = ncclRecv(t.data_ptr(), t.numel() * t.element_size(), ncclUint8, src, comm_, s);
      ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
    return src;
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    announce(CollectiveKind::split, DType::uint8, 0, -1, ReduceOp::sum, "");
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
    auto host = host_->split(color, key);
    ncclComm_t nc = nullptr;
    check(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &nc, nullptr), "ncclCommSplit", rank_,
          size_);
    if (!host) return nullptr;
    return std::make_unique<NcclComm>(options_, std::move(host), device_, nc);
#else
    KILN_THROW("nccl split needs NCCL 2.18 or newer (ncclCommSplit); this kiln was built with NCCL ",
               NCCL_VERSION_CODE);
#endif
  }

 private:
  static void check(ncclResult_t r, const char* what, int rank, int size) {
    KILN_CHECK(r == ncclSuccess, "nccl ", what, " (rank ", rank, " of ", size, "): ", ncclGetErrorString(r));
  }

  void check_tensor(const Tensor& t, const char* what, const std::string& name) {
    KILN_CHECK(!broken_, "nccl ", what, " '", name, "' (rank ", rank_, "): the communicator was aborted after a timeout");
    KILN_CHECK(t.is_contiguous(), "nccl ", what, " '", name, "': the tensor must be contiguous (", t.str(), ")");
    KILN_CHECK(t.device().is_cuda() && t.device().index == device_, "nccl ", what, " '", name, "': the tensor is on ",
               t.device(), "; this communicator serves cuda:", device_, " (and CPU tensors, over MPI)");
  }

  ncclRedOp_t red_op(ReduceOp op, DType t, bool* scale) {
    switch (op) {
      case ReduceOp::sum: return ncclSum;
      case ReduceOp::max: return ncclMax;
      case ReduceOp::min: return ncclMin;
      case ReduceOp::average:
#if defined(KILN_NCCL_HAS_AVG)
        return ncclAvg;
#else
        KILN_CHECK(is_floating(t), "nccl average of ", t, " tensors needs NCCL 2.10 (ncclAvg)");
        *scale = true;
        return ncclSum;
#endif
    }
    return ncclSum;
  }

  // The signature check over the host communicator: an allgather of every rank's signature.
  void announce(CollectiveKind kind, DType dt, int64_t count, int root, ReduceOp op, const std::string& name) {
    const int64_t seq = seq_++;
    KILN_CHECK(!broken_, "nccl ", collective_name(kind), " '", name, "' (rank ", rank_,
               "): the communicator was aborted after a timeout");
    if (!options_.check || size_ == 1) return;
    Signature mine = make_signature(seq, kind, dt, count, root, op, name);
    Tensor in = empty({int64_t(sizeof(Signature))}, TensorOptions(DType::uint8));
    Tensor all = empty({int64_t(sizeof(Signature)) * size_}, TensorOptions(DType::uint8));
    std::memcpy(in.data_ptr(), &mine, sizeof(mine));
    host_->allgather(in, all, "signature #" + std::to_string(seq));
    std::vector<Signature> sigs(static_cast<size_t>(size_));
    std::memcpy(sigs.data(), all.data_ptr(), sizeof(Signature) * size_t(size_));
    std::string diff = signature_mismatch(sigs.data(), size_);
    KILN_CHECK(diff.empty(), diff);
  }

  // Enqueues `enqueue` on the current stream of the device, then waits for it: polls an event
  // and NCCL's asynchronous error with backoff; warns, then aborts the communicator and throws.
  template <class F>
  void run(const char* what, const std::string& name, F&& enqueue) {
    cuda::DeviceGuard guard(device_);
    cudaStream_t s = cuda::current_stream();
    check(enqueue(s), what, rank_, size_);
    cuda::CudaEvent done(false);
    done.record(s);
    auto start = std::chrono::steady_clock::now();
    bool warned = false;
    for (int idle = 0; !done.query(); ++idle) {
      if (idle < 100) continue;
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * idle)));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress_or_success()) {
        abort_comm();
        KILN_THROW("nccl ", what, " '", name, "' (rank ", rank_, " of ", size_, "): ", ncclGetErrorString(async));
      }
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > options_.warn_after_s && !warned) {
        warned = true;
        std::fprintf(stderr, "kiln: rank %d has waited %.0f s for nccl %s '%s'\n", rank_, waited, what, name.c_str());
      }
      if (waited > options_.timeout_s) {
        abort_comm();
        KILN_THROW("rank ", rank_, ": nccl ", what, " '", name, "' timed out after ", options_.timeout_s,
                   " s (a rank is dead, stopped, or issuing a different collective); the NCCL communicator was aborted");
      }
    }
  }

  static ncclResult_t ncclInProgress_or_success() {
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    return ncclInProgress;
#else
    return ncclSuccess;
#endif
  }

  void abort_comm() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    broken_ = true;
  }

  std::unique_ptr<Communicator> host_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
  int64_t seq_ = 0;
  bool broken_ = false;
  Tensor one_;
  NodeGroups groups_;  // hierarchical allreduce
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(CommOptions options, Device device) {
  CommOptions host_options = options;
  host_options.algorithm = AllreduceAlgorithm::library;
  const bool distributed = launched_distributed() || (mpi_available() && mpi_initialized());
  if (!distributed) {
    // One rank: the GPU the caller named (cuda:N), else the current one.
    const int dev = device.is_cuda() && device.index >= 0 ? device.index : cuda::current_device();
    return NcclComm::create(std::move(options), make_local_communicator(host_options), dev);
  }
  KILN_CHECK(mpi_available(), "nccl: launched as one of ", world_from_env().size,
             " ranks, but kiln was built without MPI, which carries NCCL's id to the other ranks");
  // One rank per GPU: the local rank picks it, whatever index the caller named.
  const int dev = cuda::device_for_local_rank();
  return NcclComm::create(std::move(options), make_mpi_communicator(host_options), dev);
}

}  // namespace kiln::dist

#endif
