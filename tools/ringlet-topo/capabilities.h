// What this build and this machine can run a job with: the transports
// (shm, tcp, ucx) and the launchers (ringletrun on this host, through ssh or
// RINGLET_RSH, mpirun, srun).
#pragma once

#include <string>
#include <vector>

namespace ringlet_topo {

struct Capability {
  std::string name;
  bool usable = false;
  std::string detail;  // why, or why not
};

std::vector<Capability> transports();
std::vector<Capability> launchers();

}  // namespace ringlet_topo
