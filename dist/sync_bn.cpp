// The cross-rank sum behind synchronised batch norm: an allreduce whose backward is an allreduce.
//   ctest --test-dir build -L mpi -R sync
#include "dist/sync_bn.h"

#include "engine/autograd.h"
#include "layers/norm.h"

namespace kiln::dist {
namespace {

class AllreduceSum final : public CrossReplicaSum {
 public:
  AllreduceSum(Communicator& comm, CommThread& thread) : comm_(comm), thread_(thread) {}

  Tensor operator()(const Tensor& t) override {
    Tensor out = t.detach().contiguous().clone();
    thread_.run("sync-bn statistics", [&] { comm_.allreduce(out, ReduceOp::sum, "batch-norm statistics"); });
    Communicator* comm = &comm_;
    CommThread* thread = &thread_;
    autograd::record_fn("SyncBatchNormStatsBackward", {t}, {&out}, [comm, thread](const std::vector<Tensor>& g) {
      Tensor grad = g[0].contiguous().clone();
      thread->run("sync-bn gradients", [&] { comm->allreduce(grad, ReduceOp::sum, "batch-norm statistics gradient"); });
      return std::vector<Tensor>{grad};
    });
    return out;
  }

 private:
  Communicator& comm_;
  CommThread& thread_;
};

template <class F>
void for_each_bn(Module& m, F&& f) {
  if (auto* bn = dynamic_cast<BatchNorm*>(&m)) f(*bn);
  for (auto& [name, child] : m.children()) for_each_bn(*child, f);
}

}  // namespace

int enable_sync_batch_norm(Module& model, Communicator& comm, CommThread& thread) {
  auto sum = std::make_shared<AllreduceSum>(comm, thread);
  int n = 0;
  for_each_bn(model, [&](BatchNorm& bn) {
    bn.set_cross_replica_sum(sum);
    ++n;
  });
  return n;
}

void disable_sync_batch_norm(Module& model) {
  for_each_bn(model, [](BatchNorm& bn) { bn.set_cross_replica_sum(nullptr); });
}

}  // namespace kiln::dist
