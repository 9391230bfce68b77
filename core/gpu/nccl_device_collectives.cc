// The device collectives of a build with CUDA and NCCL: allreduce and
// broadcast of device tensors through NCCL (HOROVOD_GPU_OPERATIONS=NCCL). The
// allreduce's fusion buffer is device memory and its element work (pack with
// the prescale, average, unpack with the postscale) is the CUDA kernels', all
// on one stream per device that waits for each tensor's producer on the
// device; the finalizer reports each collective's end.
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/communicator.h"
#include "core/gpu/cuda_resources.h"
#include "core/gpu/device_collectives.h"
#include "core/gpu/nccl_communicator.h"
#include "core/runtime/runtime_error.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::core::gpu {

using runtime::CollectiveKind;
using runtime::ErrorKind;
using runtime::RuntimeError;

namespace {

// NCCL's element types; the 16-bit integers have none.
std::optional<ncclDataType_t> nccl_type(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kInt16:
    case DataType::kUInt16:
      break;
  }
  return std::nullopt;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      break;  // the division is finish_average's, as on the host
  }
  return ncclSum;
}

// Slots of the fusion buffer start on 16 bytes, so that the kernels' 16-byte
// accesses reach every aligned tensor.
size_t padded(size_t elements, size_t element_bytes) {
  const size_t per = 16 / element_bytes;
  return (elements + per - 1) / per * per;
}

class NcclDeviceCollectives final : public DeviceCollectives {
 public:
  explicit NcclDeviceCollectives(int rank) : rank_(rank) {}

  void allreduce(Communicator& comm, int32_t process_set, int device,
                 std::span<const DeviceSegment> tensors,
                 std::span<const std::shared_ptr<Event>> ready, DataType dtype, ReduceOp op,
                 double prescale, double postscale, Completion done) override {
    // Submission refused the dtypes NCCL lacks (device_refusal).
    const ncclDataType_t type = nccl_type(dtype).value();
    DeviceScope scope(device, rank_);
    PerDevice& d = per_device(device);
    NcclCommunicator& nccl = communicator(comm, process_set, device);
    const cudaStream_t stream = d.stream.get();
    auto cuda = [&](cudaError_t e, const char* what) { check_cuda(e, rank_, device, what); };
    for (const auto& r : ready) {
      if (r != nullptr) cuda(cudaStreamWaitEvent(stream, r->get(), 0), "cudaStreamWaitEvent");
    }
    const size_t es = dtype_size(dtype);
    const int ranks = comm.size();

    if (tensors.size() == 1) {
      // One tensor: reduced in its output, with no fusion buffer.
      const DeviceSegment& t = tensors[0];
      const void* send = t.input;
      if (prescale != 1.0) {
        // The prescale must not touch the caller's input: scale a copy of it
        // in the output (a one-segment pack), then reduce there.
        d.table_host.assign(1, kernels::cuda::FusedSegment{const_cast<void*>(t.input), 0, t.count});
        upload_table(d, device);
        cuda(kernels::cuda::pack(dtype, t.output, d.table.as<kernels::cuda::FusedSegment>(), 1,
                                 t.count, prescale, stream),
             "the prescale kernel");
        send = t.output;
      }
      nccl.check(ncclAllReduce(send, t.output, t.count, type, nccl_op(op), nccl.get(), stream),
                 "ncclAllReduce");
      finish(dtype, op, t.output, t.count, ranks, postscale, stream, device);
    } else {
      // One table for both passes: the inputs' segments, then the outputs'.
      const int n = static_cast<int>(tensors.size());
      d.table_host.clear();
      size_t extent = 0;
      for (const DeviceSegment& t : tensors) {
        d.table_host.push_back({const_cast<void*>(t.input), extent, t.count});
        extent += padded(t.count, es);
      }
      for (int i = 0; i < n; ++i) {
        d.table_host.push_back({tensors[i].output, d.table_host[i].offset, tensors[i].count});
      }
      d.fusion.reserve(extent * es, rank_, device);
      upload_table(d, device);
      const auto* table = d.table.as<kernels::cuda::FusedSegment>();
      cuda(kernels::cuda::pack(dtype, d.fusion.get(), table, n, extent, prescale, stream),
           "the pack kernel (MEMCPY_IN_FUSION_BUFFER)");
      nccl.check(ncclAllReduce(d.fusion.get(), d.fusion.get(), extent, type, nccl_op(op),
                               nccl.get(), stream),
                 "ncclAllReduce");
      finish(dtype, op, d.fusion.get(), extent, ranks, 1.0, stream, device);
      cuda(kernels::cuda::unpack(dtype, d.fusion.get(), table + n, n, extent, postscale, stream),
           "the unpack kernel (MEMCPY_OUT_FUSION_BUFFER)");
    }
    watch(nccl, stream, rank_, device, comm.deadline(), "the allreduce", std::move(done));
  }

  void broadcast(Communicator& comm, int32_t process_set, int device, void* buffer, size_t count,
                 DataType dtype, int root, const std::shared_ptr<Event>& ready,
                 Completion done) override {
    DeviceScope scope(device, rank_);
    PerDevice& d = per_device(device);
    NcclCommunicator& nccl = communicator(comm, process_set, device);
    const cudaStream_t stream = d.stream.get();
    if (ready != nullptr) {
      check_cuda(cudaStreamWaitEvent(stream, ready->get(), 0), rank_, device,
                 "cudaStreamWaitEvent");
    }
    // Moved as bytes: a broadcast never looks at the elements.
    nccl.check(ncclBroadcast(buffer, buffer, count * dtype_size(dtype), ncclUint8, root, nccl.get(),
                             stream),
               "ncclBroadcast");
    watch(nccl, stream, rank_, device, comm.deadline(), "the broadcast", std::move(done));
  }

