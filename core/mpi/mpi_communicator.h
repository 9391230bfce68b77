// The MPI communicator of a Ringlet communicator, for HOROVOD_CPU_OPERATIONS=MPI:
// the world's is a duplicate of MPI_COMM_WORLD, a process set's is made from
// the world's over the set's ranks (MPI_Comm_create_group, collective over the
// members only, as Communicator::create_subset is). Each is made once, errors
// return to the caller (MPI_ERRORS_RETURN) instead of ending the process, and
// it is freed with its owner (unless MPI is finalized by then). Ranks are the
// Ringlet communicator's: a set's members ascending give MPI's group order.
//
// No MPI header here: the algorithms (mpi_*.cc) reach MPI's objects through
// mpi_call.h.
#pragma once

#include <chrono>
#include <memory>
#include <span>

namespace ringlet::core::collectives {

class MpiCommunicator {
 public:
  // MPI must be initialized (core/mpi/mpi_bootstrap.h:
  // start_mpi_operations). Collective over MPI_COMM_WORLD.
  static std::unique_ptr<MpiCommunicator> world();
  // Over `members` (this communicator's ranks, ascending, this rank among
  // them). Collective over the members; ends the job past `timeout`
  // (mpi_watchdog.h).
  std::unique_ptr<MpiCommunicator> subset(std::span<const int> members,
                                          std::chrono::milliseconds timeout) const;
  ~MpiCommunicator();
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  struct Handles;  // MPI's objects (mpi_call.h)
  const Handles& handles() const { return *handles_; }

 private:
  explicit MpiCommunicator(std::unique_ptr<Handles> h);
  std::unique_ptr<Handles> handles_;
};

}  // namespace ringlet::core::collectives
