// Running the agreed responses: the allreduce of one or several fused
// tensors (core::allreduce_segments, which reads the inputs and writes the
// outputs in place of a separate pack and unpack), the per-tensor
// collectives whose output the runtime allocates, and the completion or
// failure of handles. Responses over device tensors go to the device path
// (runtime_device.cc).
#include <algorithm>
#include <cctype>
#include <optional>
#include <span>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/collectives.h"
#include "core/collectives/workspace.h"
#include "core/nvtx/nvtx.h"
#include "core/runtime/negotiation.h"
#include "core/runtime/output_layout.h"
#include "core/runtime/runtime.h"
#include "core/timeline/timeline.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::runtime {

namespace {

// "RING_BROADCAST", "DIRECT_ALLGATHER", ...: the algorithm the table picks
// (allreduces report their own phases instead: see PhaseRecorder).
std::string algorithm_name(Communicator& comm, collectives::Collective c, size_t bytes) {
  if (comm.size() == 1) return "LOCAL_COPY";
  std::string a = "RING";
  try {
    a = std::string(collectives::to_string(collectives::choose_algorithm(comm, c, bytes)));
  } catch (const std::exception&) {
  }
  std::string s = a + "_" + std::string(collectives::to_string(c));
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

void Runtime::execute(const Response& resp, ProcessSet& set, timeline::Timeline* tl) {
  if (!resp.error.empty()) {
    for (const std::string& name : resp.names) {
      if (tl) {
        tl->activity_end(name);
        tl->op_end(name);
      }
      fail(name, ErrorKind::kMismatch, resp.error);
    }
    return;
  }
  // A transfer is its two ranks' alone; the others pass over it.
  if (is_point_to_point(resp.kind) && rank_ != resp.meta[0].root && rank_ != resp.meta[0].peer) {
    return;
  }
  std::vector<Pending*> items;
  // A joined rank runs the others' allreduces contributing zeros, into a sink.
  std::vector<Pending> absent;
  std::vector<std::vector<std::byte>> scratch;
  absent.reserve(resp.names.size());  // stable addresses for `items`
  scratch.reserve(2 * resp.names.size());
  bool joining;
  {
    std::lock_guard lock(mu_);
    joining = join_requested_;
  }
  for (size_t i = 0; i < resp.names.size(); ++i) {
    auto it = reported_.find(resp.names[i]);
    if (it != reported_.end()) {
      items.push_back(&it->second);
      continue;
    }
    if (joining && !resp.devices.empty()) {
      throw RuntimeError(ErrorKind::kInvalidArgument, rank_,
                         "'" + resp.names[i] +
                             "' is a device tensor on the other ranks and this rank has joined: "
                             "join() does not serve device tensors yet");
    }
    if (!joining || resp.kind != CollectiveKind::kAllreduce || set.id != 0) {
      throw RuntimeError(ErrorKind::kInternal, rank_,
                         "negotiation chose '" + resp.names[i] +
                             "', which this rank never submitted (internal error)");
    }
    const Metadata& m = resp.meta[i];
    const size_t bytes = static_cast<size_t>(m.elements()) * dtype_size(m.dtype);
    scratch.emplace_back(bytes);  // zeros in
    scratch.emplace_back(bytes);  // and a sink out
    Request r;
    r.meta = m;
    r.input = scratch[scratch.size() - 2].data();
    r.output = scratch.back().data();
    absent.push_back({std::move(r), 0});
    items.push_back(&absent.back());
  }
  if (tl) {
    for (const std::string& name : resp.names) tl->activity_end(name);
  }
  nvtx::Range range(std::string(to_upper_string(resp.kind)).c_str(),
                    static_cast<uint64_t>(resp.bytes), static_cast<int64_t>(resp.names.size()),
                    resp.meta[0].dtype);
  try {
    if (!resp.devices.empty()) {
      start_on_device(*set.comm, resp, items);
      count_run(resp);
      return;
    }
    if (resp.kind == CollectiveKind::kAllreduce) {
      run_allreduce(*set.comm, resp, items, tl);
      count_run(resp);
      std::vector<std::pair<Handle, Result>> done;
      done.reserve(items.size());
      for (const std::string& name : resp.names) {
        if (tl) tl->op_end(name);
        auto it = reported_.find(name);
        if (it == reported_.end()) continue;  // this rank joined: nothing to complete
        forget_cached(it->second);
        done.emplace_back(it->second.handle,
                          Result{{}, std::move(it->second.request.meta.shape), {}});
        reported_.erase(it);
      }
      {
        std::lock_guard lock(mu_);  // names free before the handles complete
        for (const std::string& name : resp.names) in_flight_.erase(name);
      }
      handles_.complete_all(done);
    } else {
      Result result = run_single(*set.comm, resp, *items[0], tl);
      count_run(resp);
      if (tl) tl->op_end(resp.names[0]);
      finish(resp.names[0], std::move(result));
    }
  } catch (const std::exception& e) {
    common::Failure f = failure_from(e, rank_);
    // A transfer's response is the sender's; the receiver failed its recv.
    f.in_collective(to_string(items[0]->request.meta.kind));
    f.for_tensors(resp.names);
    for (const std::string& name : resp.names) {
      if (tl) tl->op_end(name);
      fail(name, f);
    }
    throw RuntimeError(f);
  }
}

namespace {
// RAII timeline activity on every tensor of a response, plus an NVTX range.
class Phase {
 public:
  Phase(timeline::Timeline* tl, const std::vector<std::string>& names, const std::string& activity,
        uint64_t bytes, DataType)
      : tl_(tl),
        names_(names),
        range_(activity.c_str(), bytes, static_cast<int64_t>(names.size())) {
    if (tl_) {
      for (const auto& n : names_) tl_->activity_start(n, activity);
    }
  }
  ~Phase() {
    if (tl_) {
      for (const auto& n : names_) tl_->activity_end(n);
    }
  }

 private:
  timeline::Timeline* tl_;
  const std::vector<std::string>& names_;
  nvtx::Range range_;
};

// Turns the phases the allreduce algorithms report (RING_REDUCESCATTER,
// DIRECT_ALLGATHER, MEMCPY_IN_FUSION_BUFFER, ...: see collectives::PhaseObserver)
// into timeline activities on the phase's tensors and an NVTX range. Installed
// in the communicator's workspace for one run_allreduce; the algorithms pay
// one branch per phase when nothing is installed.
class PhaseRecorder final : public collectives::PhaseObserver {
 public:
  // names[i] is tensor i of the call, in[i] its input (for the byte counts).
  PhaseRecorder(Communicator& comm, timeline::Timeline* tl, const std::vector<std::string>& names,
                std::span<const kernels::cpu::ConstSegment> in, size_t element_bytes)
      : ws_(comm.workspace()), tl_(tl), names_(names), in_(in), es_(element_bytes) {
    ws_.phases = this;
  }
  ~PhaseRecorder() {
    end();  // a phase left open by an exception still closes
    ws_.phases = nullptr;
  }
  PhaseRecorder(const PhaseRecorder&) = delete;
  PhaseRecorder& operator=(const PhaseRecorder&) = delete;

  void begin(const char* phase, size_t first, size_t end) override {
    end_ = std::min({end, names_.size(), in_.size()});
    first_ = std::min(first, end_);
    uint64_t bytes = 0;
    for (size_t i = first_; i < end_; ++i) bytes += in_[i].count * es_;
    range_.emplace(phase, bytes, static_cast<int64_t>(end_ - first_));
    if (tl_) {
      for (size_t i = first_; i < end_; ++i) tl_->activity_start(names_[i], phase);
    }
    open_ = true;
  }
  void end() override {
    if (!open_) return;
    if (tl_) {
      for (size_t i = first_; i < end_; ++i) tl_->activity_end(names_[i]);
    }
    range_.reset();
    open_ = false;
  }

 private:
  collectives::Workspace& ws_;
  timeline::Timeline* tl_;
  const std::vector<std::string>& names_;
  std::span<const kernels::cpu::ConstSegment> in_;
  size_t es_;
  size_t first_ = 0, end_ = 0;
  bool open_ = false;
  std::optional<nvtx::Range> range_;
};
}  // namespace

void Runtime::run_allreduce(Communicator& comm, const Response& resp, std::vector<Pending*>& items,
                            timeline::Timeline* tl) {
  // One tensor or a fused list, as one message: on one host the window
  // algorithms read the tensors and write the results straight back (the
  // scales ride on those copies), so no fusion buffer pass is needed; the ring
  // packs pieces into a fusion buffer of its own. The algorithms report their
  // phases to the recorder.
  const Metadata& m = resp.meta[0];
  std::vector<kernels::cpu::ConstSegment> in;
  std::vector<kernels::cpu::Segment> out;
  in.reserve(items.size());
  out.reserve(items.size());
  for (Pending* p : items) {
    const Request& r = p->request;
    const size_t n = static_cast<size_t>(r.meta.elements());
    in.push_back({r.input, n});
    out.push_back({r.output, n});
  }
  PhaseRecorder phases(comm, tl, resp.names, in, dtype_size(m.dtype));
  core::allreduce_segments(comm, in, out, m.dtype, m.op, m.prescale, m.postscale);
}

Result Runtime::run_single(Communicator& comm, const Response& resp, Pending& pending,
                           timeline::Timeline* tl) {
  const Metadata& m = resp.meta[0];
  const Request& req = pending.request;
  const DataType dt = m.dtype;
  const size_t es = dtype_size(dt);
  OutputLayout l = output_layout(comm, resp, req.meta);
  Result result{{}, std::move(l.shape), {}};
  // Broadcast and the transfers write the caller's buffer.
  if (resp.kind != CollectiveKind::kBroadcast && !is_point_to_point(resp.kind)) {
    result.data.resize(l.elements * es);
  }

  switch (resp.kind) {
    case CollectiveKind::kAllgather: {
      Phase p(tl, resp.names,
              algorithm_name(comm, collectives::Collective::kAllgather, l.elements * es),
              l.elements * es, dt);
      core::allgather(comm, req.input, result.data.data(), l.send, dt);
      break;
    }
    case CollectiveKind::kBroadcast: {
      const size_t n = l.elements;
      Phase p(tl, resp.names, algorithm_name(comm, collectives::Collective::kBroadcast, n * es),
              n * es, dt);
      // Roots are global ranks (as in Horovod); the set numbers its own.
      core::broadcast(comm, req.output, n, dt, comm.rank_of_global(m.root));
      break;
    }
    case CollectiveKind::kReducescatter: {
      const size_t total = static_cast<size_t>(m.elements());
      const void* src = req.input;
      if (m.prescale != 1.0) {
        Phase p(tl, resp.names, "PRESCALE", total * es, dt);
        if (prescale_buffer_.size() < total * es) prescale_buffer_.resize(total * es);
        const kernels::cpu::ConstSegment seg{req.input, total};
        kernels::cpu::pack(dt, prescale_buffer_.data(), {&seg, 1}, m.prescale);
        src = prescale_buffer_.data();
      }
      {
        // The postscale (with an average's 1/size) is applied once, by the
        // algorithm, to each block as it is finished.
        Phase p(tl, resp.names,
                algorithm_name(comm, collectives::Collective::kReducescatter, total * es),
                total * es, dt);
        core::reducescatter(comm, src, result.data.data(), l.send, dt, m.op, m.postscale);
      }
      break;
    }
    case CollectiveKind::kAlltoall: {
      result.received_splits = std::move(l.received_splits);
      Phase p(tl, resp.names, algorithm_name(comm, collectives::Collective::kAlltoall, 0),
              l.elements * es, dt);
      core::alltoall(comm, req.input, l.send, result.data.data(), l.recv, dt);
      break;
    }
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv: {
      // Every rank runs the set's responses in one order, so the transfer
      // meets its peer on their link between the same two collectives.
      const bool sends = rank_ == m.root;
      const size_t bytes = l.elements * es;
      Phase p(tl, resp.names, sends ? "SEND" : "RECV", bytes, dt);
      transport::Pair& pair = comm.pair(comm.rank_of_global(sends ? m.peer : m.root));
      transport::Request moved;
      if (sends) {
        pair.post_send(req.input, bytes, moved);
      } else {
        pair.post_recv(req.output, bytes, moved);
      }
      transport::Request* requests[] = {&moved};
      transport::Pair* pairs[] = {&pair};
      comm.wait_all(requests, pairs, comm.deadline());
      break;
    }
    case CollectiveKind::kAllreduce:
      break;
  }
  return result;
}

void Runtime::count_run(const Response& resp) {
  std::lock_guard lock(mu_);
  ++stats_.collectives;
  stats_.tensors += resp.names.size();
  if (resp.names.size() > 1) stats_.fused_tensors += resp.names.size();
}

std::optional<Handle> Runtime::release_reported(const std::string& name) {
  auto it = reported_.find(name);
  if (it == reported_.end()) return std::nullopt;
  const Handle h = it->second.handle;
  forget_cached(it->second);
  reported_.erase(it);
  {
    std::lock_guard lock(mu_);
    in_flight_.erase(name);  // before completing: the caller may resubmit at once
  }
  return h;
}

void Runtime::finish(const std::string& name, Result result) {
  if (const std::optional<Handle> h = release_reported(name))
    handles_.complete(*h, std::move(result));
}

void Runtime::forget_cached(const Pending& p) {
  if (auto set = sets_.find(p.request.meta.process_set); set != sets_.end())
    set->second->cache.forget(p.request.meta.name);
}

void Runtime::fail(const std::string& name, common::Failure failure) {
  const std::optional<Handle> h = release_reported(name);
  if (!h) return;
  failure.at_rank(rank_);
  handles_.fail(*h, std::move(failure));
}

void Runtime::fail_everything(common::Failure failure) {
  failure.at_rank(rank_);
  // Each handle's failure says what became of it.
  auto with = [&](const std::string& what) {
    common::Failure f = failure;
    f.set_cause(f.cause() + " (" + what + ")");
    return f;
  };
  std::vector<Pending> queued;
  std::vector<PendingSetChange> changes(std::make_move_iterator(sent_set_changes_.begin()),
                                        std::make_move_iterator(sent_set_changes_.end()));
  sent_set_changes_.clear();
  Handle join = 0;
  {
    std::lock_guard lock(mu_);
    for (PendingSetChange& c : set_change_queue_) changes.push_back(std::move(c));
    set_change_queue_.clear();
    if (stopped_.empty()) {
      stopped_ = failure.body();
      stopped_kind_ = failure.kind();
    }
    queued.swap(queue_);
    in_flight_.clear();
    if (join_requested_) join = join_handle_;
    join_requested_ = false;
  }
  if (join != 0) handles_.fail(join, with("join did not complete"));
  for (PendingSetChange& c : changes)
    handles_.fail(c.handle, with("the process set change did not happen"));
  for (auto& [name, p] : reported_) {
    handles_.fail(p.handle, with("'" + name + "' did not run"));
  }
  reported_.clear();
  for (auto& [id, set] : sets_) set->cache.forget_all();
  for (auto& [id, pending] : unreported_) {
    for (Pending& p : pending) queued.push_back(std::move(p));
  }
  unreported_.clear();
  for (Pending& p : queued)
    handles_.fail(p.handle, with("'" + p.request.meta.name + "' did not run"));
}

}  // namespace ringlet::core::runtime
