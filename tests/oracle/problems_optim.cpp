// Problems of the optimizer family (engine/optim.cpp, engine/ops/optim.cpp): SGD without
// momentum, with momentum on the first and a later step, Nesterov, dampening, weight decay;
// Adam and AdamW at steps 1 and 10 with and without weight decay; LARS; the sum of squares
// (accumulated in double) and in-place scaling; the multi-tensor list of each optimizer over
// tensors that span several chunks, one of a single element, and its per-tensor sums of squares
// of the parameters and of the gradients. Sizes 1, 37 and 1000 (vector tails).
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

const int64_t kSizes[] = {37, 1000, 1};

Case<kernel_op::sgd_step> sgd_case() {
  Case<kernel_op::sgd_step> c;
  struct S {
    double momentum, dampening, wd;
    bool nesterov, first;
  };
  const S specs[] = {{0, 0, 0, false, false},     {0.9, 0, 0, false, true},   {0.9, 0, 0, false, false},
                     {0.9, 0, 0.01, true, false}, {0.9, 0.1, 0, false, false}, {0, 0, 0.01, false, false}};
  for (DType t : float_dtypes())
    for (int64_t n : kSizes)
      for (const S& s : specs) {
        SGDStepDesc d;
        d.dtype = t;
        d.n = n;
        d.lr = 0.05;
        d.momentum = s.momentum, d.dampening = s.dampening, d.weight_decay = s.wd;
        d.nesterov = s.nesterov, d.first = s.first;
        c.problems.push_back({d});
      }
  c.args = [](const SGDStepDesc& d, int) {
    return std::vector<Arg>{inout("param", d.dtype, d.n), in("grad", d.dtype, d.n),
                            d.momentum != 0 ? inout("momentum_buffer", d.dtype, d.n) : none("momentum_buffer")};
  };
  return c;
}

Case<kernel_op::adam_step> adam_case() {
  Case<kernel_op::adam_step> c;
  for (DType t : float_dtypes())
    for (int64_t n : kSizes)
      for (bool decoupled : {false, true})
        for (int64_t step : {1, 10})
          for (double wd : {0.0, 0.01}) {
            AdamStepDesc d;
            d.dtype = t;
            d.n = n;
            d.lr = 1e-2;
            d.decoupled = decoupled;
            d.step = step;
            d.weight_decay = wd;
            c.problems.push_back({d});
          }
  c.args = [](const AdamStepDesc& d, int) {
    return std::vector<Arg>{inout("param", d.dtype, d.n), in("grad", d.dtype, d.n),
                            inout("exp_avg", d.dtype, d.n, uniform(-0.1, 0.1)),
                            inout("exp_avg_sq", d.dtype, d.n, uniform(0, 0.01))};
  };
  return c;
}

Case<kernel_op::lars_step> lars_case() {
  Case<kernel_op::lars_step> c;
  for (DType t : float_dtypes())
    for (int64_t n : kSizes)
      for (double wd : {0.0, 5e-4}) {
        LarsStepDesc d;
        d.dtype = t;
        d.n = n;
        d.lr = 0.1;
        d.local_lr = 0.7;
        d.momentum = 0.9;
        d.weight_decay = wd;
        c.problems.push_back({d});
      }
  c.args = [](const LarsStepDesc& d, int) {
    return std::vector<Arg>{inout("param", d.dtype, d.n), in("grad", d.dtype, d.n), inout("momentum_buffer", d.dtype, d.n)};
  };
  return c;
}

std::vector<VecDesc> vec_problems() {
  std::vector<VecDesc> v;
  for (DType t : float_dtypes())
    for (int64_t n : kSizes) {
      VecDesc d;
      d.dtype = t;
      d.n = n;
      d.scale = 0.3;
      v.push_back(d);
    }
  return v;
}

// The multi-tensor list: three tensors of these sizes, in chunks of 16 elements.
const int64_t kList[] = {37, 1, 130};
const double kLocalLr[] = {0.5, 1.0, 1.5};
constexpr int64_t kChunk = 16;

