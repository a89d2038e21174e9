// Communicators: the collectives data parallelism is built from, over MPI (CPU tensors; CUDA
// tensors staged through pinned host buffers unless the MPI library is CUDA-aware), NCCL (CUDA
// tensors, one rank per GPU) or a local one-rank stand-in.
//
//   dist::init();                                    // MPI_Init_thread when launched by mpirun/srun
//   auto comm = dist::make_communicator("auto");     // nccl for CUDA, mpi, or local
//   comm->allreduce(grad, dist::ReduceOp::average, "bucket 3");
//   dist::finalize();
//
// Safety. Every collective is matched across ranks before data moves: each rank announces a
// signature (sequence number, collective, name, dtype, element count, root) to every other rank,
// point to point, and a rank whose peers announce something else raises kiln::Error on every rank
// naming both sides (different collectives, shapes or dtypes: the hangs Horovod and DDP users
// hit). A rank that waits longer than CommOptions::warn_after_s logs which ranks and which
// collective it waits for; after timeout_s it raises kiln::Error naming them, and the launcher
// (kiln's main calls dist::abort) ends the job, the silent rank included.
//
// Threads: one thread at a time per communicator (the strategies funnel through dist::CommThread);
// MPI is initialised with MPI_THREAD_MULTIPLE where the library offers it, else SERIALIZED.
//   ctest --test-dir build -L mpi
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace kiln::dist {

enum class ReduceOp { sum, average, max, min };
const char* reduce_op_name(ReduceOp op);

// Where this process sits in the job, from the launcher's environment: Open MPI
// (OMPI_COMM_WORLD_*), SLURM (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE
// or SLURM_TASKS_PER_NODE), PMI/PMIx (PMI_RANK, PMI_SIZE, PMIX_RANK), MPICH/MVAPICH
// (MPI_LOCALRANKID, MV2_COMM_WORLD_*), first found; rank 0 of 1 without a launcher. Malformed
// values are a kiln::Error naming the variable.
struct World {
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string launcher = "none";  // "openmpi", "slurm", "pmi", "mvapich", "none"
};
World world_from_env();
// True when the environment says this process is one of several (size > 1).
bool launched_distributed();

// How a communicator all-reduces (--allreduce). One table (all_allreduce_algorithms) names them
// for the flag, its help, the logs and the settings a checkpoint records.
enum class AllreduceAlgorithm {
  library,       // MPI_Allreduce / ncclAllReduce
  ring,          // kiln's reduce-scatter + allgather ring over send/recv (mpi)
  hierarchical,  // within nodes, then across their leaders (NodeGroups below; mpi and nccl)
};
struct AllreduceAlgorithmInfo {
  AllreduceAlgorithm algorithm;
  const char* name;  // "library", "ring", "hierarchical"
  const char* what;  // a few words for the flag's help
};
const std::vector<AllreduceAlgorithmInfo>& all_allreduce_algorithms();
const char* allreduce_name(AllreduceAlgorithm a);
// kiln::Error naming the known ones for any other name.
AllreduceAlgorithm parse_allreduce(const std::string& name);

struct CommOptions {
  double timeout_s = 300;     // a collective not done by then: kiln::Error naming the silent ranks
  double warn_after_s = 60;   // then a line on stderr naming the ranks and the collective awaited
  bool check = true;          // match signatures across ranks before each collective
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::library;
};

constexpr int kAnySource = -1;

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "local", "mpi", "nccl"
  const CommOptions& options() const { return options_; }
  void set_options(const CommOptions& o) { options_ = o; }

  // Tensors are contiguous, on a device the backend serves, of any dtype (reductions on float32,
  // float64, float16, bfloat16, int32, int64). `name` labels errors, warnings and the timeline.
  // In place on every rank; average divides the sum by size().
  virtual void allreduce(const Tensor& t, ReduceOp op = ReduceOp::sum, const std::string& name = "") = 0;
  // In place: every rank ends with root's values.
  virtual void broadcast(const Tensor& t, int root = 0, const std::string& name = "") = 0;
  // out has size() * in.numel() elements of in's dtype; rank r's `in` lands at offset r * in.numel().
  virtual void allgather(const Tensor& in, const Tensor& out, const std::string& name = "") = 0;
  // in has size() * out.numel() elements; out = op over ranks of in's chunk number rank().
  virtual void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum,
                              const std::string& name = "") = 0;
  virtual void barrier(const std::string& name = "") = 0;
  // Point to point (tag >= 0). recv's src may be kAnySource; returns the rank it came from. The
  // received message must have t's byte size (kiln::Error otherwise).
  virtual void send(const Tensor& t, int dst, int tag) = 0;
  virtual int recv(const Tensor& t, int src, int tag) = 0;
  // The ranks that the following kAnySource receives wait for (a parameter server: the workers
  // that have not pushed this round). Used only to say who is late and whom to blame when one
  // times out, and to answer other ranks that ask whom this one waits for; {} clears it.
  virtual void expect_from(const std::vector<int>& ranks) { (void)ranks; }

  // A communicator over the ranks passing the same color, ordered by key (MPI_Comm_split); all
  // ranks call it. The new one inherits the options.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

 protected:
  explicit Communicator(CommOptions o) : options_(std::move(o)) {}
  CommOptions options_;
};

// Hierarchical all-reduce, for nodes of several ranks (Horovod's --hierarchical-allreduce): the
// ranks of a node reduce among themselves (over shared memory for MPI, NVLink/PCIe for NCCL), one
// leader per node all-reduces across nodes, and each leader broadcasts the result to its node, so
// only leaders use the network. Nodes are the ranks' host names, or blocks of KILN_RANKS_PER_NODE
// consecutive ranks (fake nodes on one machine, for tests and benchmarks).
struct NodeGroups {
  std::unique_ptr<Communicator> node;     // the ranks of this rank's node
  std::unique_ptr<Communicator> leaders;  // node leaders (local rank 0) only; null on the others
};
// Collective over `c`: every rank calls it. The groups reduce by their library (algorithm
// "library"), whatever `c` uses.
NodeGroups split_by_node(Communicator& c);
// `t` summed (or op'd) over every rank of the job the groups split. average is the caller's: sum,
// then divide by the job's size.
void hierarchical_allreduce(NodeGroups& g, const Tensor& t, ReduceOp op, const std::string& name);

// Starts MPI (MPI_Init_thread) if kiln was built with it and it is not running yet; a no-op
// otherwise. Safe to call more than once. finalize() ends it if init() started it.
void init();
void finalize();
bool mpi_available();   // built with MPI
bool mpi_initialized(); // init() ran (or the host program started MPI)
// Ends the whole job from any rank after an error: MPI_Abort when MPI runs with more than one
// rank (the launcher then kills every rank, a stopped one too), else std::exit(code).
[[noreturn]] void abort(int code);

// backend: "auto" (nccl for a CUDA device when built with NCCL, else mpi when running under a
// launcher, else local), "mpi", "nccl", "local". device: where the tensors will live.
std::unique_ptr<Communicator> make_communicator(const std::string& backend = "auto",
                                                CommOptions options = {}, Device device = {});
std::unique_ptr<Communicator> make_local_communicator(CommOptions options = {});

}  // namespace kiln::dist
