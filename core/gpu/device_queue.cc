#include "core/gpu/device_queue.h"

#include <cstring>

#include "core/gpu/backoff.h"
#include "core/gpu/device_error.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::gpu {

void DeviceQueue::begin(std::span<const std::shared_ptr<Event>> ready, transport::Deadline until,
                        bool listened) {
  marks.clear();
  deadline = until;
  marking = listened;
  for (const auto& r : ready) {
    if (r != nullptr) check(cudaStreamWaitEvent(stream.get(), r->get(), 0), "cudaStreamWaitEvent");
  }
}

void DeviceQueue::wait_on_host(const Event& at, const char* what) {
  for (int turns = 0; !passed(at.get(), deadline, what); backoff(turns)) {
  }
}

bool DeviceQueue::passed(cudaEvent_t end, transport::Deadline by, const std::string& what) {
  try {
    return reached(end, rank, device, by, what);
  } catch (const common::Failure& e) {
    if (e.kind() == ErrorKind::kTimeout) stuck = true;
    throw;
  }
}

void DeviceQueue::upload_tables() {
  const size_t segment_bytes = segment_table.size() * sizeof(kernels::cuda::FusedSegment);
  const size_t pointer_at = (segment_bytes + 63) / 64 * 64;
  const size_t pointer_bytes = pointer_table.size() * sizeof(const void*);
  if (segment_bytes + pointer_bytes == 0) return;
  TableSlot& slot = table_slots_[next_slot_++ % table_slots_.size()];
  if (slot.copied) wait_on_host(*slot.copied, "the copy of an earlier table to the device");
  slot.memory.reserve(pointer_at + pointer_bytes, rank, device);
  std::byte* host = slot.memory.get();
  if (segment_bytes > 0) {
    std::memcpy(host, segment_table.data(), segment_bytes);
    segments.reserve(segment_bytes, rank, device);
    check(
        cudaMemcpyAsync(segments.get(), host, segment_bytes, cudaMemcpyHostToDevice, stream.get()),
        "cudaMemcpyAsync of the segment table");
  }
  if (pointer_bytes > 0) {
    std::memcpy(host + pointer_at, pointer_table.data(), pointer_bytes);
    pointers.reserve(pointer_bytes, rank, device);
    check(cudaMemcpyAsync(pointers.get(), host + pointer_at, pointer_bytes, cudaMemcpyHostToDevice,
                          stream.get()),
          "cudaMemcpyAsync of the input table");
  }
  slot.copied = record();
}

void DeviceQueue::settle() noexcept {
  try {
    wait_for_queued("the work of a failed collective");
  } catch (...) {
    // Past the deadline, or the device failed: nothing more to wait for.
  }
}

size_t DeviceQueue::fuse(std::span<const DeviceSegment> tensors, size_t element_bytes) {
  segment_table.clear();
  pointer_table.clear();
  size_t extent = 0;
  for (const DeviceSegment& t : tensors) {
    segment_table.push_back({const_cast<void*>(t.input), extent, t.count});
    extent += padded(t.count, element_bytes);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    segment_table.push_back({tensors[i].output, segment_table[i].offset, tensors[i].count});
  }
  return extent;
}

void DeviceQueue::scaled_copy(DataType dtype, void* dst, const void* src, size_t count,
                              double factor) {
  segment_table.assign(1, kernels::cuda::FusedSegment{const_cast<void*>(src), 0, count});
  pointer_table.clear();
  upload_tables();
  check(kernels::cuda::pack(dtype, dst, segment(0), 1, count, factor, stream.get()),
        "the prescale kernel");
}

void DeviceQueue::copy(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream.get()),
        ("cudaMemcpyAsync " + std::string(what)).c_str());
}

void DeviceQueue::finish(DataType dtype, ReduceOp op, void* buf, size_t count, int ranks,
                         double postscale) {
  check(kernels::cuda::scale(dtype, buf, count, kernels::ops::result_scale(op, postscale, ranks),
                             stream.get()),
        "the kernel that scales the result (postscale, with an average's 1/n)");
}

std::shared_ptr<Event> DeviceQueue::record() {
  std::shared_ptr<Event> at = pooled_event(rank, device);
  check(cudaEventRecord(at->get(), stream.get()), "cudaEventRecord");
  return at;
}

void DeviceQueue::mark(const char* phase) {
  if (marking) marks.emplace_back(phase, record());
}

void DeviceQueue::watch(Finalizer& finalizer, std::function<bool(cudaEvent_t)> poll,
                        std::function<void(const char* phase)> phase, Finalizer::Completion done) {
  std::shared_ptr<Event> end = record();
  // Each poll reports the marks the device has passed; once the end is
  // reached, every mark is. A mark's own error is left to the end's poll.
  auto watched = [end, poll = std::move(poll), phase = std::move(phase), marks = std::move(marks),
                  next = size_t{0}, device = device, rank = rank]() mutable {
    // The finalizer's thread queries on this queue's device, never on a
    // device 0 it never chose (which would make a context there).
    use_device(device, rank);
    auto report_passed = [&](bool all) {
      for (; next < marks.size(); ++next) {
        if (!all && cudaEventQuery(marks[next].second->get()) != cudaSuccess) break;
        if (phase) phase(marks[next].first);
      }
    };
    report_passed(false);
    const bool ended = poll(end->get());
    if (ended) report_passed(true);
    return ended;
  };
  marks.clear();
  finalizer.watch(std::move(watched), std::move(done));
}

bool reached(cudaEvent_t end, int rank, int device, transport::Deadline deadline,
             const std::string& what) {
  const cudaError_t e = cudaEventQuery(end);
  if (e == cudaSuccess) return true;
  if (e != cudaErrorNotReady) check_cuda(e, rank, device, what.c_str());
  if (transport::Clock::now() >= deadline) {
    throw device_failure(ErrorKind::kTimeout, rank,
                         "cuda:" + std::to_string(device) + ": " + what +
                             " did not end on the device within RINGLET_TIMEOUT_SECONDS");
  }
  return false;
}

}  // namespace ringlet::core::gpu