MultiTensorDesc list_desc(MultiTensorOp op, DType t) {
  MultiTensorDesc d;
  d.op = op;
  d.dtype = t;
  d.count = 3;
  d.chunk = kChunk;
  TensorListEntry e[3];
  for (int i = 0; i < 3; ++i) e[i].n = kList[i];
  d.total_chunks = plan_tensor_list(e, 3, kChunk);
  d.sgd.lr = 0.05, d.sgd.momentum = 0.9, d.sgd.weight_decay = 0.01, d.sgd.nesterov = true;
  d.adam.lr = 1e-2, d.adam.step = 3, d.adam.weight_decay = 0.01, d.adam.decoupled = true;
  d.lars.lr = 0.1, d.lars.momentum = 0.9, d.lars.weight_decay = 5e-4;
  return d;
}

// Entries over buffers laid out as [param, grad, state0, state1] per tensor, where the
// candidate reads them.
void* entries(const std::vector<void*>& bufs, Scratch& s, int per) {
  s.entries.resize(3);
  for (size_t i = 0; i < 3; ++i) {
    TensorListEntry& e = s.entries[i];
    e.param = bufs[i * size_t(per)];
    e.grad = bufs[i * size_t(per) + 1];
    if (per > 2) e.state0 = bufs[i * size_t(per) + 2];
    if (per > 3) e.state1 = bufs[i * size_t(per) + 3];
    e.n = kList[i];
    e.local_lr = kLocalLr[i];
  }
  plan_tensor_list(s.entries.data(), 3, kChunk);
  return placed_entries(s);
}

Case<kernel_op::multi_tensor_step> multi_step_case() {
  Case<kernel_op::multi_tensor_step> c;
  for (DType t : float_dtypes())
    for (MultiTensorOp o : {MultiTensorOp::sgd, MultiTensorOp::adam, MultiTensorOp::lars}) c.problems.push_back({list_desc(o, t)});
  c.args = [](const MultiTensorDesc& d, int) {
    std::vector<Arg> a;
    for (int i = 0; i < 3; ++i) {
      const std::string k = std::to_string(i);
      a.push_back(inout("param" + k, d.dtype, kList[i]));
      a.push_back(in("grad" + k, d.dtype, kList[i]));
      a.push_back(inout("state0_" + k, d.dtype, kList[i], uniform(-0.1, 0.1)));
      a.push_back(d.op == MultiTensorOp::adam ? inout("state1_" + k, d.dtype, kList[i], uniform(0, 0.01))
                                              : none("state1_" + k));
    }
    return a;
  };
  c.kernel_args = [](const MultiTensorDesc&, int, const std::vector<void*>& bufs, Scratch& s) {
    return std::vector<void*>{entries(bufs, s, 4)};
  };
  return c;
}

Case<kernel_op::multi_tensor_sum_squares> multi_sum_squares_case() {
  Case<kernel_op::multi_tensor_sum_squares> c;
  for (DType t : float_dtypes())
    for (int of_grad : {0, 1}) c.problems.push_back({list_desc(MultiTensorOp::lars, t), of_grad, of_grad ? "of grad" : "of param"});
  c.args = [](const MultiTensorDesc& d, int) {
    std::vector<Arg> a;
    for (int i = 0; i < 3; ++i) {
      a.push_back(in("param" + std::to_string(i), d.dtype, kList[i]));
      a.push_back(in("grad" + std::to_string(i), d.dtype, kList[i]));
    }
    a.push_back(out("dst", DType::float64, 3));
    return a;
  };
  // The bool argument travels as a pointer: non-null is true (oracle.h arg_cast).
  c.kernel_args = [](const MultiTensorDesc&, int of_grad, const std::vector<void*>& bufs, Scratch& s) {
    static char yes;
    return std::vector<void*>{entries(bufs, s, 2), of_grad ? &yes : nullptr, bufs[6]};
  };
  return c;
}

}  // namespace

void add_optim(CaseMap& m) {
  add(m, sgd_case());
  add(m, adam_case());
  add(m, lars_case());
  add(m, case_over<kernel_op::sum_squares>(vec_problems(), [](const VecDesc& d) {
    return std::vector<Arg>{in("src", d.dtype, d.n), out("dst", DType::float64, 1)};
  }));
  add(m, case_over<kernel_op::scale>(vec_problems(), [](const VecDesc& d) { return std::vector<Arg>{inout("src_dst", d.dtype, d.n)}; }));
  add(m, multi_step_case());
  add(m, multi_sum_squares_case());
}

}  // namespace kiln::oracle
