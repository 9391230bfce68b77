// The baseline: the same harness through MPI's own collectives (allreduce,
// allgatherv, bcast, reduce_scatter, alltoallv), so that the numbers compare
// Ringlet with what the job would get from the MPI it already runs under.
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend.h"
#include "ringlet/common/failure.h"

#ifdef RINGLET_BENCH_MPI
// Only MPI's C API: its deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace ringlet::bench {

#ifndef RINGLET_BENCH_MPI

std::unique_ptr<Backend> make_mpi_backend(const Options&) {
  throw std::runtime_error("--backend mpi: this ringlet-bench was built without MPI");
}
MpiRuntime::MpiRuntime(bool needed) {
  if (needed) throw std::runtime_error("--backend mpi: this ringlet-bench was built without MPI");
}
MpiRuntime::~MpiRuntime() = default;

#else

namespace {

void check_mpi(int code, const char* call, int rank) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  // Reads "rank R: <call> failed: <MPI's text>" like every failure of ours.
  throw common::Failure(common::FailureKind::kInternal, rank, -1,
                        std::string(call) + " failed: " + text);
}

MPI_Datatype mpi_type(DataType t) {
  switch (t) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kInt8: return MPI_INT8_T;
    case DataType::kUInt8: return MPI_UINT8_T;
    case DataType::kInt16: return MPI_INT16_T;
    case DataType::kUInt16: return MPI_UINT16_T;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kFloat16:
    case DataType::kBFloat16: break;
  }
  throw std::invalid_argument("--backend mpi: MPI has no half type (-d " + std::string(to_string(t)) +
                              "); use float, double or an integer type");
}

// avg is a sum followed by the scaling by 1/n (see check.h's divide_by).
MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
  }
  return MPI_SUM;
}

class MpiBackend : public Backend {
 public:
  explicit MpiBackend(const Options& options) {
    mpi_type(options.dtype);  // refuse half types before any op runs
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank", -1);
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size", rank_);
  }

  std::string_view name() const override { return "mpi"; }
  std::string_view impl() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void run(const Case& c, const OpBuffers& b, const void* send_buf) override {
    // MPI counts are ints; the bench's sizes stay far below, but say so if not.
    if (c.layout.inplace_elems() > static_cast<size_t>(INT_MAX)) {
      throw std::invalid_argument("--backend mpi: " + std::to_string(c.layout.inplace_elems()) +
                                  " elements exceed MPI's int counts");
    }
    const int count = static_cast<int>(c.layout.count);
    if (counts_.size() != static_cast<size_t>(size_) || counts_[0] != count) set_counts(count);
    const MPI_Datatype type = mpi_type(c.dtype);
    const void* send = c.in_place ? MPI_IN_PLACE : b.send;
    switch (c.collective) {
      case Collective::kAllreduce:
        check_mpi(MPI_Allreduce(send, b.recv, count, type, mpi_op(c.op), MPI_COMM_WORLD),
                  "MPI_Allreduce", rank_);
        if (c.op == ReduceOp::kAvg) divide_by(c.dtype, b.recv, c.layout.count, size_);
        break;
      case Collective::kAllgather:
        check_mpi(MPI_Allgatherv(send, count, type, b.recv, counts_.data(), displs_.data(), type,
                                 MPI_COMM_WORLD),
                  "MPI_Allgatherv", rank_);
        break;
      case Collective::kBroadcast:
        if (!c.in_place && c.rank == c.root) {
          std::memcpy(b.recv, send_buf, c.layout.count * dtype_size(c.dtype));
        }
        check_mpi(MPI_Bcast(b.recv, count, type, c.root, MPI_COMM_WORLD), "MPI_Bcast", rank_);
        break;
      case Collective::kReducescatter:
        check_mpi(MPI_Reduce_scatter(send, b.recv, counts_.data(), type, mpi_op(c.op), MPI_COMM_WORLD),
                  "MPI_Reduce_scatter", rank_);
        if (c.op == ReduceOp::kAvg) divide_by(c.dtype, b.recv, c.layout.count, size_);
        break;
      case Collective::kAlltoall:
        check_mpi(MPI_Alltoallv(send, counts_.data(), displs_.data(), type, b.recv, counts_.data(),
                                displs_.data(), type, MPI_COMM_WORLD),
                  "MPI_Alltoallv", rank_);
        break;
    }
  }

  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", rank_); }

  void combine(std::span<double> values, Combine how) override {
    MPI_Op op = how == Combine::kSum ? MPI_SUM : how == Combine::kMin ? MPI_MIN : MPI_MAX;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                            op, MPI_COMM_WORLD),
              "MPI_Allreduce(times)", rank_);
  }

  std::vector<std::string> gather_strings(const std::string& mine, size_t width) override {
    std::vector<char> in(width, '\0'), out(width * static_cast<size_t>(size_), '\0');
    std::memcpy(in.data(), mine.data(), std::min(mine.size(), width - 1));
    check_mpi(MPI_Allgather(in.data(), static_cast<int>(width), MPI_CHAR, out.data(),
                            static_cast<int>(width), MPI_CHAR, MPI_COMM_WORLD),
              "MPI_Allgather(hosts)", rank_);
    std::vector<std::string> all;
    for (int r = 0; r < size_; ++r) all.emplace_back(out.data() + r * width);
    return all;
  }

 private:
  void set_counts(int count) {
    counts_.assign(static_cast<size_t>(size_), count);
    displs_.resize(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) displs_[r] = r * count;
  }

  int rank_ = 0;
  int size_ = 1;
  std::vector<int> counts_, displs_;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const Options& options) {
  return std::make_unique<MpiBackend>(options);
}

MpiRuntime::MpiRuntime(bool needed) {
  if (!needed) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  // SERIALIZED, not FUNNELED: with HOROVOD_CPU_OPERATIONS=MPI the other
  // backend's runtime makes MPI calls from its own thread (and init() refuses less).
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread", -1);
  owned_ = true;
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  if (owned_ && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
}

#endif

}  // namespace ringlet::bench
