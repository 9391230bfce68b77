// Collectives on CUDA device memory. The runtime hands a response whose
// tensors live on a device to this interface; what serves it depends on the
// build (CUDA and NCCL found) and on HOROVOD_GPU_OPERATIONS. Where nothing
// does, device_refusal() says why, and a device tensor is refused when it is
// submitted, so that a job fails at the call rather than mid-collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/config.h"
#include "core/gpu/finalizer.h"
#include "ringlet/types.h"

namespace ringlet::core {
class Communicator;
}

namespace ringlet::core::gpu {

// Why a collective of `dtype` on a tensor of CUDA device `device` (one that
// `reduces`: allreduce, reducescatter) cannot run in this build with these
// settings; empty where it can.
std::string device_refusal(GpuOperations operations, bool reduces, DataType dtype, int device);

// The point on the producer's stream after which a submitted tensor holds
// its data (an event: core/gpu/cuda_resources.h): recorded at submission,
// waited for on the device (never on the host) before the collective reads
// the tensor.
class Event;
// Records it on `stream` (a cudaStream_t; null: the legacy default stream) of
// `device`. Throws a Failure naming `rank` and the CUDA error.
std::shared_ptr<Event> record_ready(int rank, int device, void* stream);

// One device tensor of an allreduce: in place when input == output.
struct DeviceSegment {
  const void* input;
  void* output;
  size_t count;  // elements
};

// The device collectives of one runtime: per device a stream and a fusion
// buffer, per process set a NCCL communicator or a CUDA IPC window, each made
// on first use, and the finalizer that watches what they started; released
// with the object, which first waits for everything started to end.
//
// Each call queues the collective's work on the device and returns; its
// report's `done` is called on the finalizer's thread once the results are
// on the device, or with the failure (a NCCL or CUDA error, or the deadline:
// a NCCL communicator is aborted first, and every later collective on it
// fails at once). A call that cannot queue its work throws a Failure
// instead, and the report hears nothing.
class DeviceCollectives {
 public:
  using Completion = Finalizer::Completion;
  // What the runtime hears of one collective, on the finalizer's thread:
  // `phase` (may be empty) each time the device begins one of its steps,
  // named as in the timeline (MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, ...),
  // in order; then `done`, once.
  struct Report {
    std::function<void(const char* phase)> phase;
    Completion done;
  };
  virtual ~DeviceCollectives() = default;
  // Allreduces `tensors` (one, or a fused response) of `device` over `comm`
  // (the communicator of `process_set`): each waits for its ready event, they
  // are packed into the device fusion buffer with `prescale`, reduced, and
  // scaled once by kernels::ops::result_scale(op, postscale, ranks) (kAvg: a
  // sum scaled by postscale / ranks), with the host's rounding.
  virtual void allreduce(Communicator& comm, int32_t process_set, int device,
                         std::span<const DeviceSegment> tensors,
                         std::span<const std::shared_ptr<Event>> ready, DataType dtype, ReduceOp op,
                         double prescale, double postscale, Report report) = 0;
  // Broadcasts `count` elements of `buffer` from `root` (a rank of `comm`) to
  // every rank of `comm`, in place, after `ready`.
  virtual void broadcast(Communicator& comm, int32_t process_set, int device, void* buffer,
                         size_t count, DataType dtype, int root,
                         const std::shared_ptr<Event>& ready, Report report) = 0;

  // The output of the collectives below, whose size only negotiation sets:
  // device memory of `device` holding at least `bytes` (never null, also for
  // none), from the device's pool of results (core/gpu/cuda_result_pool.h),
  // back there when its last owner lets go. The collective writes it in its
  // own stream's order and its handle completes once that is done, so the
  // caller may read it on any stream then.
  virtual std::shared_ptr<void> allocate(int device, size_t bytes) = 0;
  // Concatenates every rank's `input` into `output` in rank order: counts[r]
  // elements from rank r (of `comm`), after `ready`.
  virtual void allgather(Communicator& comm, int32_t process_set, int device, const void* input,
                         std::span<const size_t> counts, void* output, DataType dtype,
                         const std::shared_ptr<Event>& ready, Report report) = 0;
  // Reduces every rank's `input` (the sum of `counts` elements) and leaves
  // block r, counts[r] elements, in `output` on rank r: op(prescale *
  // inputs) scaled once as allreduce scales it.
  virtual void reducescatter(Communicator& comm, int32_t process_set, int device, const void* input,
                             std::span<const size_t> counts, void* output, DataType dtype,
                             ReduceOp op, double prescale, double postscale,
                             const std::shared_ptr<Event>& ready, Report report) = 0;
  // Sends send_counts[r] elements of `input` (in rank order) to rank r and
  // receives recv_counts[r] from it into `output` (in rank order);
  // `largest` is the most elements any rank sends any other, the same on
  // every rank.
  virtual void alltoall(Communicator& comm, int32_t process_set, int device, const void* input,
                        std::span<const size_t> send_counts, void* output,
                        std::span<const size_t> recv_counts, size_t largest, DataType dtype,
                        const std::shared_ptr<Event>& ready, Report report) = 0;

  // The runtime stopped on a failure (a lost peer, a timeout: an elastic
  // round ends): what was started ends now rather than at its deadline. NCCL
  // communicators are aborted (ncclCommAbort, as Horovod does in elastic
  // jobs), kernels waiting on their peers are told to leave; their reports
  // hear the failure. Runtime's loop thread; nothing waits here.
  virtual void abandon(const common::Failure& why) = 0;
  // Process set `process_set` was removed: once what was started on it has
  // ended, its NCCL communicators and CUDA IPC windows go. Loop thread.
  virtual void release_process_set(int32_t process_set) = 0;
};

// The device collectives that `config` names (HOROVOD_GPU_OPERATIONS), with
// its settings; null where this build has none (device_refusal says why).
std::unique_ptr<DeviceCollectives> make_device_collectives(int rank, const Config& config);

// Behind make_device_collectives, in builds with CUDA and NCCL: NCCL's
// (core/gpu/nccl_device_collectives.cc) and Ringlet's own over CUDA IPC
// (core/gpu/ipc_device_collectives.cc), which chooses each allreduce's
// algorithm from collectives::device_rows() and RINGLET_ALGORITHM, and
// allreduces tensors of at least RINGLET_CUDA_IPC_DIRECT_BYTES (0: none)
// between the ranks' own buffers; whether NCCL reduces `dtype`.
std::unique_ptr<DeviceCollectives> make_nccl_device_collectives(int rank);
std::unique_ptr<DeviceCollectives> make_ipc_device_collectives(int rank, const Config& config);
bool nccl_has_type(DataType dtype);

}  // namespace ringlet::core::gpu
