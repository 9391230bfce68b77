// The ringlet backend of torch.distributed: a c10d::Backend whose collectives
// are Ringlet's asynchronous ones (api/include/ringlet/ringlet.h) on one
// process set. Ringlet's runtime is one per process and started before the
// backend (ringlet/torch/distributed.py meets the other ranks through
// PyTorch's store or ringletrun's variables); a backend is a view of one of
// its process sets, so several process groups on the same ranks share it.
//
// Collectives are named "torch.<group>.<slot>.<op>", the slot a function of
// the sequence number that repeats with the group's step, so that Ringlet's
// response cache serves them (collective_names.h): every rank of a process
// group calls its collectives in the same order (torch.distributed's rule),
// so the same sequence number names the same collective everywhere, and two
// groups' names never meet.
//
// Served here: host (CPU) tensors. Data that is only moved (broadcast,
// allgather, alltoall) goes as bytes, so every dtype is served; reductions
// take Ringlet's dtypes, complex sums as pairs of reals, bool as bytes
// (sum and max are "or", product and min "and").
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <tuple>
#include <vector>

#include "ringlet/ringlet.h"
#include "torch_c10d/collective_names.h"
#include "torch_c10d/work.h"

namespace ringlet::torch_c10d {

// Runs a submission to Ringlet; a ringlet::Error it throws (a bad call, or
// Ringlet not running) becomes PyTorch's RuntimeError naming the collective.
template <typename F>
auto submit(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const ringlet::Error& e) {
    TORCH_CHECK(false, "ringlet: ", what, " was refused: ", e.what());
    throw;  // unreachable: the check throws
  }
}

class Backend : public c10d::Backend {
 public:
  // `process_set`: Ringlet's set that holds exactly `global_ranks` (group
  // rank i is global rank global_ranks[i]). `owns_runtime`: this backend's
  // creator started Ringlet, which stops when the last such backend goes.
  Backend(int rank, int size, std::string group_name, int process_set,
          std::vector<int> global_ranks, bool owns_runtime);
  ~Backend() override;

  const std::string getBackendName() const override { return "ringlet"; }
  uint64_t getSequenceNumberForGroup() override { return names_.sequence(); }
  void shutdown() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // reduce: an allreduce that only the root keeps; gather and scatter: an
  // alltoall to or from the root alone; the coalesced forms: one handle each.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;

  // Rank 0 awaits every rank's arrival within `opts.timeout` and names those
  // that did not come (all of them with `waitAllRanks`), then releases the
  // others, which wait as long for it: Gloo's monitored barrier, on
  // Ringlet's transfers (point_to_point.cc).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  // Ringlet's transfers (point_to_point.cc): the n-th send from rank a to
  // rank b with a tag meets b's n-th recv from a with that tag.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;

  // Not served yet: each refuses by name (NotImplementedError in Python).
  // A Ringlet transfer is named by both its ranks, which a receive from any
  // source does not know.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  // A collective's name ("torch.<group>.<slot>.<op>"), its description for
  // errors ("all_reduce #3 of process group '0' on rank 1") and its Work,
  // which holds the name's slot until it has run.
  struct Collective {
    std::string name;
    std::string what;
    c10::intrusive_ptr<Work> work;
  };
  Collective begin(c10d::OpType type, std::vector<at::Tensor> outputs,
                   const std::optional<std::vector<at::Tensor>>& inputs);
  // all_reduce (keep) and reduce (keep on the root) with BAND, BOR or BXOR
  // (bitwise.cc).
  c10::intrusive_ptr<c10d::Work> bitwise_allreduce(at::Tensor user, const c10d::ReduceOp& op,
                                                   c10d::OpType type, bool keep);
  // A send's or recv's: "torch.<group>.p2p.<from>.<to>.<tag>.<count>", group
  // ranks, counted per (from, to, tag); outside the group's sequence, which
  // only collectives (called by every rank) advance.
  Collective begin_transfer(c10d::OpType type, int peer, int tag, std::vector<at::Tensor> tensors);

  std::string group_name_;
  int process_set_;
  std::vector<int> global_ranks_;
  bool owns_runtime_;
  std::atomic<bool> released_{false};
  CollectiveNames names_;
  std::mutex transfers_mutex_;
  std::map<std::tuple<int, int, int>, uint64_t> transfers_;  // (from, to, tag) -> count so far
  uint64_t monitored_barriers_ = 0;
};

// BAND, BOR or BXOR.
bool is_bitwise(const c10d::ReduceOp& op);

}  // namespace ringlet::torch_c10d
