#include "core/gpu/host_staging.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/collectives/collectives.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::gpu {

namespace {

// Chunks of 4 MiB: enough to keep a link busy, small enough that the first
// chunk's copy to the host is short.
constexpr size_t kChunkBytes = size_t{4} << 20;

// `host` holds `bytes`; growing it first waits until no queued copy uses it.
void reserve(DeviceQueue& q, PinnedMemory& host, size_t bytes) {
  if (host.holds(bytes)) return;
  q.wait_for_queued("the copies before growing the staging memory");
  host.reserve(bytes, q.rank, q.device);
}

}  // namespace

void staged_allreduce(Communicator& comm, DeviceQueue& q, PinnedMemory& host,
                      std::span<const DeviceSegment> tensors, DataType dtype, ReduceOp op,
                      double prescale, double postscale) {
  const size_t es = dtype_size(dtype);
  const int n = static_cast<int>(tensors.size());
  const size_t extent = q.fuse(tensors, es);
  if (extent == 0) return;
  q.fusion.reserve(extent * es, q.rank, q.device);
  reserve(q, host, extent * es);
  q.upload_tables();
  std::byte* fused = static_cast<std::byte*>(q.fusion.get());
  q.check(kernels::cuda::pack(dtype, fused, q.segment(0), n, extent, prescale, q.stream.get()),
          "the pack kernel (staged allreduce)");

  // Every chunk's copy to the host is queued at once; the host reduces each
  // as soon as it is there (an average as a sum) and queues its copy back;
  // the result's one scale (the postscale, with an average's 1/n) rides on
  // the unpack, the same kernel on every rank.
  const ReduceOp host_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const size_t per_chunk = std::max<size_t>(1, kChunkBytes / es);
  std::vector<std::shared_ptr<Event>> arrived;
  for (size_t off = 0; off < extent; off += per_chunk) {
    const size_t len = chunk(extent, off, per_chunk);
    q.copy(host.get() + off * es, fused + off * es, len * es, "to the host (staged allreduce)");
    arrived.push_back(q.record());
  }
  for (size_t k = 0, off = 0; off < extent; off += per_chunk, ++k) {
    const size_t len = chunk(extent, off, per_chunk);
    q.wait_on_host(*arrived[k], "the copy of the allreduce to the host");
    std::byte* part = host.get() + off * es;
    core::allreduce(comm, part, part, len, dtype, host_op);
    q.copy(fused + off * es, part, len * es, "to the device (staged allreduce)");
  }
  q.check(
      kernels::cuda::unpack(dtype, fused, q.segment(n), n, extent,
                            kernels::ops::result_scale(op, postscale, comm.size()), q.stream.get()),
      "the unpack kernel (staged allreduce)");
}

void staged_broadcast(Communicator& comm, DeviceQueue& q, PinnedMemory& host, void* buffer,
                      size_t bytes, int root) {
  if (bytes == 0) return;
  reserve(q, host, bytes);
  auto* data = static_cast<std::byte*>(buffer);
  const bool is_root = comm.rank() == root;
  std::vector<std::shared_ptr<Event>> arrived;
  if (!is_root) {
    // The host writes the staging memory here: earlier copies from it to the
    // device must be done first.
    q.wait_for_queued("the copies of the previous collective");
  } else {
    for (size_t off = 0; off < bytes; off += kChunkBytes) {
      q.copy(host.get() + off, data + off, chunk(bytes, off, kChunkBytes),
             "to the host (staged broadcast)");
      arrived.push_back(q.record());
    }
  }
  for (size_t k = 0, off = 0; off < bytes; off += kChunkBytes, ++k) {
    const size_t len = chunk(bytes, off, kChunkBytes);
    if (is_root) q.wait_on_host(*arrived[k], "the copy of the broadcast to the host");
    core::broadcast(comm, host.get() + off, len, DataType::kUInt8, root);
    if (!is_root) {
      q.copy(data + off, host.get() + off, len, "to the device (staged broadcast)");
    }
  }
}

void staged(DeviceQueue& q, PinnedMemory& host, const void* input, size_t in_bytes, void* output,
            size_t out_bytes, const std::function<void(std::byte* in, std::byte* out)>& run) {
  const size_t out_at = (in_bytes + 63) / 64 * 64;
  reserve(q, host, out_at + out_bytes);
  q.copy(host.get(), input, in_bytes, "to the host (staged collective)");
  q.wait_for_queued("the copy of the collective's input to the host");
  run(host.get(), host.get() + out_at);
  q.copy(output, host.get() + out_at, out_bytes, "to the device (staged collective)");
}

}  // namespace ringlet::core::gpu
