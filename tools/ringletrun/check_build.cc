#include "check_build.h"

#ifndef RINGLET_BUILD_CUDA
#error "RINGLET_BUILD_* must come from tools/ringletrun/CMakeLists.txt"
#endif

namespace ringletrun {
namespace {

void item(std::string& out, bool on, std::string_view name) {
  out += on ? "    [X] " : "    [ ] ";
  out += name;
  out += '\n';
}

}  // namespace

BuildFeatures built_features() {
  BuildFeatures f;
  f.cuda = RINGLET_BUILD_CUDA;
  f.nccl = RINGLET_BUILD_NCCL;
  f.ucx = RINGLET_BUILD_UCX;
  f.mpi = RINGLET_BUILD_MPI;
  f.python = RINGLET_BUILD_PYTHON;
  return f;
}

std::string_view built_version() { return RINGLET_VERSION; }

std::string format_check_build(const BuildFeatures& f, std::string_view version) {
  std::string out = "Ringlet v" + std::string(version) + ":\n\n";
  // The framework bindings are not built yet, whatever Python was found.
  out += "Available Frameworks:\n";
  item(out, false, "TensorFlow");
  item(out, false, "PyTorch");
  item(out, false, "Keras");
  out += "\nAvailable Controllers:\n";
  item(out, true, "Ringlet store (TCP)");
  item(out, f.mpi, "MPI");
  out += "\nAvailable Tensor Operations:\n";
  item(out, true, "Ringlet ring (CPU)");
  item(out, f.cuda, "Ringlet ring (CUDA)");
  item(out, f.nccl, "NCCL");
  item(out, f.mpi, "MPI");
  out += "\nAvailable Transports:\n";
  out += "    [X] shm  [X] tcp  ";
  out += f.ucx ? "[X] ucx\n" : "[ ] ucx\n";
  return out;
}

}  // namespace ringletrun
