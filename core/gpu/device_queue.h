// What every device collective of one device works with: the runtime's own
// stream of that device, its device fusion buffer, and the tables that tell
// the batched kernels where tensors and peers' buffers are. Made on first use
// of a device and kept until the device collectives go. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu/cuda_resources.h"
#include "core/gpu/device_collectives.h"
#include "core/gpu/finalizer.h"
#include "ringlet/kernels/cuda.h"
#include "ringlet/transport/transport.h"
#include "ringlet/types.h"

namespace ringlet::core::gpu {

// `bytes` into a buffer.
inline std::byte* byte_at(void* base, size_t bytes) {
  return static_cast<std::byte*>(base) + bytes;
}
inline const std::byte* byte_at(const void* base, size_t bytes) {
  return static_cast<const std::byte*>(base) + bytes;
}

struct DeviceQueue {
  DeviceQueue(int rank, int device)
      : rank(rank),
        device(device),
        stream(rank, device),
        fusion(stream.get()),
        segments(stream.get()),
        pointers(stream.get()) {}

  // Throws a Failure naming this rank, the device and `what` unless `err`
  // is cudaSuccess.
  void check(cudaError_t err, const char* what) const { check_cuda(err, rank, device, what); }
  // A collective begins, with `deadline` for what it waits for: no marks
  // yet (and none at all unless `marking`: someone listens to its steps),
  // and the stream waits, on the device, for each of its tensors' producers
  // (null: none).
  void begin(std::span<const std::shared_ptr<Event>> ready, transport::Deadline deadline,
             bool marking);

  // Copies segment_table to `segments` and pointer_table to `pointers` in
  // the stream's order, through page-locked memory so that the copy never
  // waits for the stream: each of a few slots is written again once the
  // device has copied from it (waited for within the deadline).
  void upload_tables();
  const kernels::cuda::FusedSegment* segment(size_t i) const {
    return segments.as<kernels::cuda::FusedSegment>() + i;
  }
  const void* const* pointer(size_t i) const { return pointers.as<const void*>() + i; }
  // The same table read as outputs (reduce_many_to_all's).
  void* const* output_pointer(size_t i) const { return pointers.as<void*>() + i; }

  // The tables of a fused message of `tensors` (slots on 16 bytes,
  // round_plan.h): segment i packs tensor i's input, segment n + i unpacks
  // into its output. Returns the message's extent in elements.
  size_t fuse(std::span<const DeviceSegment> tensors, size_t element_bytes);

  // dst = factor * src, `count` elements (a one-segment pack; it replaces
  // the tables).
  void scaled_copy(DataType dtype, void* dst, const void* src, size_t count, double factor);
  // Copies `bytes` in the stream's order, between any of device, peer
  // (IPC) and page-locked host memory (none for no bytes); `what` names the
  // copy in the error ("cudaMemcpyAsync <what> failed: ...").
  void copy(void* dst, const void* src, size_t bytes, const char* what);
  // The result's one scale, in place: the postscale, with an average's 1/n
  // joined to it (kernels::ops::result_scale, as on the host).
  void finish(DataType dtype, ReduceOp op, void* buf, size_t count, int ranks, double postscale);

  // A point on the stream after the work queued so far (an event from the
  // pool, recorded).
  std::shared_ptr<Event> record();
  // Waits on the host, within the deadline, for the work queued so far to
  // end (a Failure naming `what` past it).
  void wait_for_queued(const char* what) { wait_on_host(*record(), what); }

  // Step `phase` (a name with static storage) begins here on the stream:
  // the collective's report hears it once the device gets there (where
  // nobody listens, nothing is recorded: an event less per step).
  void mark(const char* phase);
  // Waits, within the deadline and without throwing, for the work queued so
  // far to end: a collective that fails halfway leaves no kernel running on
  // the tensors whose handles are about to fail.
  void settle() noexcept;
  // Records an event of its own after the work queued so far and hands the
  // finalizer a watch of it: `poll(end)` says whether the device reached
  // that point (and throws once the collective failed); `phase` hears the
  // marks made since the last watch as the device reaches them, and `done`
  // the outcome.
  void watch(Finalizer& finalizer, std::function<bool(cudaEvent_t end)> poll,
             std::function<void(const char* phase)> phase, Finalizer::Completion done);

