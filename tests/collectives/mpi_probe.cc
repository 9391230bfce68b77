// HOROVOD_CPU_OPERATIONS=MPI where things go wrong, one scenario per run under
// mpirun (tests/collectives/CMakeLists.txt checks the exit status and output):
//   error     ranks disagree on a broadcast's count: MPI reports the truncation,
//             and the receiving ranks fail with a failure naming the rank, the
//             collective and MPI's words; prints "mpi_probe rank R: failed: ..."
//   funneled  the program initializes MPI itself with MPI_THREAD_FUNNELED:
//             init refuses, naming the level and what is needed
//   late      rank 1 reaches a barrier 5 s after the others, with
//             RINGLET_TIMEOUT_SECONDS=1: the watchdog ends the job
//   die       rank 1 is killed between allreduces: mpirun ends the job
// Anything unexpected prints "mpi_probe rank R: unexpected: ...".
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/mpi/mpi_bootstrap.h"
#include "core/collectives/collectives.h"
#include "core/communicator.h"
#include "core/config.h"

namespace {

using ringlet::core::Communicator;

std::unique_ptr<Communicator> communicator() {
  ringlet::core::LaunchInfo launch = ringlet::core::detect_launch();
  if (ringlet::core::needs_mpi_bootstrap(launch)) ringlet::core::complete_launch_with_mpi(launch);
  return Communicator::create(ringlet::core::load_config(), launch);
}

int unexpected(int rank, const std::string& what) {
  std::fprintf(stderr, "mpi_probe rank %d: unexpected: %s\n", rank, what.c_str());
  return 1;
}

int error_scenario() {
  auto comm = communicator();
  const int me = comm->rank();
  std::vector<float> buf(64, 1.0f);
  try {
    ringlet::core::broadcast(*comm, buf.data(), me == 0 ? 64 : 16, ringlet::DataType::kFloat32, 0);
    if (me != 0) return unexpected(me, "a truncated broadcast succeeded");
  } catch (const ringlet::common::Failure& f) {
    if (me == 0) return unexpected(me, std::string("the root failed: ") + f.what());
    std::fprintf(stderr, "mpi_probe rank %d: failed: %s\n", me, f.what());
  }
  return 0;
}

int funneled_scenario() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    auto comm = communicator();
    rc = unexpected(rank, "init accepted MPI initialized with MPI_THREAD_FUNNELED");
  } catch (const ringlet::core::ConfigError& e) {
    std::fprintf(stderr, "mpi_probe rank %d: refused: %s\n", rank, e.what());
  }
  MPI_Finalize();
  return rc;
}

int late_scenario() {
  auto comm = communicator();
  if (comm->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(5));
  ringlet::core::barrier(*comm);
  return unexpected(comm->rank(), "the barrier returned although rank 1 was 5 s late");
}

int die_scenario() {
  auto comm = communicator();
  std::vector<int32_t> v(1024, 1);
  for (int i = 0; i < 1000; ++i) {
    if (i == 20 && comm->rank() == 1) ::raise(SIGKILL);
    ringlet::core::allreduce(*comm, v.data(), v.data(), v.size(), ringlet::DataType::kInt32,
                             ringlet::ReduceOp::kMax);
  }
  return unexpected(comm->rank(), "1000 allreduces ran although rank 1 was killed");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "error") return error_scenario();
    if (mode == "funneled") return funneled_scenario();
    if (mode == "late") return late_scenario();
    if (mode == "die") return die_scenario();
  } catch (const std::exception& e) {
    return unexpected(-1, e.what());
  }
  std::fprintf(stderr, "usage: mpi_probe error|funneled|late|die\n");
  return 2;
}
