// `ringletrun --check-build`: what this build of Ringlet can run, printed the
// way `horovodrun --check-build` prints it so that scripts and eyes that know
// one read the other. ringletrun does not link the library, so the features
// come from the same CMake variables that decided what the library was built
// with, as compile definitions of ringletrun.
#pragma once

#include <string>
#include <string_view>

namespace ringletrun {

struct BuildFeatures {
  bool cuda = false;
  bool nccl = false;
  bool ucx = false;
  bool mpi = false;
  bool python = false;
  bool tensorflow_ops = false;  // ringlet.tensorflow's op library
  std::string nccl_version;        // of nccl.h at build time; empty without NCCL
  std::string cuda_architectures;  // what the CUDA kernels were compiled for
  // Frameworks importable by the python3 the ranks would run (found at run
  // time: they are installed apart from Ringlet).
  bool torch = false;
  bool tensorflow = false;
  bool tf_keras = false;
  // This machine's CUDA devices as the driver counts them, or why none could
  // be counted (found at run time).
  int cuda_devices = 0;
  std::string cuda_devices_note;
  // The launchers found on PATH here (run time): ssh reaches other hosts,
  // srun an allocation's nodes, mpirun serves --mpi.
  bool ssh = false;
  bool srun = false;
  bool mpirun = false;
};

// Counts the CUDA devices through the driver, loaded with dlopen so that
// ringletrun links no CUDA library; fills cuda_devices and cuda_devices_note.
void count_cuda_devices(BuildFeatures& f);

// Whether `python3` on PATH can import `module` (without importing it).
bool python_has_module(const std::string& module);

// The features this binary was configured with.
BuildFeatures built_features();
std::string_view built_version();

std::string format_check_build(const BuildFeatures& f, std::string_view version);

}  // namespace ringletrun
