#include "capabilities.h"

#include <unistd.h>

#include <cstdlib>

#include "path_search.h"
#include "ringlet/topology/nic_interface.h"

namespace ringlet_topo {


std::vector<Capability> transports() {
  std::vector<Capability> out;
  const bool shm = ::access("/dev/shm", W_OK | X_OK) == 0;
  out.push_back(
      {"shm", shm, shm ? "ranks on one host, through /dev/shm" : "/dev/shm is not writable here"});
  std::string addresses;
  for (const auto& i : ringlet::topology::ipv4_interfaces()) {
    if (!i.up) continue;
    addresses +=
        (addresses.empty() ? "" : ", ") + i.name + " " + ringlet::topology::ipv4_text(i.address);
  }
  out.push_back({"tcp", !addresses.empty(),
                 addresses.empty() ? "no IPv4 interface is up" : "IPv4: " + addresses});
  // Built with UCX, the carrier runs where RINGLET_TRANSPORT=ucx names it
  // (auto runs TCP between hosts).
#if RINGLET_BUILD_UCX
  out.push_back({"ucx", true, "RINGLET_TRANSPORT=ucx"});
#else
  out.push_back({"ucx", false, "not in this build"});
#endif
  return out;
}

std::vector<Capability> launchers() {
  std::vector<Capability> out;
  out.push_back({"ringletrun", true, "ranks on this host"});
  const char* rsh = std::getenv("RINGLET_RSH");
  if (rsh != nullptr && *rsh != '\0') {
    out.push_back(
        {"ringletrun -H", true, "ranks on other hosts through RINGLET_RSH=" + std::string(rsh)});
  } else {
    const std::string ssh = ringletrun::find_on_path("ssh");
    out.push_back({"ringletrun -H", !ssh.empty(),
                   ssh.empty() ? "ssh is not on PATH (or set RINGLET_RSH, or pass --rsh)"
                               : "ranks on other hosts through " + ssh});
  }
  const std::string bootstrap = RINGLET_BUILD_MPI
                                    ? "; without RINGLET_RENDEZVOUS ranks meet through MPI"
                                    : "; this build has no MPI: ranks need RINGLET_RENDEZVOUS";
  const std::string mpirun = ringletrun::find_on_path("mpirun");
  out.push_back({"ringletrun --mpi", !mpirun.empty(),
                 mpirun.empty() ? "mpirun is not on PATH" : mpirun + bootstrap});
  const std::string srun = ringletrun::find_on_path("srun");
  out.push_back({"srun", !srun.empty(), srun.empty() ? "srun is not on PATH" : srun + bootstrap});
  return out;
}

}  // namespace ringlet_topo
