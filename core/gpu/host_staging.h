// Ringlet's own collectives of device tensors between hosts
// (HOROVOD_GPU_OPERATIONS=RING where a process set's ranks span hosts): the
// data goes through page-locked host memory and the host collectives carry
// it (core/collectives/collectives.h: the ring over TCP, the window within a
// host). The allreduce and the broadcast go a chunk at a time, so that the
// device's copies of one chunk overlap the host's work on another; the other
// collectives stage their whole input, then their whole output.
//
// The runtime's loop waits for the device here (for the copies to the host),
// within the job's deadline. CUDA builds only.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "core/communicator.h"
#include "core/gpu/cuda_resources.h"
#include "core/gpu/device_collectives.h"
#include "core/gpu/device_queue.h"
#include "ringlet/types.h"

namespace ringlet::core::gpu {

// postscale * op(prescale * tensors) over comm's ranks, through the device
// fusion buffer: packed with the prescale, copied to `host` and reduced there
// chunk by chunk, copied back, unpacked with the postscale (an average's 1/n
// joined to it: kernels::ops::result_scale).
void staged_allreduce(Communicator& comm, DeviceQueue& q, PinnedMemory& host,
                      std::span<const DeviceSegment> tensors, DataType dtype, ReduceOp op,
                      double prescale, double postscale);

// `bytes` of `buffer` from `root` (a rank of comm) to every rank, in place.
void staged_broadcast(Communicator& comm, DeviceQueue& q, PinnedMemory& host, void* buffer,
                      size_t bytes, int root);

// `in_bytes` of `input` copied to the host, `run(in, out)` there on host
// memory (`in` may be changed), then `out_bytes` of `out` copied to `output`.
void staged(DeviceQueue& q, PinnedMemory& host, const void* input, size_t in_bytes, void* output,
            size_t out_bytes, const std::function<void(std::byte* in, std::byte* out)>& run);

}  // namespace ringlet::core::gpu
