// --device cuda: the benchmarked buffers on this rank's CUDA device. The
// harness fills and checks its host buffers as for --device cpu and copies
// them to and from these around the timed op (untimed), so that the checks
// are the same code for both devices.
#pragma once

#include <cstddef>
#include <memory>

namespace ringlet::bench {

class DeviceBuffers {
 public:
  virtual ~DeviceBuffers() = default;
  virtual void* send() const = 0;
  virtual void* recv() const = 0;
  virtual int device() const = 0;
  // Host -> device before an op, device -> host after it; both finish before
  // returning.
  virtual void upload(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes) = 0;
  virtual void download(void* recv, size_t recv_bytes) = 0;
};

// Picks this rank's device (its local rank modulo the devices it sees), makes
// it current, and allocates the two buffers there. Throws std::runtime_error
// naming the CUDA error, or in a build without CUDA.
std::unique_ptr<DeviceBuffers> make_device_buffers(int local_rank, size_t send_bytes,
                                                   size_t recv_bytes);

// A device-to-device copy on the current device, finished before returning
// (an out-of-place broadcast's root, as on the host).
void device_copy(void* dst, const void* src, size_t bytes);

}  // namespace ringlet::bench
