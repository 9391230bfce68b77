// The device path of the runtime: a response over device tensors is queued
// on the device collectives (NCCL or Ringlet's own over CUDA IPC, core/gpu),
// and its handles complete from their finalizer's thread as the device ends
// the work.
#include "core/nvtx/nvtx.h"
#include "core/runtime/output_layout.h"
#include "core/runtime/runtime.h"
#include "core/timeline/timeline.h"

namespace ringlet::core::runtime {

namespace {

// A failed device collective may leave work on the device that never ends (a
// peer died halfway): its outputs stay allocated, for the rest of a process
// that is failing anyway, rather than freed with cudaFree, which would wait
// for that work without a deadline.
void abandon_device_outputs(std::vector<std::pair<Handle, Result>>& done) {
  for (auto& [handle, result] : done) {
    if (result.device_data) (void)new std::shared_ptr<void>(std::move(result.device_data));
  }
}

}  // namespace

void Runtime::start_on_device(Communicator& comm, const Response& resp,
                              std::vector<Pending*>& items) {
  const Metadata& m = resp.meta[0];
  const CollectiveKind kind = resp.kind;
  // This rank's own GPU, whatever the others use (m.device is the reference
  // rank's); the request's, which negotiation recorded for this rank.
  const int device = resp.devices.at(comm.rank());
  std::vector<gpu::DeviceSegment> tensors;
  std::vector<std::shared_ptr<gpu::Event>> ready;
  std::vector<std::pair<Handle, Result>> done;
  for (Pending* p : items) {
    const Request& r = p->request;
    tensors.push_back({r.input, r.output, static_cast<size_t>(r.meta.elements())});
    ready.push_back(r.ready);
    done.emplace_back(p->handle, Result{{}, r.meta.shape, {}});
  }
  // Allgather, reducescatter and alltoall write device memory the runtime
  // allocates here, handed back in the result.
  OutputLayout layout;
  void* output = nullptr;
  const bool allocates = kind == CollectiveKind::kAllgather ||
                         kind == CollectiveKind::kReducescatter ||
                         kind == CollectiveKind::kAlltoall;
  try {
    if (allocates) {
      layout = output_layout(comm, resp, items[0]->request.meta);
      Result& result = done[0].second;
      result.shape = layout.shape;
      result.received_splits = layout.received_splits;
      result.device = device;
      result.device_bytes = layout.elements * dtype_size(m.dtype);
      result.device_data = device_collectives().allocate(device, result.device_bytes);
      output = result.device_data.get();
    }
  } catch (const std::exception& e) {
    common::Failure f = failure_from(e, rank_);
    f.in_collective(to_string(kind));
    f.for_tensors(resp.names);
    for (const std::string& name : resp.names) fail(name, f);
    throw RuntimeError(f);
  }
  // The names are free again as soon as the work is queued, as when a host
  // collective ends: the handles complete from the finalizer's thread, and a
  // caller woken there may submit the same names at once.
  for (const std::string& name : resp.names) release_reported(name);

  std::shared_ptr<timeline::Timeline> tl;
  {
    std::lock_guard lock(mu_);
    tl = timeline_;
  }
  // Until the device begins the collective's first step, its tensors wait
  // for the work that produces them.
  if (tl) {
    for (const std::string& name : resp.names) tl->activity_start(name, "WAIT_FOR_DATA");
  }
  const std::string queueing = "QUEUE_" + std::string(to_upper_string(kind));
  nvtx::Range range(queueing.c_str(), static_cast<uint64_t>(resp.bytes),
                    static_cast<int64_t>(items.size()));
  // The steps as the device reaches them, on the finalizer's thread.
  auto on_phase = [names = resp.names, tl](const char* phase) {
    if (!tl) return;
    for (const std::string& name : names) {
      tl->activity_end(name);
      tl->activity_start(name, phase);
    }
  };
  // Holds the results (and so the device outputs) until the handles complete.
  auto on_end = [this, names = resp.names, done, tl, kind](const common::Failure* failure) mutable {
    if (tl) {
      for (const std::string& name : names) {
        tl->activity_end(name);
        tl->op_end(name);
      }
    }
    if (failure == nullptr) {
      handles_.complete_all(done);
      return;
    }
    common::Failure f = *failure;
    f.at_rank(rank_);
    f.in_collective(to_string(kind));
    f.for_tensors(names);
    for (auto& [handle, result] : done) handles_.fail(handle, f);
    abandon_device_outputs(done);
    report_device_failure(f);
  };
  try {
    gpu::DeviceCollectives& dc = device_collectives();
    const gpu::DeviceSegment& t = tensors[0];
    // Without a timeline nobody listens to the steps, and the device queue
    // then records no event for them.
    gpu::DeviceCollectives::Report report{
        tl ? std::function<void(const char*)>(std::move(on_phase)) : nullptr, std::move(on_end)};
    switch (kind) {
      case CollectiveKind::kAllreduce:
        dc.allreduce(comm, m.process_set, device, tensors, ready, m.dtype, m.op, m.prescale,
                     m.postscale, std::move(report));
        break;
      case CollectiveKind::kBroadcast:
        dc.broadcast(comm, m.process_set, device, t.output, t.count, m.dtype,
                     comm.rank_of_global(m.root), ready[0], std::move(report));
        break;
      case CollectiveKind::kAllgather:
        dc.allgather(comm, m.process_set, device, t.input, layout.send, output, m.dtype, ready[0],
                     std::move(report));
        break;
      case CollectiveKind::kReducescatter:
        dc.reducescatter(comm, m.process_set, device, t.input, layout.send, output, m.dtype, m.op,
                         m.prescale, m.postscale, ready[0], std::move(report));
        break;
      case CollectiveKind::kAlltoall:
        dc.alltoall(comm, m.process_set, device, t.input, layout.send, output, layout.recv,
                    layout.largest, m.dtype, ready[0], std::move(report));
        break;
      case CollectiveKind::kSend:
      case CollectiveKind::kRecv:
        // Submission refuses device tensors in send and recv (request_validation.cc).
        throw RuntimeError(ErrorKind::kInternal, rank_,
                           "a device transfer reached the device path");
    }
  } catch (const std::exception& e) {
    // Nothing was queued: the handles fail here (execute() finds the names
    // released), and the runtime stops as for any failed collective.
    common::Failure f = failure_from(e, rank_);
    f.in_collective(to_string(kind));
    f.for_tensors(resp.names);
    for (auto& [handle, result] : done) handles_.fail(handle, f);
    abandon_device_outputs(done);
    if (tl) {
      for (const std::string& name : resp.names) {
        tl->activity_end(name);
        tl->op_end(name);
      }
    }
    throw RuntimeError(f);
  }
}

void Runtime::report_device_failure(const common::Failure& failure) {
  {
    std::lock_guard lock(mu_);
    if (!device_failure_) device_failure_ = failure;
  }
  work_cv_.notify_one();
}

gpu::DeviceCollectives& Runtime::device_collectives() {
  if (!device_collectives_) {
    device_collectives_ = gpu::make_device_collectives(rank_, comm_->config());
    // Submission refuses device tensors where nothing serves them.
    if (!device_collectives_) {
      throw RuntimeError(ErrorKind::kInternal, rank_,
                         "a device tensor reached a build without device collectives");
    }
  }
  return *device_collectives_;
}

}  // namespace ringlet::core::runtime
