// What this build contains. The RINGLET_INFO_* values come from
// api/CMakeLists.txt, which knows the resolved options, so the answer does not
// depend on which layer happens to define which macro.
#include <string>

#include "ringlet/ringlet.h"

namespace ringlet {
namespace {
const char* yes_no(bool b) { return b ? "yes" : "no"; }
}  // namespace

std::string build_info() {
  std::string transports = "shm tcp";
  if (RINGLET_INFO_UCX_TRANSPORT) transports += " ucx";
  if (RINGLET_INFO_NCCL_TRANSPORT) transports += " nccl";
  std::string text;
  text += std::string("cuda: ") + yes_no(RINGLET_INFO_CUDA) + "\n";
  text += std::string("nccl: ") + yes_no(RINGLET_INFO_NCCL) + "\n";
  if (RINGLET_INFO_NCCL) text += std::string("nccl version: ") + RINGLET_INFO_NCCL_VERSION + "\n";
  text += std::string("ucx: ") + yes_no(RINGLET_INFO_UCX) + "\n";
  text += std::string("mpi: ") + yes_no(RINGLET_INFO_MPI) + "\n";
  text += std::string("python: ") + yes_no(RINGLET_INFO_PYTHON) + "\n";
  text += "transports: " + transports + "\n";
  return text;
}

}  // namespace ringlet
