// The device collectives of a build with CUDA and NCCL: every collective of
// device tensors through NCCL (HOROVOD_GPU_OPERATIONS=NCCL). The
// allreduce's fusion buffer is device memory and its element work (pack with
// the prescale, average, unpack with the postscale) is the CUDA kernels', all
// on one stream per device that waits for each tensor's producer on the
// device; the finalizer reports each collective's end.
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
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

// ncclGroupStart ... ncclGroupEnd, closed also when a call between them
// throws (the communicator is aborted then, but NCCL's group is per thread).
class NcclGroup {
 public:
  explicit NcclGroup(NcclCommunicator& nccl) : nccl_(nccl) {
    nccl_.check(ncclGroupStart(), "ncclGroupStart");
  }
  ~NcclGroup() {
    if (open_) (void)ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end() {
    open_ = false;
    nccl_.check(ncclGroupEnd(), "ncclGroupEnd");
  }

 private:
  NcclCommunicator& nccl_;
  bool open_ = true;
};

bool all_equal(std::span<const size_t> counts) {
  return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

std::byte* at(void* base, size_t elements, size_t element_bytes) {
  return static_cast<std::byte*>(base) + elements * element_bytes;
}
const std::byte* at(const void* base, size_t elements, size_t element_bytes) {
  return static_cast<const std::byte*>(base) + elements * element_bytes;
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
    Call c(*this, comm, process_set, device, ready);
    const size_t es = dtype_size(dtype);
    const int ranks = comm.size();

    if (tensors.size() == 1) {
      // One tensor: reduced in its output, with no fusion buffer.
      const DeviceSegment& t = tensors[0];
      const void* send = t.input;
      if (prescale != 1.0) {
        // The prescale must not touch the caller's input: scale a copy of it
        // in the output, then reduce there.
        scaled_copy(c, dtype, t.output, t.input, t.count, prescale);
        send = t.output;
      }
      c.nccl.check(
          ncclAllReduce(send, t.output, t.count, type, nccl_op(op), c.nccl.get(), c.stream),
          "ncclAllReduce");
      finish(c, dtype, op, t.output, t.count, ranks, postscale);
    } else {
      // One table for both passes: the inputs' segments, then the outputs'.
      PerDevice& d = c.d;
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
      c.cuda(kernels::cuda::pack(dtype, d.fusion.get(), table, n, extent, prescale, c.stream),
             "the pack kernel (MEMCPY_IN_FUSION_BUFFER)");
      c.nccl.check(ncclAllReduce(d.fusion.get(), d.fusion.get(), extent, type, nccl_op(op),
                                 c.nccl.get(), c.stream),
                   "ncclAllReduce");
      finish(c, dtype, op, d.fusion.get(), extent, ranks, 1.0);
      c.cuda(
          kernels::cuda::unpack(dtype, d.fusion.get(), table + n, n, extent, postscale, c.stream),
          "the unpack kernel (MEMCPY_OUT_FUSION_BUFFER)");
    }
    watch(c, comm.deadline(), "the allreduce", std::move(done));
  }

  void broadcast(Communicator& comm, int32_t process_set, int device, void* buffer, size_t count,
                 DataType dtype, int root, const std::shared_ptr<Event>& ready,
                 Completion done) override {
    Call c(*this, comm, process_set, device, {&ready, 1});
    // Moved as bytes: a broadcast never looks at the elements.
    c.nccl.check(ncclBroadcast(buffer, buffer, count * dtype_size(dtype), ncclUint8, root,
                               c.nccl.get(), c.stream),
                 "ncclBroadcast");
    watch(c, comm.deadline(), "the broadcast", std::move(done));
  }

  std::shared_ptr<void> allocate(int device, size_t bytes) override {
    DeviceScope scope(device, rank_);
    void* p = nullptr;
    // At least a little, so that no NCCL call sees a null buffer.
    check_cuda(cudaMalloc(&p, std::max<size_t>(bytes, 256)), rank_, device,
               ("cudaMalloc of " + std::to_string(bytes) + " bytes for the result").c_str());
    // cudaFree waits for the device, so whatever the caller queued on the
    // memory is done first. It may run at exit, after CUDA unloads: its
    // error is of no use then.
    return std::shared_ptr<void>(p, [device](void* q) {
      int previous = -1;
      (void)cudaGetDevice(&previous);
      if (previous != device) (void)cudaSetDevice(device);
      (void)cudaFree(q);
      if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
    });
  }

  void allgather(Communicator& comm, int32_t process_set, int device, const void* input,
                 std::span<const size_t> counts, void* output, DataType dtype,
                 const std::shared_ptr<Event>& ready, Completion done) override {
    Call c(*this, comm, process_set, device, {&ready, 1});
    const size_t es = dtype_size(dtype);
    if (all_equal(counts)) {
      if (counts[0] > 0) {
        c.nccl.check(
            ncclAllGather(input, output, counts[0] * es, ncclUint8, c.nccl.get(), c.stream),
            "ncclAllGather");
      }
    } else {
      // Blocks of different sizes: each rank broadcasts its own into place,
      // all in one group.
      NcclGroup group(c.nccl);
      size_t offset = 0;
      for (int r = 0; r < comm.size(); ++r) {
        if (counts[r] > 0) {
          c.nccl.check(ncclBroadcast(input, at(output, offset, es), counts[r] * es, ncclUint8, r,
                                     c.nccl.get(), c.stream),
                       "ncclBroadcast (allgather)");
        }
        offset += counts[r];
      }
      group.end();
    }
    watch(c, comm.deadline(), "the allgather", std::move(done));
  }

  void reducescatter(Communicator& comm, int32_t process_set, int device, const void* input,
                     std::span<const size_t> counts, void* output, DataType dtype, ReduceOp op,
                     double prescale, double postscale, const std::shared_ptr<Event>& ready,
                     Completion done) override {
    const ncclDataType_t type = nccl_type(dtype).value();
    Call c(*this, comm, process_set, device, {&ready, 1});
    const size_t es = dtype_size(dtype);
    const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    const void* send = input;
    if (prescale != 1.0) {
      // Scaled in the fusion buffer: the caller's input stays as it was.
      c.d.fusion.reserve(total * es, rank_, device);
      scaled_copy(c, dtype, c.d.fusion.get(), input, total, prescale);
      send = c.d.fusion.get();
    }
    if (all_equal(counts)) {
      if (counts[0] > 0) {
        c.nccl.check(
            ncclReduceScatter(send, output, counts[0], type, nccl_op(op), c.nccl.get(), c.stream),
            "ncclReduceScatter");
      }
    } else {
      // Blocks of different sizes: block r is reduced to rank r, all in one
      // group.
      NcclGroup group(c.nccl);
      size_t offset = 0;
      for (int r = 0; r < comm.size(); ++r) {
        if (counts[r] > 0) {
          c.nccl.check(ncclReduce(at(send, offset, es), output, counts[r], type, nccl_op(op), r,
                                  c.nccl.get(), c.stream),
                       "ncclReduce (reducescatter)");
        }
        offset += counts[r];
      }
      group.end();
    }
    finish(c, dtype, op, output, counts[comm.rank()], comm.size(), postscale);
    watch(c, comm.deadline(), "the reducescatter", std::move(done));
  }

  void alltoall(Communicator& comm, int32_t process_set, int device, const void* input,
                std::span<const size_t> send_counts, void* output,
                std::span<const size_t> recv_counts, DataType dtype,
                const std::shared_ptr<Event>& ready, Completion done) override {
    Call c(*this, comm, process_set, device, {&ready, 1});
    const size_t es = dtype_size(dtype);
    const int me = comm.rank();
    std::vector<size_t> send_at(comm.size() + 1, 0), recv_at(comm.size() + 1, 0);
    for (int r = 0; r < comm.size(); ++r) {
      send_at[r + 1] = send_at[r] + send_counts[r];
      recv_at[r + 1] = recv_at[r] + recv_counts[r];
    }
    // This rank's own rows are a copy on the device.
    if (send_counts[me] > 0) {
      c.cuda(cudaMemcpyAsync(at(output, recv_at[me], es), at(input, send_at[me], es),
                             send_counts[me] * es, cudaMemcpyDeviceToDevice, c.stream),
             "cudaMemcpyAsync of this rank's own rows");
    }
    NcclGroup group(c.nccl);
    for (int r = 0; r < comm.size(); ++r) {
      if (r == me) continue;
      if (send_counts[r] > 0) {
        c.nccl.check(ncclSend(at(input, send_at[r], es), send_counts[r] * es, ncclUint8, r,
                              c.nccl.get(), c.stream),
                     "ncclSend (alltoall)");
      }
      if (recv_counts[r] > 0) {
        c.nccl.check(ncclRecv(at(output, recv_at[r], es), recv_counts[r] * es, ncclUint8, r,
                              c.nccl.get(), c.stream),
                     "ncclRecv (alltoall)");
      }
    }
    group.end();
    watch(c, comm.deadline(), "the alltoall", std::move(done));
  }

 private:
  struct PerDevice {
    PerDevice(int rank, int device)
        : stream(rank, device), fusion(stream.get()), table(stream.get()) {}
    Stream stream;  // destroyed last: the memory is freed in its order
    DeviceMemory fusion;
    DeviceMemory table;  // the kernels' segment table
    std::vector<kernels::cuda::FusedSegment> table_host;
  };

  // What every collective starts with: `device` current, its stream and the
  // set's communicator, and the stream waiting (on the device) for the
  // tensors' producers.
  struct Call {
    Call(NcclDeviceCollectives& self, Communicator& comm, int32_t process_set, int device,
         std::span<const std::shared_ptr<Event>> ready)
        : rank(self.rank_),
          device(device),
          scope(device, rank),
          d(self.per_device(device)),
          nccl(self.communicator(comm, process_set, device)),
          stream(d.stream.get()) {
      for (const auto& r : ready) {
        if (r != nullptr) cuda(cudaStreamWaitEvent(stream, r->get(), 0), "cudaStreamWaitEvent");
      }
    }
    void cuda(cudaError_t e, const char* what) const { check_cuda(e, rank, device, what); }

    const int rank;
    const int device;
    DeviceScope scope;
    PerDevice& d;
    NcclCommunicator& nccl;
    const cudaStream_t stream;
  };

  // Marks the end of the work just queued on the call's stream with an event
  // of its own and hands it to the finalizer, which reports to `done`.
  void watch(Call& c, transport::Deadline deadline, const char* what, Completion done) {
    std::shared_ptr<Event> end = pooled_event(c.rank, c.device);
    c.cuda(cudaEventRecord(end->get(), c.stream), "cudaEventRecord");
    NcclCommunicator& nccl = c.nccl;
    finalizer_.watch([&nccl, end, deadline, what] { return nccl.poll(end->get(), deadline, what); },
                     std::move(done));
  }

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

  // dst = factor * src, `count` elements (a one-segment pack).
  void scaled_copy(Call& c, DataType dtype, void* dst, const void* src, size_t count,
                   double factor) {
    c.d.table_host.assign(1, kernels::cuda::FusedSegment{const_cast<void*>(src), 0, count});
    upload_table(c.d, c.device);
    c.cuda(kernels::cuda::pack(dtype, dst, c.d.table.as<kernels::cuda::FusedSegment>(), 1, count,
                               factor, c.stream),
           "the prescale kernel");
  }

  // The average's division (floats x 1/n, integers toward zero, as on the
  // host) and then the postscale, in place.
  void finish(Call& c, DataType dtype, ReduceOp op, void* buf, size_t count, int ranks,
              double postscale) {
    if (op == ReduceOp::kAvg) {
      c.cuda(kernels::cuda::finish_average(dtype, buf, count, ranks, c.stream),
             "the average kernel");
    }
    c.cuda(kernels::cuda::scale(dtype, buf, count, postscale, c.stream), "the postscale kernel");
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
  // Broadcast, allgather and alltoall move bytes: every dtype goes.
  if (kind != CollectiveKind::kAllreduce && kind != CollectiveKind::kReducescatter) return "";
  if (!nccl_type(dtype)) {
    return where + ": NCCL has no " + std::string(to_string(dtype)) +
           " type to reduce (reduce it on the host, or as int32)";
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