 private:
  // Marks the end of the work just queued on `stream` with an event of its
  // own and hands it to the finalizer, which reports to `done`.
  void watch(NcclCommunicator& nccl, cudaStream_t stream, int rank, int device,
             transport::Deadline deadline, const char* what, Completion done) {
    std::shared_ptr<Event> end = pooled_event(rank, device);
    check_cuda(cudaEventRecord(end->get(), stream), rank, device, "cudaEventRecord");
    finalizer_.watch([&nccl, end, deadline, what] { return nccl.poll(end->get(), deadline, what); },
                     std::move(done));
  }

  struct PerDevice {
    PerDevice(int rank, int device)
        : stream(rank, device), fusion(stream.get()), table(stream.get()) {}
    Stream stream;  // destroyed last: the memory is freed in its order
    DeviceMemory fusion;
    DeviceMemory table;  // the kernels' segment table
    std::vector<kernels::cuda::FusedSegment> table_host;
  };

  PerDevice& per_device(int device) {
    auto it = devices_.find(device);
    if (it == devices_.end()) {
      it = devices_.emplace(device, std::make_unique<PerDevice>(rank_, device)).first;
    }
    return *it->second;
  }

  NcclCommunicator& communicator(Communicator& comm, int32_t process_set, int device) {
    const auto key = std::make_pair(process_set, device);
    auto it = comms_.find(key);
    if (it == comms_.end()) {
      // Every member makes its communicators in the same order (the order of
      // the responses), so the count names the same one on every rank.
      const std::string store_key =
          "ringlet/nccl-id/set" + std::to_string(process_set) + "/" + std::to_string(created_++);
      it = comms_.emplace(key, std::make_unique<NcclCommunicator>(comm, device, store_key, rank_))
               .first;
    }
    return *it->second;
  }

  // Copies the host table to the device in the stream's order; the host
  // vector may change once this returns (CUDA has staged the bytes).
  void upload_table(PerDevice& d, int device) {
    const size_t bytes = d.table_host.size() * sizeof(kernels::cuda::FusedSegment);
    d.table.reserve(bytes, rank_, device);
    check_cuda(cudaMemcpyAsync(d.table.get(), d.table_host.data(), bytes, cudaMemcpyHostToDevice,
                               d.stream.get()),
               rank_, device, "cudaMemcpyAsync of the segment table");
  }

  // The average's division (floats x 1/n, integers toward zero, as on the
  // host) and then the postscale, in place.
  void finish(DataType dtype, ReduceOp op, void* buf, size_t count, int ranks, double postscale,
              cudaStream_t stream, int device) {
    if (op == ReduceOp::kAvg) {
      check_cuda(kernels::cuda::finish_average(dtype, buf, count, ranks, stream), rank_, device,
                 "the average kernel");
    }
    check_cuda(kernels::cuda::scale(dtype, buf, count, postscale, stream), rank_, device,
               "the postscale kernel");
  }

  const int rank_;
  int created_ = 0;
  std::map<int, std::unique_ptr<PerDevice>> devices_;
  // Destroyed before devices_ (declared after): a communicator's queued work
  // may still use a device's stream.
  std::map<std::pair<int32_t, int>, std::unique_ptr<NcclCommunicator>> comms_;
  // Destroyed first: it waits for every watched collective to end, and its
  // polls use the communicators.
  Finalizer finalizer_;
};

}  // namespace

std::string device_refusal(GpuOperations operations, CollectiveKind kind, DataType dtype,
                           int device) {
  const std::string where = "device tensors (cuda:" + std::to_string(device) + ")";
  if (operations == GpuOperations::kRing) {
    return where +
           ": HOROVOD_GPU_OPERATIONS=RING (Ringlet's ring over CUDA IPC) is not served "
           "by this version yet; HOROVOD_GPU_OPERATIONS=NCCL is";
  }
  if (operations == GpuOperations::kMpi) {
    return where +
           ": HOROVOD_GPU_OPERATIONS=MPI needs a CUDA-aware MPI, which this build does "
           "not use; HOROVOD_GPU_OPERATIONS=NCCL is served";
  }
  if (kind == CollectiveKind::kBroadcast) return "";
  if (kind != CollectiveKind::kAllreduce) {
    return where + ": " + std::string(to_string(kind)) +
           " of device tensors is not served by this version yet (allreduce and broadcast are, "
           "through NCCL)";
  }
  if (!nccl_type(dtype)) {
    return where + ": NCCL has no " + std::string(to_string(dtype)) +
           " type (reduce it on the host, or as int32)";
  }
  return "";
}

std::shared_ptr<Event> record_ready(int rank, int device, void* stream) {
  DeviceScope scope(device, rank);
  std::shared_ptr<Event> ready = pooled_event(rank, device);
  check_cuda(cudaEventRecord(ready->get(), static_cast<cudaStream_t>(stream)), rank, device,
             "cudaEventRecord on the tensor's stream");
  return ready;
}

std::unique_ptr<DeviceCollectives> make_device_collectives(int rank) {
  return std::make_unique<NcclDeviceCollectives>(rank);
}

}  // namespace ringlet::core::gpu
