// Who this process is, as the launcher told it: ringletrun (RINGLET_*),
// Open MPI's mpirun (OMPI_COMM_WORLD_*), Slurm's srun (SLURM_*) or Horovod's
// names (HOROVOD_RANK, ...). Local and cross ranks given here are hints; the
// world derives the authoritative ones from the hostnames at rendezvous.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace ringlet::core {

struct LaunchInfo {
  std::string launcher;     // "ringletrun", "mpirun", "slurm", "horovod", "single"
  int rank = 0;
  int size = 1;
  std::optional<int> local_rank;
  std::optional<int> local_size;
  std::string rendezvous;   // host:port of the store, "" when the launcher gives none
  std::string secret;       // job secret (hex): required whenever `rendezvous` is set
  std::string job_id;       // RINGLET_JOB_ID, else random per process until
                            // build_world() adopts rank 0's: names shm segments
};

// Throws ConfigError on malformed or inconsistent values (naming the variable),
// and when RINGLET_RENDEZVOUS comes without RINGLET_SECRET.
LaunchInfo detect_launch(const std::map<std::string, std::string>* env = nullptr);

}  // namespace ringlet::core
