// Internal to dist/: what a rank announces before a collective (a fixed-size POD sent as bytes)
// and the comparison every rank makes of everyone's announcements. Shared by MpiComm (point-to-
// point exchange on its control communicator) and NcclComm (an allgather over MPI).
//   ctest --test-dir build -R mpi.test_mismatch
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "dist/comm.h"

namespace kiln::dist {

enum class CollectiveKind : int32_t { allreduce = 1, broadcast, allgather, reduce_scatter, barrier, split };
const char* collective_name(CollectiveKind k);

struct Signature {
  int64_t seq = 0;
  int64_t count = 0;   // elements per rank (allgather: in; reduce_scatter: out)
  int32_t kind = 0;    // CollectiveKind
  int32_t dtype = 0;   // DType
  int32_t root = -1;   // broadcast only
  int32_t op = -1;     // ReduceOp for allreduce and reduce_scatter
  char name[40] = {};  // truncated, NUL-padded
  bool operator==(const Signature& o) const {
    return seq == o.seq && count == o.count && kind == o.kind && dtype == o.dtype && root == o.root &&
           op == o.op && std::memcmp(name, o.name, sizeof(name)) == 0;
  }
};

Signature make_signature(int64_t seq, CollectiveKind kind, DType dtype, int64_t count, int root, ReduceOp op,
                         const std::string& name);
// "allreduce(sum) 'fc.weight' float32[1000]", "broadcast 'x' int64[3] from root 1", "barrier 'b'".
std::string describe(const Signature& s);
// "" when all `n` signatures agree, else "collective mismatch at #12: rank 0 calls ... but rank 1
// calls ...": every rank compares everyone against rank 0, so every rank builds the same message.
std::string signature_mismatch(const Signature* sigs, int n);

}  // namespace kiln::dist
