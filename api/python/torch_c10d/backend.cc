// The ringlet backend (backend.h): its life, the names of its collectives,
// barrier, and what it refuses. The collectives are in reductions.cc and
// movers.cc, send and recv in point_to_point.cc; these and work.cc,
// tensor_views.cc compile as one unit
// (api/python/CMakeLists.txt), since each would pay for torch's headers.
#include "torch_c10d/backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>

#include "ringlet/ringlet.h"
#include "torch_c10d/work.h"

namespace ringlet::torch_c10d {

namespace {

// Backends whose creator started Ringlet (owns_runtime): the last stops it.
std::atomic<int> runtime_owners{0};

const char* op_title(c10d::OpType type) {
  switch (type) {
    case c10d::OpType::BROADCAST:
      return "broadcast";
    case c10d::OpType::ALLREDUCE:
      return "all_reduce";
    case c10d::OpType::ALLREDUCE_COALESCED:
      return "all_reduce_coalesced";
    case c10d::OpType::ALLGATHER:
      return "all_gather";
    case c10d::OpType::_ALLGATHER_BASE:
      return "all_gather_into_tensor";
    case c10d::OpType::REDUCE_SCATTER:
      return "reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE:
      return "reduce_scatter_tensor";
    case c10d::OpType::ALLTOALL_BASE:
      return "all_to_all_single";
    case c10d::OpType::ALLTOALL:
      return "all_to_all";
    case c10d::OpType::BARRIER:
      return "barrier";
    case c10d::OpType::REDUCE:
      return "reduce";
    case c10d::OpType::GATHER:
      return "gather";
    case c10d::OpType::SCATTER:
      return "scatter";
    case c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED:
      return "all_gather_into_tensor_coalesced";
    case c10d::OpType::ALLGATHER_COALESCED:
      return "all_gather_coalesced";
    case c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED:
      return "reduce_scatter_tensor_coalesced";
    default:
      return "collective";
  }
}

const char* profiling_title(c10d::OpType type) {
  switch (type) {
    case c10d::OpType::BROADCAST:
      return "ringlet:broadcast";
    case c10d::OpType::ALLREDUCE:
      return "ringlet:all_reduce";
    case c10d::OpType::ALLREDUCE_COALESCED:
      return "ringlet:all_reduce_coalesced";
    case c10d::OpType::ALLGATHER:
      return "ringlet:all_gather";
    case c10d::OpType::_ALLGATHER_BASE:
      return "ringlet:all_gather_into_tensor";
    case c10d::OpType::REDUCE_SCATTER:
      return "ringlet:reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE:
      return "ringlet:reduce_scatter_tensor";
    case c10d::OpType::ALLTOALL_BASE:
      return "ringlet:all_to_all_single";
    case c10d::OpType::ALLTOALL:
      return "ringlet:all_to_all";
    case c10d::OpType::BARRIER:
      return "ringlet:barrier";
    case c10d::OpType::REDUCE:
      return "ringlet:reduce";
    case c10d::OpType::GATHER:
      return "ringlet:gather";
    case c10d::OpType::SCATTER:
      return "ringlet:scatter";
    case c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED:
      return "ringlet:all_gather_into_tensor_coalesced";
    case c10d::OpType::ALLGATHER_COALESCED:
      return "ringlet:all_gather_coalesced";
    case c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED:
      return "ringlet:reduce_scatter_tensor_coalesced";
    default:
      return "ringlet:collective";
  }
}

}  // namespace

Backend::Backend(int rank, int size, std::string group_name, int process_set,
                 std::vector<int> global_ranks, bool owns_runtime)
    : c10d::Backend(rank, size),
      group_name_(std::move(group_name)),
      process_set_(process_set),
      global_ranks_(std::move(global_ranks)),
      owns_runtime_(owns_runtime),
      names_(group_name_, process_set) {
  TORCH_CHECK(ringlet::is_initialized(), "ringlet: the backend needs Ringlet initialized");
  TORCH_CHECK(static_cast<int>(global_ranks_.size()) == size, "ringlet: process group of ", size,
              " ranks given ", global_ranks_.size(), " global ranks");
  TORCH_CHECK(ringlet::process_set_rank(process_set_) == rank &&
                  ringlet::process_set_size(process_set_) == size,
              "ringlet: process group '", group_name_, "' is rank ", rank, " of ", size,
              " but Ringlet's process set ", process_set_, " has this process as rank ",
              ringlet::process_set_rank(process_set_), " of ",
              ringlet::process_set_size(process_set_));
  if (owns_runtime_) ++runtime_owners;
}

Backend::~Backend() { shutdown(); }

void Backend::shutdown() {
  if (released_.exchange(true)) return;
  // The last backend that started Ringlet stops it; a runtime the program
  // started (hvd.init()) is the program's to stop.
  if (owns_runtime_ && --runtime_owners == 0 && ringlet::is_initialized()) ringlet::shutdown();
}

namespace {

// What a call's slot would hold the next step if the step repeats: its op,
// dtypes and shapes (collective_names.h).
uint64_t signature(c10d::OpType type, const std::vector<at::Tensor>& outputs,
                   const std::optional<std::vector<at::Tensor>>& inputs) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words below
  const auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  const auto tensors = [&](const std::vector<at::Tensor>& list) {
    mix(list.size());
    for (const at::Tensor& t : list) {
      mix(static_cast<uint64_t>(t.scalar_type()));
      mix(static_cast<uint64_t>(t.dim()));
      for (int64_t d : t.sizes()) mix(static_cast<uint64_t>(d));
    }
  };
  mix(static_cast<uint64_t>(type));
  tensors(outputs);
  if (inputs) tensors(*inputs);
  return h;
}

}  // namespace

