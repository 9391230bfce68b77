// The device collectives of a build with CUDA and NCCL: every collective of
// device tensors through NCCL (HOROVOD_GPU_OPERATIONS=NCCL). The
// allreduce's fusion buffer is device memory and its element work (pack with
// the prescale, unpack with the postscale and an average's 1/n joined into
// one factor) is the CUDA kernels', all
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
#include "core/gpu/device_error.h"
#include "core/gpu/device_queue.h"
#include "core/gpu/nccl_communicator.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::gpu {

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
      break;  // an average is a sum: its 1/n joins the postscale, as on the host
  }
  return ncclSum;
}

// ncclGroupStart ... ncclGroupEnd, holding the communicator's lock
// throughout: NCCL's group refers to the communicator until it ends, so the
// finalizer must not abort it meanwhile, and a call that fails ends the
// group before the communicator is aborted. Closed also when the scope is
// left by an exception.
class NcclGroup {
 public:
  explicit NcclGroup(NcclCommunicator& nccl) : nccl_(nccl), lock_(nccl.hold()) {
    const ncclResult_t r = ncclGroupStart();
    open_ = r == ncclSuccess;
    if (!open_) {
      lock_.unlock();
      nccl_.check(r, "ncclGroupStart");
    }
  }
  ~NcclGroup() { close(); }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  // One call of the group (NcclCommunicator::call).
  template <class Fn>
  void call(const char* what, Fn&& fn) {
    nccl_.call(what, [&](ncclComm_t comm) {
      const ncclResult_t r = fn(comm);
      if (r != ncclSuccess && r != ncclInProgress) close();
      return r;
    });
  }
  void end() {
    const ncclResult_t r = ncclGroupEnd();
    open_ = false;
    lock_.unlock();
    nccl_.check(r, "ncclGroupEnd");
  }

 private:
  void close() {
    if (open_) (void)ncclGroupEnd();
    open_ = false;
  }

  NcclCommunicator& nccl_;
  std::unique_lock<std::recursive_mutex> lock_;
  bool open_ = false;
};