  const int rank;
  const int device;
  Stream stream;  // declared first, destroyed last: the memory is freed in its order
  DeviceMemory fusion;
  DeviceMemory segments;  // the kernels' segment tables
  DeviceMemory pointers;  // the reductions' tables of inputs (and outputs)
  PinnedMemory staging;   // host memory for collectives between hosts
  std::vector<kernels::cuda::FusedSegment> segment_table;
  std::vector<const void*> pointer_table;
  std::vector<std::pair<const char*, std::shared_ptr<Event>>> marks;  // since the last watch
  transport::Deadline deadline{};                                     // the current collective's
  bool marking = true;  // the current collective's steps are listened to
  // Set once the device did not pass a point within the deadline: the
  // stream may then wait for ever (on a peer's interprocess event, which
  // nothing cancels), so what it uses is never freed (cudaFree waits for the
  // whole device and would hang the shutdown).
  std::atomic<bool> stuck{false};

  // Waits on the host for the device to pass `at`, within the deadline
  // (a Failure naming `what` past it, and `stuck` set).
  void wait_on_host(const Event& at, const char* what);
  // reached() (below), setting `stuck` past the deadline.
  bool passed(cudaEvent_t end, transport::Deadline by, const std::string& what);

 private:
  struct TableSlot {
    PinnedMemory memory;
    std::shared_ptr<Event> copied;  // the device has copied from it past this
  };
  std::array<TableSlot, 4> table_slots_;
  size_t next_slot_ = 0;
};

// Settles `q` (DeviceQueue::settle) when the scope is left by an exception.
class SettleOnThrow {
 public:
  explicit SettleOnThrow(DeviceQueue& q) : q_(q), uncaught_(std::uncaught_exceptions()) {}
  ~SettleOnThrow() {
    if (std::uncaught_exceptions() > uncaught_) q_.settle();
  }
  SettleOnThrow(const SettleOnThrow&) = delete;
  SettleOnThrow& operator=(const SettleOnThrow&) = delete;

 private:
  DeviceQueue& q_;
  int uncaught_;
};

// The queues of one rank's devices, each made on first use.
class DeviceQueues {
 public:
  explicit DeviceQueues(int rank) : rank_(rank) {}
  // Each queue goes on its own device (its streams, memory and page-locked
  // slots), whatever thread lets the queues go and whatever it holds current.
  ~DeviceQueues() {
    for (auto& [device, q] : queues_) {
      DeviceScope scope(device, std::nothrow);
      q.reset();
    }
  }
  DeviceQueues(const DeviceQueues&) = delete;
  DeviceQueues& operator=(const DeviceQueues&) = delete;
  // Whether some queue is stuck (DeviceQueue::stuck).
  bool any_stuck() const {
    for (const auto& [device, q] : queues_) {
      if (q->stuck) return true;
    }
    return false;
  }
  // Leaves every queue, and what it holds, to the process's end.
  void abandon() {
    for (auto& [device, q] : queues_) (void)q.release();
  }
  DeviceQueue& operator[](int device) {
    std::unique_ptr<DeviceQueue>& q = queues_[device];
    if (!q) q = std::make_unique<DeviceQueue>(rank_, device);
    return *q;
  }

 private:
  int rank_;
  std::map<int, std::unique_ptr<DeviceQueue>> queues_;
};

// What every device collective starts with: `device` current on the
// runtime's thread (use_device: it stays so), its queue
// begun (waiting, on the device, for the tensors' producers; marking its
// steps where `report` listens to them), and settled if the collective
// leaves by an exception.
struct CollectiveStart {
  CollectiveStart(DeviceQueues& queues, int rank, int device,
                  std::span<const std::shared_ptr<Event>> ready, transport::Deadline deadline,
                  const DeviceCollectives::Report& report)
      : q((use_device(device, rank), queues[device])), settle(q) {
    q.begin(ready, deadline, static_cast<bool>(report.phase));
  }
  DeviceQueue& q;
  SettleOnThrow settle;
};

// One look at whether the device reached `end` (a finalizer's poll): true
// once it did; throws a Failure on a CUDA error, and kTimeout naming
// `what` past `deadline`.
bool reached(cudaEvent_t end, int rank, int device, transport::Deadline deadline,
             const std::string& what);

}  // namespace ringlet::core::gpu