Backend::Collective Backend::begin(c10d::OpType type, std::vector<at::Tensor> outputs,
                                   const std::optional<std::vector<at::Tensor>>& inputs) {
  const uint64_t sequence = names_.sequence();
  Collective c;
  c.what = std::string(op_title(type)) + " #" + std::to_string(sequence) + " of process group '" +
           group_name_ + "' on rank " + std::to_string(getRank());
  CollectiveNames::Taken taken =
      submit(c.what, [&] { return names_.take(signature(type, outputs, inputs), op_title(type)); });
  c.name = std::move(taken.name);
  c.work = c10::make_intrusive<Work>(getRank(), type, profiling_title(type), std::move(outputs),
                                     c.what, inputs);
  c.work->hold_until_settled(std::move(taken.lease));
  return c;
}

c10::intrusive_ptr<c10d::Work> Backend::barrier(const c10d::BarrierOptions&) {
  Collective c = begin(c10d::OpType::BARRIER, std::vector<at::Tensor>{}, std::nullopt);
  (void)c.name;  // a barrier is unnamed in Ringlet: one at a time per process set
  auto handle = submit(c.what, [&] { return ringlet::barrier_async(process_set_); });
  c.work->start({handle}, nullptr);
  return c.work;
}

// ---------------------------------------------------------------------------
// Not served yet

namespace {

[[noreturn]] void not_served(const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "ringlet: ", op,
      " is not served yet by the ringlet backend (served: all_reduce, all_reduce_coalesced, "
      "all_gather and its coalesced form, all_gather_into_tensor and its coalesced form, "
      "reduce_scatter, reduce_scatter_tensor and its coalesced form, all_to_all, "
      "all_to_all_single, broadcast, reduce, gather, scatter, barrier, send, recv from a named "
      "rank); a process group of another backend serves it");
  std::abort();  // unreachable: the check throws
}

}  // namespace

c10::intrusive_ptr<c10d::Work> Backend::recvAnysource(std::vector<at::Tensor>&, int) {
  not_served("recv from any source");
}

}  // namespace ringlet::torch_c10d
