// Builds without MPI: the MPI algorithms' stand-ins. HOROVOD_CPU_OPERATIONS=MPI
// is refused at init in such a build (core/mpi/mpi_bootstrap.cc), so no
// communicator has an MpiCommunicator and the algorithm table never picks these.
#include "core/collectives/algorithms.h"
#include "core/mpi/mpi_communicator.h"
#include "core/config.h"

namespace ringlet::core::collectives {

namespace {
[[noreturn]] void no_mpi() {
  throw ConfigError("HOROVOD_CPU_OPERATIONS=MPI: this build has no MPI (accepted: RING)");
}
}  // namespace

struct MpiCommunicator::Handles {};

MpiCommunicator::MpiCommunicator(std::unique_ptr<Handles> h) : handles_(std::move(h)) {}
MpiCommunicator::~MpiCommunicator() = default;
std::unique_ptr<MpiCommunicator> MpiCommunicator::world() { no_mpi(); }
std::unique_ptr<MpiCommunicator> MpiCommunicator::subset(std::span<const int>,
                                                         std::chrono::milliseconds) const {
  no_mpi();
}

void mpi_allreduce(Communicator&, const Segments&, ReduceOp, double, double) { no_mpi(); }
void mpi_allgather(Communicator&, const void*, void*, std::span<const size_t>, DataType) {
  no_mpi();
}
void mpi_broadcast(Communicator&, void*, size_t, DataType, int) { no_mpi(); }
void mpi_reducescatter(Communicator&, const void*, void*, std::span<const size_t>, DataType,
                       ReduceOp, double) {
  no_mpi();
}
void mpi_alltoall(Communicator&, const void*, std::span<const size_t>, void*,
                  std::span<const size_t>, DataType) {
  no_mpi();
}
void mpi_barrier(Communicator&) { no_mpi(); }

}  // namespace ringlet::core::collectives
