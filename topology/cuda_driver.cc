#include "ringlet/topology/cuda_driver.h"

#include <dlfcn.h>

#include <cstdio>

namespace ringlet::topology {
namespace {

// The driver API's C signatures, declared by hand (they are stable across
// driver versions) so that no CUDA header is needed to build this.
using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetPciBusId = int (*)(char*, int, int);
using CuDeviceGetUuid = int (*)(unsigned char*, int);  // a CUuuid is 16 bytes
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorNoDevice = 100;

CudaDriverDevices ask_driver() {
  CudaDriverDevices out;
  // Never closed: a driver once started stays loaded for the process (the
  // frameworks use the same one).
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    out.why_not = "libcuda.so.1 cannot be loaded";
    return out;
  }
  const auto init = reinterpret_cast<CuInit>(::dlsym(lib, "cuInit"));
  const auto count = reinterpret_cast<CuDeviceGetCount>(::dlsym(lib, "cuDeviceGetCount"));
  const auto get = reinterpret_cast<CuDeviceGet>(::dlsym(lib, "cuDeviceGet"));
  const auto bus = reinterpret_cast<CuDeviceGetPciBusId>(::dlsym(lib, "cuDeviceGetPCIBusId"));
  const auto uuid = reinterpret_cast<CuDeviceGetUuid>(::dlsym(lib, "cuDeviceGetUuid"));
  if (init == nullptr || count == nullptr || get == nullptr || bus == nullptr) {
    out.why_not = "libcuda.so.1 lacks cuInit, cuDeviceGetCount, cuDeviceGet or cuDeviceGetPCIBusId";
    return out;
  }
  if (const int err = init(0); err != kCudaSuccess) {
    // No device visible is an answer: CUDA_VISIBLE_DEVICES hid them all.
    if (err == kCudaErrorNoDevice) {
      out.devices.emplace();
    } else {
      out.why_not = "cuInit failed (CUDA error " + std::to_string(err) + ")";
    }
    return out;
  }
  int n = 0;
  if (const int err = count(&n); err != kCudaSuccess) {
    out.why_not = "cuDeviceGetCount failed (CUDA error " + std::to_string(err) + ")";
    return out;
  }
  std::vector<CudaDevice> devices;
  for (int ordinal = 0; ordinal < n; ++ordinal) {
    int device = 0;
    char id[32] = {};
    if (const int err = get(&device, ordinal); err != kCudaSuccess) {
      out.why_not = "cuDeviceGet(" + std::to_string(ordinal) + ") failed (CUDA error " +
                    std::to_string(err) + ")";
      return out;
    }
    if (const int err = bus(id, sizeof id, device); err != kCudaSuccess) {
      out.why_not = "cuDeviceGetPCIBusId(" + std::to_string(ordinal) + ") failed (CUDA error " +
                    std::to_string(err) + ")";
      return out;
    }
    CudaDevice d;
    d.bus_id = id;
    unsigned char bytes[16] = {};
    if (uuid != nullptr && uuid(bytes, device) == kCudaSuccess) d.uuid = uuid_text(bytes);
    devices.push_back(std::move(d));
  }
  out.devices = std::move(devices);
  return out;
}

}  // namespace

std::string uuid_text(std::span<const unsigned char, 16> b) {
  char s[48];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

const CudaDriverDevices& cuda_driver_devices() {
  static const CudaDriverDevices answer = ask_driver();
  return answer;
}

}  // namespace ringlet::topology
