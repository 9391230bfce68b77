// Device memory for the results of the collectives whose output size only
// negotiation sets (allgather, reducescatter, alltoall): taken from a
// stream-ordered pool of the device and handed back to it when the last
// owner lets go, so that a result costs no cudaMalloc and no cudaFree (which
// waits for the whole device) once the pool holds enough. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

namespace ringlet::core::gpu {

// At least `bytes` of `device` (never null, also for none), usable in the
// order of `stream` (a stream of `device`: the collective's, which writes
// it). The collective's handle completes once its writes are done, so the
// caller may then read it on any stream. When the last owner lets go (any
// thread, at any time, even after the runtime is gone) it goes back to the
// pool in the order of the device's legacy default stream: after every read
// queued before on that stream or on any blocking stream (PyTorch's default
// stream is the legacy one). A read queued on a non-blocking stream must end
// before the last owner lets go, as PyTorch asks of its own tensors
// (Tensor.record_stream). Throws a Failure naming `rank` and the device.
std::shared_ptr<void> allocate_result(int rank, int device, size_t bytes, cudaStream_t stream);

}  // namespace ringlet::core::gpu
