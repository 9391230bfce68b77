#include "check_build.h"

#include <dlfcn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

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
  f.tensorflow_ops = RINGLET_BUILD_TENSORFLOW;
  f.nccl_version = RINGLET_BUILD_NCCL_VERSION;
  f.cuda_architectures = RINGLET_BUILD_CUDA_ARCHITECTURES;
  return f;
}

std::string_view built_version() { return RINGLET_VERSION; }

bool python_has_module(const std::string& module) {
  const std::string command =
      "python3 -c 'import importlib.util, sys; sys.exit(0 if "
      "importlib.util.find_spec(\"" +
      module + "\") else 1)' 2>/dev/null";
  const int status = std::system(command.c_str());
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void count_cuda_devices(BuildFeatures& f) {
  f.cuda_devices = 0;
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    f.cuda_devices_note = "no CUDA driver (libcuda.so.1 cannot be loaded)";
    return;
  }
  // cuInit and cuDeviceGetCount, declared by hand: their C signatures are
  // stable across every driver version.
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  auto init = reinterpret_cast<Init>(::dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<Count>(::dlsym(driver, "cuDeviceGetCount"));
  int n = 0;
  if (init == nullptr || count == nullptr) {
    f.cuda_devices_note = "the CUDA driver lacks cuInit or cuDeviceGetCount";
  } else if (const int err = init(0); err != 0) {
    f.cuda_devices_note = "the CUDA driver did not start (cuInit error " + std::to_string(err) + ")";
  } else if (const int err2 = count(&n); err2 != 0) {
    f.cuda_devices_note = "cuDeviceGetCount error " + std::to_string(err2);
  } else {
    f.cuda_devices = n;
  }
  ::dlclose(driver);
}

std::string format_check_build(const BuildFeatures& f, std::string_view version) {
  // [X] only for what a job of this build can run today. A library found at
  // build time whose path is not served yet (the collectives refuse it at
  // init or at the call) is listed unmarked and says so, so that nobody
  // plans a job on it.
  auto unserved = [](bool found, std::string_view name) {
    std::string text(name);
    if (found) text += " (found at build time; not served yet)";
    return text;
  };
  std::string out = "Ringlet v" + std::string(version) + ":\n\n";
  // Each framework module needs the Python binding and its framework.
  out += "Available Frameworks:\n";
  auto framework = [&](bool importable, std::string name, std::string_view install) {
    if (!f.python)
      name += " (this build has no Python binding)";
    else if (!importable)
      name += " (python3 cannot import it: pip install " + std::string(install) + ")";
    return name;
  };
  std::string tensorflow = framework(f.tensorflow, "TensorFlow", "tensorflow tf-keras");
  if (f.python && f.tensorflow && !f.tensorflow_ops)
    tensorflow += " (built without its op library: collectives run as py_function ops)";
  item(out, f.python && f.tensorflow, tensorflow);
  item(out, f.python && f.torch, framework(f.torch, "PyTorch", "torch"));
  item(out, f.python && f.tensorflow && f.tf_keras,
       framework(f.tensorflow && f.tf_keras, "Keras (tf-keras)", "tensorflow tf-keras"));
  item(out, false, "MXNet (no wheel for this Python)");
  out += "\nAvailable Controllers:\n";
  item(out, true, "Ringlet store (TCP)");
  // Under mpirun the ranks meet through MPI (core/mpi/mpi_bootstrap).
  item(out, f.mpi, "MPI");
  out += "\nAvailable Tensor Operations:\n";
  item(out, true, "Ringlet ring (CPU)");
  // Where both CUDA and NCCL were built in, HOROVOD_GPU_OPERATIONS=RING
  // serves every collective of device tensors (core/gpu: over CUDA IPC within
  // a host, staged through host memory between hosts), and NCCL every one
  // but the reductions of int16 and uint16, for which NCCL has no type
  // (device_refusal). Where MPI was built in, HOROVOD_CPU_OPERATIONS=MPI runs
  // the host collectives of a job that mpirun started.
  if (f.cuda && f.nccl) {
    item(out, true,
         "Ringlet ring (CUDA IPC within a host, staged through host memory between hosts: "
         "every collective of device tensors)");
    item(out, true, "NCCL (every collective of device tensors but int16/uint16 reductions)");
  } else {
    item(out, false, unserved(f.cuda, "Ringlet ring (CUDA)"));
    item(out, false, unserved(f.nccl, "NCCL"));
  }
  item(out, f.mpi, f.mpi ? "MPI (host collectives, HOROVOD_CPU_OPERATIONS=MPI under mpirun)" : "MPI");
  // What HOROVOD_GPU_OPERATIONS could choose from: how the kernels were
  // built, NCCL's version, and the devices of this machine.
  if (f.cuda) {
    out += "\nGPU:\n";
    out += "    CUDA kernels for architectures " + f.cuda_architectures + "\n";
    out += f.nccl ? "    NCCL " + f.nccl_version + " at build time\n" : "    NCCL not found at build time\n";
    if (f.cuda_devices > 0) {
      out += "    this machine: " + std::to_string(f.cuda_devices) + " CUDA device" +
             (f.cuda_devices == 1 ? "" : "s") + "\n";
    } else {
      out += "    this machine: no CUDA device" +
             (f.cuda_devices_note.empty() ? std::string() : " (" + f.cuda_devices_note + ")") + "\n";
    }
  }
  out += "\nAvailable Transports:\n";
  out += "    [X] shm  [X] tcp  ";
  // The UCX carrier is built wherever UCX was found and runs where
  // RINGLET_TRANSPORT=ucx names it (auto runs TCP between hosts: UCX's tcp
  // transport is slower than Ringlet's own links over Ethernet, see
  // core/communicator.cc); without it RINGLET_TRANSPORT=ucx is refused.
  out += f.ucx ? "[X] ucx\n" : "[ ] ucx\n";
  // How ranks can be started from here (what is on PATH now).
  out += "\nAvailable Launchers:\n";
  item(out, true, "ringletrun (this host)");
  item(out, f.ssh, std::string("ringletrun -H over ssh") + (f.ssh ? "" : " (no ssh on PATH; --rsh names another)"));
  item(out, f.srun, std::string("srun (Slurm)") + (f.srun ? "" : " (not on PATH)"));
  item(out, f.mpirun, std::string("mpirun (--mpi)") + (f.mpirun ? "" : " (not on PATH)"));
  return out;
}

}  // namespace ringletrun