bool all_equal(std::span<const size_t> counts) {
  return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

class NcclDeviceCollectives final : public DeviceCollectives {
 public:
  explicit NcclDeviceCollectives(int rank) : rank_(rank) {}

  void allreduce(Communicator& comm, int32_t process_set, int device,
                 std::span<const DeviceSegment> tensors,
                 std::span<const std::shared_ptr<Event>> ready, DataType dtype, ReduceOp op,
                 double prescale, double postscale, Report report) override {
    // Submission refused the dtypes NCCL lacks (device_refusal).
    const ncclDataType_t type = nccl_type(dtype).value();
    Call c(*this, comm, process_set, device, ready, report);
    DeviceQueue& q = c.q;
    const size_t es = dtype_size(dtype);
    const int ranks = comm.size();

    if (tensors.size() == 1) {
      // One tensor: reduced in its output, with no fusion buffer.
      q.mark("NCCL_ALLREDUCE");
      const DeviceSegment& t = tensors[0];
      const void* send = t.input;
      if (prescale != 1.0) {
        // The prescale must not touch the caller's input: scale a copy of it
        // in the output, then reduce there.
        q.scaled_copy(dtype, t.output, t.input, t.count, prescale);
        send = t.output;
      }
      c.nccl.call("ncclAllReduce", [&](ncclComm_t nc) {
        return ncclAllReduce(send, t.output, t.count, type, nccl_op(op), nc, q.stream.get());
      });
      q.finish(dtype, op, t.output, t.count, ranks, postscale);
    } else {
      // One table for both passes: the inputs' segments, then the outputs'.
      const int n = static_cast<int>(tensors.size());
      const size_t extent = q.fuse(tensors, es);
      q.fusion.reserve(extent * es, rank_, device);
      q.upload_tables();
      q.mark("MEMCPY_IN_FUSION_BUFFER");
      q.check(kernels::cuda::pack(dtype, q.fusion.get(), q.segment(0), n, extent, prescale,
                                  q.stream.get()),
              "the pack kernel (MEMCPY_IN_FUSION_BUFFER)");
      q.mark("NCCL_ALLREDUCE");
      c.nccl.call("ncclAllReduce", [&](ncclComm_t nc) {
        return ncclAllReduce(q.fusion.get(), q.fusion.get(), extent, type, nccl_op(op), nc,
                             q.stream.get());
      });
      q.mark("MEMCPY_OUT_FUSION_BUFFER");
      // The result's one scale (the postscale, with an average's 1/n) rides
      // on the unpack.
      q.check(
          kernels::cuda::unpack(dtype, q.fusion.get(), q.segment(n), n, extent,
                                kernels::ops::result_scale(op, postscale, ranks), q.stream.get()),
          "the unpack kernel (MEMCPY_OUT_FUSION_BUFFER)");
    }
    watch(c, comm.deadline(), "the allreduce", std::move(report));
  }

  void broadcast(Communicator& comm, int32_t process_set, int device, void* buffer, size_t count,
                 DataType dtype, int root, const std::shared_ptr<Event>& ready,
                 Report report) override {
    Call c(*this, comm, process_set, device, {&ready, 1}, report);
    c.q.mark("NCCL_BROADCAST");
    // Moved as bytes: a broadcast never looks at the elements.
    c.nccl.call("ncclBroadcast", [&](ncclComm_t nc) {
      return ncclBroadcast(buffer, buffer, count * dtype_size(dtype), ncclUint8, root, nc,
                           c.q.stream.get());
    });
    watch(c, comm.deadline(), "the broadcast", std::move(report));
  }

  // In the order of the queue's stream, which then writes it: no wait on
  // the host.
  std::shared_ptr<void> allocate(int device, size_t bytes) override {
    use_device(device, rank_);  // the runtime's thread
    return allocate_result(rank_, device, bytes, queues_[device].stream.get());
  }

  void allgather(Communicator& comm, int32_t process_set, int device, const void* input,
                 std::span<const size_t> counts, void* output, DataType dtype,
                 const std::shared_ptr<Event>& ready, Report report) override {
    Call c(*this, comm, process_set, device, {&ready, 1}, report);
    c.q.mark("NCCL_ALLGATHER");
    const cudaStream_t stream = c.q.stream.get();
    const size_t es = dtype_size(dtype);
    if (all_equal(counts)) {
      if (counts[0] > 0) {
        c.nccl.call("ncclAllGather", [&](ncclComm_t nc) {
          return ncclAllGather(input, output, counts[0] * es, ncclUint8, nc, stream);
        });
      }
    } else {
      // Blocks of different sizes: each rank broadcasts its own into place,
      // all in one group.
      NcclGroup group(c.nccl);
      size_t offset = 0;
      for (int r = 0; r < comm.size(); ++r) {
        if (counts[r] > 0) {
          group.call("ncclBroadcast (allgather)", [&](ncclComm_t nc) {
            return ncclBroadcast(input, byte_at(output, offset * es), counts[r] * es, ncclUint8, r,
                                 nc, stream);
          });
        }
        offset += counts[r];
      }
      group.end();
    }
    watch(c, comm.deadline(), "the allgather", std::move(report));
  }

  void reducescatter(Communicator& comm, int32_t process_set, int device, const void* input,
                     std::span<const size_t> counts, void* output, DataType dtype, ReduceOp op,
                     double prescale, double postscale, const std::shared_ptr<Event>& ready,
                     Report report) override {
    const ncclDataType_t type = nccl_type(dtype).value();
    Call c(*this, comm, process_set, device, {&ready, 1}, report);
    c.q.mark("NCCL_REDUCESCATTER");
    DeviceQueue& q = c.q;
    const cudaStream_t stream = q.stream.get();
    const size_t es = dtype_size(dtype);
    const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    const void* send = input;
    if (prescale != 1.0) {
      // Scaled in the fusion buffer: the caller's input stays as it was.
      q.fusion.reserve(total * es, rank_, device);
      q.scaled_copy(dtype, q.fusion.get(), input, total, prescale);
      send = q.fusion.get();
    }
    if (all_equal(counts)) {
      if (counts[0] > 0) {
        c.nccl.call("ncclReduceScatter", [&](ncclComm_t nc) {
          return ncclReduceScatter(send, output, counts[0], type, nccl_op(op), nc, stream);
        });
      }
    } else {
      // Blocks of different sizes: block r is reduced to rank r, all in one
      // group.
      NcclGroup group(c.nccl);
      size_t offset = 0;
      for (int r = 0; r < comm.size(); ++r) {
        if (counts[r] > 0) {
          group.call("ncclReduce (reducescatter)", [&](ncclComm_t nc) {
            return ncclReduce(byte_at(send, offset * es), output, counts[r], type, nccl_op(op), r,
                              nc, stream);
          });
        }
        offset += counts[r];
      }
      group.end();
    }
    q.finish(dtype, op, output, counts[comm.rank()], comm.size(), postscale);
    watch(c, comm.deadline(), "the reducescatter", std::move(report));
  }

  void alltoall(Communicator& comm, int32_t process_set, int device, const void* input,
                std::span<const size_t> send_counts, void* output,
                std::span<const size_t> recv_counts, size_t /*largest*/, DataType dtype,
                const std::shared_ptr<Event>& ready, Report report) override {
    Call c(*this, comm, process_set, device, {&ready, 1}, report);
    c.q.mark("NCCL_ALLTOALL");
    const cudaStream_t stream = c.q.stream.get();
    const size_t es = dtype_size(dtype);
    const int me = comm.rank();
    const std::vector<size_t> send_at = offsets(send_counts), recv_at = offsets(recv_counts);
    // This rank's own rows are a copy on the device.
    c.q.copy(byte_at(output, recv_at[me] * es), byte_at(input, send_at[me] * es),
             send_counts[me] * es, "of this rank's own rows");
    NcclGroup group(c.nccl);
    for (int r = 0; r < comm.size(); ++r) {
      if (r == me) continue;
      if (send_counts[r] > 0) {
        group.call("ncclSend (alltoall)", [&](ncclComm_t nc) {
          return ncclSend(byte_at(input, send_at[r] * es), send_counts[r] * es, ncclUint8, r, nc,
                          stream);
        });
      }
      if (recv_counts[r] > 0) {
        group.call("ncclRecv (alltoall)", [&](ncclComm_t nc) {
          return ncclRecv(byte_at(output, recv_at[r] * es), recv_counts[r] * es, ncclUint8, r, nc,
                          stream);
        });
      }
    }
    group.end();
    watch(c, comm.deadline(), "the alltoall", std::move(report));
  }

  void abandon(const common::Failure& why) override {
    for (auto& [key, nccl] : comms_) nccl->abandon(why);
  }

  void release_process_set(int32_t process_set) override {
    finalizer_.drain();
    std::erase_if(comms_, [&](const auto& kv) { return kv.first.first == process_set; });
  }

 private:
  // What every collective starts with (CollectiveStart), and the set's
  // communicator.
  struct Call {
    Call(NcclDeviceCollectives& self, Communicator& comm, int32_t process_set, int device,
         std::span<const std::shared_ptr<Event>> ready, const Report& report)
        : start(self.queues_, self.rank_, device, ready, comm.deadline(), report),
          q(start.q),
          nccl(self.communicator(comm, process_set, device)) {}
    CollectiveStart start;
    DeviceQueue& q;
    NcclCommunicator& nccl;
  };

  // Hands the end of the work just queued to the finalizer, which watches it
  // through the communicator (its asynchronous errors, the deadline).
  void watch(Call& c, transport::Deadline deadline, const char* what, Report report) {
    NcclCommunicator& nccl = c.nccl;
    c.q.watch(
        finalizer_,
        [&nccl, deadline, what](cudaEvent_t end) { return nccl.poll(end, deadline, what); },
        std::move(report.phase), std::move(report.done));
  }

  NcclCommunicator& communicator(Communicator& comm, int32_t process_set, int device) {
    const auto key = std::make_pair(process_set, device);
    auto it = comms_.find(key);
    if (it == comms_.end()) {
      // Every member makes the set's communicators in the same order (the
      // order of the set's responses), so the set's count names the same one
      // on every member.
      const std::string store_key = "ringlet/nccl-id/set" + std::to_string(process_set) + "/" +
                                    std::to_string(created_[process_set]++);
      it = comms_.emplace(key, std::make_unique<NcclCommunicator>(comm, device, store_key, rank_))
               .first;
    }
    return *it->second;
  }

  const int rank_;
  std::map<int32_t, int> created_;  // communicators made, per process set
  DeviceQueues queues_{rank_};
  // Destroyed before queues_ (declared after): a communicator's queued work
  // may still use a device's stream.
  std::map<std::pair<int32_t, int>, std::unique_ptr<NcclCommunicator>> comms_;
  // Destroyed first: it waits for every watched collective to end, and its
  // polls use the communicators.
  Finalizer finalizer_;
};

}  // namespace

bool nccl_has_type(DataType dtype) { return nccl_type(dtype).has_value(); }

std::unique_ptr<DeviceCollectives> make_nccl_device_collectives(int rank) {
  return std::make_unique<NcclDeviceCollectives>(rank);
}

}  // namespace ringlet::core::gpu
