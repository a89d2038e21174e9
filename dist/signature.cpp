// Collective signatures: building, describing and comparing them (see signature.h).
//   ctest --test-dir build -R mpi.test_mismatch
#include "dist/signature.h"

namespace kiln::dist {

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::allreduce: return "allreduce";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::allgather: return "allgather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::barrier: return "barrier";
    case CollectiveKind::split: return "split";
  }
  return "?";
}

Signature make_signature(int64_t seq, CollectiveKind kind, DType dtype, int64_t count, int root, ReduceOp op,
                         const std::string& name) {
  Signature s;
  s.seq = seq;
  s.count = count;
  s.kind = int32_t(kind);
  s.dtype = int32_t(dtype);
  s.root = kind == CollectiveKind::broadcast ? root : -1;
  s.op = (kind == CollectiveKind::allreduce || kind == CollectiveKind::reduce_scatter) ? int32_t(op) : -1;
  std::strncpy(s.name, name.c_str(), sizeof(s.name) - 1);
  return s;
}

std::string describe(const Signature& s) {
  auto k = CollectiveKind(s.kind);
  std::string d = collective_name(k);
  if (k == CollectiveKind::allreduce || k == CollectiveKind::reduce_scatter)
    d += std::string("(") + reduce_op_name(ReduceOp(s.op)) + ")";
  d += " '" + std::string(s.name, strnlen(s.name, sizeof(s.name))) + "'";
  if (k != CollectiveKind::barrier && k != CollectiveKind::split)
    d += std::string(" ") + dtype_name(DType(s.dtype)) + "[" + std::to_string(s.count) + "]";
  if (k == CollectiveKind::broadcast) d += " from root " + std::to_string(s.root);
  return d;
}

std::string signature_mismatch(const Signature* sigs, int n) {
  std::string diff;
  for (int p = 1; p < n; ++p) {
    if (sigs[p] == sigs[0]) continue;
    diff += (diff.empty() ? " but rank " : ", rank ") + std::to_string(p) + " calls " + describe(sigs[p]);
    if (sigs[p].seq != sigs[0].seq) diff += " (its #" + std::to_string(sigs[p].seq) + ")";
  }
  if (diff.empty()) return "";
  return "collective mismatch at #" + std::to_string(sigs[0].seq) + ": rank 0 calls " + describe(sigs[0]) + diff;
}

}  // namespace kiln::dist
