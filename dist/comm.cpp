// The communicator entry points: MPI start and end (init, finalize, abort) and make_communicator.
//
// When does kiln start MPI? init() calls MPI_Init_thread only when the environment says this
// process is one of several (launched_distributed(): mpirun/srun set the variables world.cpp
// reads), or when a communicator with backend "mpi" or "nccl" is asked for. A plain
// `kiln train` therefore never pays for Open MPI's singleton start. MPI_THREAD_MULTIPLE is asked
// for; SERIALIZED is accepted (MpiComm then serialises its MPI calls with a mutex); less is a
// kiln::Error.
//   ctest --test-dir build -L mpi
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dist/comm.h"
#include "dist/mpi_comm.h"
#include "kernels/common/env.h"

#if defined(KILN_HAVE_NCCL)
#include "dist/nccl_comm.h"
#endif
#if defined(KILN_HAVE_MPI)
#include <mpi.h>
#endif

namespace kiln::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::average: return "average";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

Communicator::~Communicator() = default;

namespace {
bool g_started_mpi = false;  // init() started it, so finalize() ends it

#if defined(KILN_HAVE_MPI)
void start_mpi() {
  int flag = 0;
  MPI_Initialized(&flag);
  if (flag) return;
  // KILN_MPI_THREAD_LEVEL=serialized asks for less (to test the serialised path).
  const std::string level = env_choice("KILN_MPI_THREAD_LEVEL", {"serialized", "multiple"});
  int wanted = level == "serialized" ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, wanted, &provided);
  KILN_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed (error ", rc, ")");
  g_started_mpi = true;
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    g_started_mpi = false;
    KILN_THROW("the MPI library offers thread level ", provided,
               "; kiln needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE");
  }
  detail::set_mpi_serialized(provided < MPI_THREAD_MULTIPLE);
}
#endif
}  // namespace

void init() {
#if defined(KILN_HAVE_MPI)
  if (launched_distributed()) start_mpi();
#endif
}

namespace detail {
void init_mpi_now() {
#if defined(KILN_HAVE_MPI)
  start_mpi();
#else
  KILN_THROW("kiln was built without MPI (cmake found no MPI library; KILN_WITH_MPI)");
#endif
}
}  // namespace detail

void finalize() {
#if defined(KILN_HAVE_MPI)
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) return;
  detail::release_mpi_ops();
  if (g_started_mpi) {
    MPI_Finalize();
    g_started_mpi = false;
  }
#endif
}

bool mpi_available() {
#if defined(KILN_HAVE_MPI)
  return true;
#else
  return false;
#endif
}

bool mpi_initialized() {
#if defined(KILN_HAVE_MPI)
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
#else
  return false;
#endif
}

void abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#if defined(KILN_HAVE_MPI)
  if (mpi_initialized()) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  }
#endif
  std::exit(code);
}

namespace {

// The node of each rank, named by its first rank: KILN_RANKS_PER_NODE's blocks, else host names
// (allgathered over `c`).
int node_color(Communicator& c) {
  if (const char* e = std::getenv("KILN_RANKS_PER_NODE")) {
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    KILN_CHECK(end != e && *end == 0 && v >= 1 && v <= c.size(), "KILN_RANKS_PER_NODE='", e,
               "': ranks per (fake) node must be a whole number in [1, ", c.size(), "]");
    return c.rank() / int(v) * int(v);
  }
  constexpr int64_t kHost = 256;
  Tensor mine = zeros({kHost}, TensorOptions(DType::uint8));
  Tensor all = empty({kHost * c.size()}, TensorOptions(DType::uint8));
  gethostname(static_cast<char*>(mine.data_ptr()), size_t(kHost - 1));
  c.allgather(mine, all, "host names");
  const char* names = static_cast<const char*>(all.data_ptr());
  for (int r = 0; r < c.size(); ++r)
    if (std::strncmp(names + r * kHost, static_cast<const char*>(mine.data_ptr()), size_t(kHost)) == 0) return r;
  return c.rank();
}

}  // namespace

const std::vector<AllreduceAlgorithmInfo>& all_allreduce_algorithms() {
  static const std::vector<AllreduceAlgorithmInfo> table = {
      {AllreduceAlgorithm::library, "library", "MPI/NCCL's own"},
      {AllreduceAlgorithm::ring, "ring", "kiln's"},
      {AllreduceAlgorithm::hierarchical, "hierarchical", "within nodes, then across their leaders"},
  };
  return table;
}

const char* allreduce_name(AllreduceAlgorithm a) {
  for (const AllreduceAlgorithmInfo& i : all_allreduce_algorithms())
    if (i.algorithm == a) return i.name;
  KILN_THROW("allreduce_name: algorithm ", int(a), " is not in the table");
}

AllreduceAlgorithm parse_allreduce(const std::string& name) {
  std::string known;
  for (const AllreduceAlgorithmInfo& i : all_allreduce_algorithms()) {
    if (name == i.name) return i.algorithm;
    known += (known.empty() ? "'" : ", '") + std::string(i.name) + "'";
  }
  KILN_THROW("--allreduce: ", known, ", not '", name, "'");
}

NodeGroups split_by_node(Communicator& c) {
  const int node = node_color(c);
  // The groups reduce by their library: split() hands them the options of `c` at the time.
  const CommOptions saved = c.options();
  CommOptions library = saved;
  library.algorithm = AllreduceAlgorithm::library;
  c.set_options(library);
  NodeGroups g;
  try {
    g.node = c.split(node, c.rank());
    g.leaders = c.split(g.node->rank() == 0 ? 0 : -1, c.rank());
  } catch (...) {
    c.set_options(saved);
    throw;
  }
  c.set_options(saved);
  return g;
}

void hierarchical_allreduce(NodeGroups& g, const Tensor& t, ReduceOp op, const std::string& name) {
  KILN_CHECK(g.node, "hierarchical allreduce '", name, "': no node groups (split_by_node first)");
  KILN_CHECK(op != ReduceOp::average, "hierarchical allreduce '", name,
             "': average is the caller's (sum, then divide by the job's size)");
  g.node->allreduce(t, op, name + " (node)");
  if (g.leaders && g.leaders->size() > 1) g.leaders->allreduce(t, op, name + " (leaders)");
  g.node->broadcast(t, 0, name + " (node broadcast)");
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend, CommOptions options,
                                                Device device) {
  KILN_CHECK(options.timeout_s > 0 && options.warn_after_s > 0,
             "communicator timeout_s and warn_after_s must be positive");
  std::string b = backend;
  if (b == "auto") {
    bool distributed = launched_distributed() || (mpi_initialized() && mpi_available());
#if defined(KILN_HAVE_NCCL) && defined(KILN_HAVE_MPI)
    if (device.is_cuda() && distributed) b = "nccl";
    else
#endif
    KILN_CHECK(!distributed || mpi_available(), "launched as one of ", world_from_env().size,
               " ranks, but kiln was built without MPI: every rank would train alone (rebuild with MPI, or run one process)");
    b = distributed ? "mpi" : "local";
  }
  if (b == "local") return make_local_communicator(std::move(options));
  if (b == "mpi") return make_mpi_communicator(std::move(options));
  if (b == "nccl") {
#if defined(KILN_HAVE_NCCL)
    return make_nccl_communicator(std::move(options), device);
#else
    KILN_THROW("communicator backend nccl: kiln was built without NCCL");
#endif
  }
  KILN_THROW("communicator backend '", backend, "' is unknown (auto, mpi, nccl, local)");
}

}  // namespace kiln::dist
