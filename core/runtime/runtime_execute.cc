// Running the agreed responses: the fused allreduce (packed, reduced and
// unpacked piece by piece), the per-tensor collectives whose output the
// runtime allocates, and the completion or failure of handles.
#include <algorithm>
#include <cctype>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/collectives.h"
#include "core/nvtx/nvtx.h"
#include "core/runtime/negotiation.h"
#include "core/runtime/runtime.h"
#include "core/timeline/timeline.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::runtime {

namespace {

// A fused response is packed, reduced and unpacked in pieces of this size
// (see run_allreduce); the fusion buffer is one piece.
constexpr size_t kFusionPieceBytes = size_t{1} << 20;

std::vector<int64_t> with_first(int64_t first, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s = shape;
  if (s.empty()) s.push_back(first); else s[0] = first;
  return s;
}

// "RING_ALLREDUCE", "DIRECT_ALLGATHER", ...: the algorithm the table picks.
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

void Runtime::execute(const Response& resp, timeline::Timeline* tl) {
  if (!resp.error.empty()) {
    for (const std::string& name : resp.names) {
      if (tl) {
        tl->activity_end(name);
        tl->op_end(name);
      }
      fail(name, resp.error);
    }
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
    if (!joining || resp.kind != CollectiveKind::kAllreduce) {
      throw RuntimeError("rank " + std::to_string(rank_) + ": negotiation chose '" + resp.names[i] +
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
  nvtx::Range range(std::string(to_upper_string(resp.kind)).c_str(), static_cast<uint64_t>(resp.bytes),
                    static_cast<int64_t>(resp.names.size()), resp.meta[0].dtype);
  try {
    if (resp.kind == CollectiveKind::kAllreduce) {
      run_allreduce(resp, items, tl);
      count_run(resp);
      std::vector<std::pair<Handle, Result>> done;
      done.reserve(items.size());
      for (const std::string& name : resp.names) {
        if (tl) tl->op_end(name);
        auto it = reported_.find(name);
        if (it == reported_.end()) continue;  // this rank joined: nothing to complete
        done.emplace_back(it->second.handle, Result{{}, std::move(it->second.request.meta.shape), {}});
        reported_.erase(it);
        cached_pending_.erase(name);
      }
      {
        std::lock_guard lock(mu_);  // names free before the handles complete
        for (const std::string& name : resp.names) in_flight_.erase(name);
      }
      handles_.complete_all(done);
    } else {
      Result result = run_single(resp, *items[0], tl);
      count_run(resp);
      if (tl) tl->op_end(resp.names[0]);
      finish(resp.names[0], std::move(result));
    }
  } catch (const std::exception& e) {
    const std::string msg = std::string(to_string(resp.kind)) + " of " + names_text(resp.names) +
                            " failed: " + e.what();
    for (const std::string& name : resp.names) {
      if (tl) tl->op_end(name);
      fail(name, msg);
    }
    throw RuntimeError(msg);
  }
}

namespace {
// RAII timeline activity on every tensor of a response, plus an NVTX range.
class Phase {
 public:
  Phase(timeline::Timeline* tl, const std::vector<std::string>& names, const std::string& activity,
        uint64_t bytes, DataType)
      : tl_(tl), names_(names), range_(activity.c_str(), bytes, static_cast<int64_t>(names.size())) {
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
}  // namespace

void Runtime::run_allreduce(const Response& resp, std::vector<Pending*>& items, timeline::Timeline* tl) {
  const Metadata& m = resp.meta[0];
  const DataType dt = m.dtype;
  const size_t es = dtype_size(dt);
  const std::string algo = algorithm_name(
      *comm_, collectives::Collective::kAllreduce,
      items.size() == 1 ? static_cast<size_t>(resp.bytes) : std::min<size_t>(resp.bytes, kFusionPieceBytes));

  if (items.size() == 1) {
    const Request& r = items[0]->request;
    const size_t n = static_cast<size_t>(r.meta.elements());
    const void* src = r.input;
    if (m.prescale != 1.0) {
      Phase p(tl, resp.names, "PRESCALE", n * es, dt);
      const kernels::cpu::ConstSegment seg{r.input, n};
      kernels::cpu::pack(dt, r.output, {&seg, 1}, m.prescale);
      src = r.output;
    }
    {
      Phase p(tl, resp.names, algo, n * es, dt);
      core::allreduce(*comm_, src, r.output, n, dt, m.op);
    }
    if (m.postscale != 1.0) {
      Phase p(tl, resp.names, "POSTSCALE", n * es, dt);
      kernels::cpu::scale(dt, r.output, n, m.postscale);
    }
    return;
  }

  // Fused: floats average as a sum whose 1/size joins the postscale in the
  // unpack pass; integers keep the collective's exact integer division.
  const bool avg_in_unpack = m.op == ReduceOp::kAvg && is_floating(dt);
  const ReduceOp op = avg_in_unpack ? ReduceOp::kSum : m.op;
  const double post = m.postscale * (avg_in_unpack ? 1.0 / size_ : 1.0);
  size_t total = 0;
  for (Pending* p : items) total += static_cast<size_t>(p->request.meta.elements());

  // The fused stream runs in pieces of kFusionPieceBytes: pack a piece, reduce
  // it, unpack it, so that it stays in cache from pack to unpack. Packing the
  // whole response first would send every byte through memory three more
  // times (measured: 16 MiB of 64 KiB tensors at np=2 took 2.3x as long).
  const size_t piece = std::max<size_t>(1, kFusionPieceBytes / es);
  const size_t buffer_elems = std::min(total, piece);
  if (fusion_buffer_.size() < buffer_elems * es) fusion_buffer_.resize(buffer_elems * es);  // once
  std::vector<kernels::cpu::ConstSegment> in;
  std::vector<kernels::cpu::Segment> out;
  std::vector<std::string> piece_names;
  size_t t = 0, off = 0;  // the next element: tensor t, element off within it
  for (size_t lo = 0; lo < total; lo += piece) {
    const size_t n = std::min(piece, total - lo);
    in.clear();
    out.clear();
    piece_names.clear();
    for (size_t need = n; need > 0;) {
      const Request& r = items[t]->request;
      const size_t count = static_cast<size_t>(r.meta.elements());
      const size_t take = std::min(count - off, need);
      if (take > 0) {
        in.push_back({static_cast<const std::byte*>(r.input) + off * es, take});
        out.push_back({static_cast<std::byte*>(r.output) + off * es, take});
        if (tl) piece_names.push_back(r.meta.name);
      }
      need -= take;
      off += take;
      if (off == count) {
        ++t;
        off = 0;
      }
    }
    {
      Phase p(tl, piece_names, "MEMCPY_IN_FUSION_BUFFER", n * es, dt);
      kernels::cpu::pack(dt, fusion_buffer_.data(), in, m.prescale);
    }
    {
      Phase p(tl, piece_names, algo, n * es, dt);
      core::allreduce(*comm_, fusion_buffer_.data(), fusion_buffer_.data(), n, dt, op);
    }
    {
      Phase p(tl, piece_names, "MEMCPY_OUT_FUSION_BUFFER", n * es, dt);
      kernels::cpu::unpack(dt, fusion_buffer_.data(), out, post);
    }
  }
}

Result Runtime::run_single(const Response& resp, Pending& pending, timeline::Timeline* tl) {
  const Metadata& m = resp.meta[0];
  const Request& req = pending.request;
  const DataType dt = m.dtype;
  const size_t es = dtype_size(dt);
  const int64_t row = m.row_elements();
  Result result;

  switch (resp.kind) {
    case CollectiveKind::kAllgather: {
      const auto& per = resp.per_rank[0];
      std::vector<size_t> counts(size_);
      int64_t rows = 0;
      for (int r = 0; r < size_; ++r) {
        counts[r] = static_cast<size_t>(per[r][0] * row);
        rows += per[r][0];
      }
      const size_t total = static_cast<size_t>(rows * row);
      result.data.resize(total * es);
      result.shape = with_first(rows, req.meta.shape);
      Phase p(tl, resp.names, algorithm_name(*comm_, collectives::Collective::kAllgather, total * es),
              total * es, dt);
      core::allgather(*comm_, req.input, result.data.data(), counts, dt);
      break;
    }
    case CollectiveKind::kBroadcast: {
      const size_t n = static_cast<size_t>(m.elements());
      result.shape = req.meta.shape;
      Phase p(tl, resp.names, algorithm_name(*comm_, collectives::Collective::kBroadcast, n * es), n * es, dt);
      core::broadcast(*comm_, req.output, n, dt, m.root);
      break;
    }
    case CollectiveKind::kReducescatter: {
      const int64_t d0 = m.shape[0];
      std::vector<size_t> counts(size_);
      for (int r = 0; r < size_; ++r) {
        counts[r] = static_cast<size_t>((d0 / size_ + (r < d0 % size_ ? 1 : 0)) * row);
      }
      const size_t total = static_cast<size_t>(m.elements());
      const void* src = req.input;
      if (m.prescale != 1.0) {
        Phase p(tl, resp.names, "PRESCALE", total * es, dt);
        if (fusion_buffer_.size() < total * es) fusion_buffer_.resize(total * es);
        const kernels::cpu::ConstSegment seg{req.input, total};
        kernels::cpu::pack(dt, fusion_buffer_.data(), {&seg, 1}, m.prescale);
        src = fusion_buffer_.data();
      }
      result.data.resize(counts[rank_] * es);
      result.shape = with_first(static_cast<int64_t>(counts[rank_] / std::max<int64_t>(row, 1)), req.meta.shape);
      if (row == 0) result.shape[0] = d0 / size_ + (rank_ < d0 % size_ ? 1 : 0);
      {
        Phase p(tl, resp.names, algorithm_name(*comm_, collectives::Collective::kReducescatter, total * es),
                total * es, dt);
        core::reducescatter(*comm_, src, result.data.data(), counts, dt, m.op);
      }
      if (m.postscale != 1.0) {
        Phase p(tl, resp.names, "POSTSCALE", counts[rank_] * es, dt);
        kernels::cpu::scale(dt, result.data.data(), counts[rank_], m.postscale);
      }
      break;
    }
    case CollectiveKind::kAlltoall: {
      const auto& splits = resp.per_rank[0];  // splits[i][j]: rows rank i sends to rank j
      std::vector<size_t> send(size_), recv(size_);
      int64_t rows = 0;
      for (int j = 0; j < size_; ++j) {
        send[j] = static_cast<size_t>(splits[rank_][j] * row);
        recv[j] = static_cast<size_t>(splits[j][rank_] * row);
        rows += splits[j][rank_];
        result.received_splits.push_back(splits[j][rank_]);
      }
      result.data.resize(static_cast<size_t>(rows * row) * es);
      result.shape = with_first(rows, req.meta.shape);
      Phase p(tl, resp.names, algorithm_name(*comm_, collectives::Collective::kAlltoall, 0),
              static_cast<uint64_t>(rows * row) * es, dt);
      core::alltoall(*comm_, req.input, send, result.data.data(), recv, dt);
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

void Runtime::finish(const std::string& name, Result result) {
  auto it = reported_.find(name);
  if (it == reported_.end()) return;
  const Handle h = it->second.handle;
  reported_.erase(it);
  cached_pending_.erase(name);
  {
    std::lock_guard lock(mu_);
    in_flight_.erase(name);  // before completing: the caller may resubmit at once
  }
  handles_.complete(h, std::move(result));
}

void Runtime::fail(const std::string& name, const std::string& error) {
  auto it = reported_.find(name);
  if (it == reported_.end()) return;
  const Handle h = it->second.handle;
  reported_.erase(it);
  cached_pending_.erase(name);
  {
    std::lock_guard lock(mu_);
    in_flight_.erase(name);
  }
  handles_.fail(h, error);
}

void Runtime::fail_everything(const std::string& error) {
  std::vector<Pending> queued;
  Handle join = 0;
  {
    std::lock_guard lock(mu_);
    if (stopped_.empty()) stopped_ = error;
    queued.swap(queue_);
    in_flight_.clear();
    if (join_requested_) join = join_handle_;
    join_requested_ = false;
  }
  if (join != 0) handles_.fail(join, error + " (join did not complete)");
  for (auto& [name, p] : reported_) {
    handles_.fail(p.handle, error + " ('" + name + "' did not run)");
  }
  reported_.clear();
  cached_pending_.clear();
  for (Pending& p : queued) handles_.fail(p.handle, error + " ('" + p.request.meta.name + "' did not run)");
}

}  // namespace ringlet::core::runtime
