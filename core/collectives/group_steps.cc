#include "core/collectives/group_steps.h"

#include <cstdint>
#include <numeric>
#include <string>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/algorithms.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::collectives::step {

namespace {

// The group's choice for a `bytes` message of `c`, as its dispatch table has it.
template <class Fn, size_t N>
Fn chosen(const std::array<Implementation<Fn>, N>& impls, Communicator& group, Collective c,
          size_t bytes) {
  // A group has no hierarchy of its own (one host, or one rank per host), so
  // a hierarchical switch that is on always finds it flat: that is no news
  // for the user, whose collective does run hierarchically.
  group.workspace().flat_despite_switch = ~uint32_t{0};
  const Algorithm a = choose_algorithm(group, c, bytes);
  const Fn run = implementation(impls, a);
  if (run == nullptr) {
    throw common::Failure(common::FailureKind::kInternal,
                          "the algorithm table picks " + std::string(to_string(a)) + " for a " +
                              std::string(to_string(c)) + " within a hierarchical collective, " +
                              "which has no implementation");
  }
  return run;
}

size_t sum(std::span<const size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}


}  // namespace

void reducescatter(Communicator& group, const void* send, void* own_out,
                   std::span<const size_t> counts, DataType dtype, ReduceOp op, double postscale) {
  const size_t total = sum(counts);
  if (total == 0) return;
  if (group.size() == 1) {
    copy_if_apart(own_out, send, total * dtype_size(dtype));
    kernels::cpu::scale(dtype, own_out, total, kernels::ops::result_scale(op, postscale, 1));
    return;
  }
  chosen(kReducescatterImpls, group, Collective::kReducescatter, total * dtype_size(dtype))(
      group, send, own_out, counts, dtype, op, postscale);
}

void allreduce(Communicator& group, void* data, size_t count, DataType dtype, ReduceOp op,
               double postscale) {
  if (count == 0) return;
  if (group.size() == 1) {
    kernels::cpu::scale(dtype, data, count, kernels::ops::result_scale(op, postscale, 1));
    return;
  }
  const kernels::cpu::ConstSegment in{data, count};
  const kernels::cpu::Segment out{data, count};
  const size_t start[2] = {0, count};
  const Segments s{{&in, 1}, {&out, 1}, start, count, dtype, dtype_size(dtype)};
  chosen(kAllreduceImpls, group, Collective::kAllreduce, count * dtype_size(dtype))(
      group, s, op, 1.0, postscale);
}

void allgather(Communicator& group, const void* send, void* recv, std::span<const size_t> counts,
               DataType dtype) {
  const size_t total = sum(counts);
  if (total == 0) return;
  if (group.size() == 1) {
    copy_if_apart(recv, send, total * dtype_size(dtype));
    return;
  }
  chosen(kAllgatherImpls, group, Collective::kAllgather, total * dtype_size(dtype))(
      group, send, recv, counts, dtype);
}

void broadcast(Communicator& group, void* buffer, size_t count, DataType dtype, int root) {
  if (count == 0 || group.size() == 1) return;
  chosen(kBroadcastImpls, group, Collective::kBroadcast, count * dtype_size(dtype))(
      group, buffer, count, dtype, root);
}

}  // namespace ringlet::core::collectives::step
