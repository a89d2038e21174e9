// LocalComm: the one-rank communicator (rank 0 of 1). Collectives are identities or copies,
// so single-process training runs the same code path as a distributed one. Point to point has
// no peer: send and recv are errors (they could never complete).
//   ctest --test-dir build -R dist.test_local_comm
#include <cstring>

#include "dist/comm.h"
#include "dist/host_reduce.h"
#include "engine/cuda_copy.h"

namespace kiln::dist {
namespace {

void check_tensor(const Tensor& t, const char* what, const std::string& name) {
  KILN_CHECK(t.is_contiguous(), "local ", what, " '", name, "': the tensor must be contiguous (", t.str(), ")");
}

class LocalComm final : public Communicator {
 public:
  explicit LocalComm(CommOptions o) : Communicator(std::move(o)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }

  void allreduce(const Tensor& t, ReduceOp op, const std::string& name) override {
    check_tensor(t, "allreduce", name);
    KILN_CHECK(reducible(t.dtype()), "local allreduce '", name, "': cannot reduce ", t.dtype(), " tensors");
  }
  void broadcast(const Tensor& t, int root, const std::string& name) override {
    check_tensor(t, "broadcast", name);
    KILN_CHECK(root == 0, "local broadcast '", name, "': root ", root, " is not a rank of a 1-rank communicator");
  }
  void allgather(const Tensor& in, const Tensor& out, const std::string& name) override {
    copy(in, out, "allgather", name);
  }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, const std::string& name) override {
    KILN_CHECK(reducible(in.dtype()), "local reduce_scatter '", name, "': cannot reduce ", in.dtype(), " tensors");
    copy(in, out, "reduce_scatter", name);
  }
  void barrier(const std::string&) override {}
  void send(const Tensor& t, int dst, int tag) override {
    KILN_THROW("local send to rank ", dst, " (tag ", tag, "): a 1-rank communicator has no peer to receive it");
  }
  int recv(const Tensor& t, int src, int tag) override {
    KILN_THROW("local recv from rank ", src, " (tag ", tag, "): a 1-rank communicator has no peer to send it");
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    return std::make_unique<LocalComm>(options_);
  }

 private:
  static void copy(const Tensor& in, const Tensor& out, const char* what, const std::string& name) {
    check_tensor(in, what, name);
    check_tensor(out, what, name);
    KILN_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel(), "local ", what, " '", name,
               "': in ", in.str(), " and out ", out.str(), " must have the same dtype and element count");
    size_t bytes = size_t(in.numel()) * in.element_size();
    if (bytes == 0 || in.data_ptr() == out.data_ptr()) return;
    if (in.device().is_cpu() && out.device().is_cpu()) {
      std::memcpy(out.data_ptr(), in.data_ptr(), bytes);
    } else {
      cuda::copy_bytes(out.data_ptr(), out.device(), in.data_ptr(), in.device(), bytes);
    }
  }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(CommOptions options) {
  return std::make_unique<LocalComm>(std::move(options));
}

}  // namespace kiln::dist
