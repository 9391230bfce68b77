// The collectives' entry points: argument checks, the trivial cases (one rank,
// nothing to move), the choice of algorithm, and error handling. Any failure
// aborts the communicator (so that peers stop at once instead of at their
// deadline) and surfaces as a common::Failure that carries this rank, the
// peer and the collective's name as fields.
#include "core/collectives/collectives.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <set>
#include <stdexcept>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/collectives/algorithm_table.h"
#include "core/collectives/algorithms.h"
#include "ringlet/common/duration_text.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core {

namespace {

using collectives::Algorithm;
using collectives::Collective;
using collectives::copy_if_apart;

using common::seconds_text;

// Aborts the communicator with `f` (which tells the peers at once), then
// adds why `peer` failed if it says so soon: the rank we waited for may have
// been waiting itself, and its reason names the culprit. A peer that lost a
// rank, or timed out waiting for one, makes this failure that loss or that
// timeout too, learnt second-hand: the job cannot go on without the rank it
// names, however this rank noticed. The culprit may have learnt it
// second-hand as well (it published before it asked), so the chain is
// followed, each rank once, until a rank that published nothing (the dead
// one) or one that failed on its own.
void fail(Communicator& comm, common::Failure& f) {
  comm.abort(f);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  std::set<int> asked = {f.rank()};
  for (int peer = f.peer(); peer >= 0 && asked.insert(peer).second;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    const auto theirs = comm.failure_of(peer, std::max(left, std::chrono::milliseconds(0)));
    if (!theirs) return;
    if (f.cause().find(theirs->what) == std::string::npos) f.add_cause(theirs->what);
    const bool second_hand =
        f.kind() == common::FailureKind::kTimeout || f.kind() == common::FailureKind::kPeerLost;
    if (theirs->peer < 0 || theirs->peer == f.rank() || !second_hand) return;
    f.set_kind(theirs->kind).set_peer(theirs->peer);
    peer = theirs->peer;
  }
}

// Runs a collective's body; any failure leaves as a common::Failure that
// names this rank and the collective (unless a lower layer already did).
template <class F>
void guarded(Communicator& comm, Collective c, F&& body) {
  // Errors name world ranks, also on a process set's communicator.
  const int self = comm.global_rank(comm.rank());
  const std::string_view name = collectives::to_string(c);
  if (comm.failed()) {
    // Reported as what it was (a lost peer stays a lost peer), by this rank,
    // in this collective.
    common::Failure f = comm.failed_earlier();
    f.in_collective(name);
    throw f;
  }
  try {
    body();
  } catch (const ConfigError&) {
    throw;  // the same on every rank: nothing to abort
  } catch (common::Failure& e) {
    if (e.kind() == common::FailureKind::kInvalidArgument) throw;  // a caller's bug: nothing moved
    e.at_rank(self);
    e.in_collective(name);
    // This rank's own wait ran out (not a report of an earlier failure):
    // say how long it waited.
    if (e.kind() == common::FailureKind::kTimeout && !comm.failed()) {
      e.set_cause("timed out after " + seconds_text(comm.config().timeout) + " waiting for rank " +
                  std::to_string(e.peer()));
    }
    fail(comm, e);
    throw;
  } catch (const std::exception& e) {
    transport::Error f(self, -1, e.what());
    f.in_collective(name);
    comm.abort(f);
    throw f;
  }
}

void check_types(DataType dtype) {
  if (!is_valid(dtype))
    throw common::caller_error("invalid dtype " + std::to_string(static_cast<int>(dtype)));
}
void check_op(ReduceOp op) {
  if (!is_valid(op))
    throw common::caller_error("invalid reduce op " + std::to_string(static_cast<int>(op)));
}
void check_counts(const Communicator& comm, std::span<const size_t> counts, const char* what) {
  if (counts.size() != static_cast<size_t>(comm.size())) {
    throw common::caller_error(std::string(what) + " has " + std::to_string(counts.size()) +
                               " entries for " + std::to_string(comm.size()) + " ranks");
  }
}
size_t sum(std::span<const size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

// Runs the algorithm that the table picks for a `bytes` message of `c` (the
// same on every rank), from the collective's dispatch table.
template <class Fn, size_t N, class... Args>
void dispatch(const std::array<collectives::Implementation<Fn>, N>& impls, Communicator& comm,
              Collective c, size_t bytes, Args&&... args) {
  guarded(comm, c, [&] {
    const Algorithm a = collectives::choose_algorithm(comm, c, bytes);
    const Fn run = collectives::implementation(impls, a);
    if (run == nullptr) {
      throw common::Failure(common::FailureKind::kInternal,
                            "the algorithm table picks " + std::string(collectives::to_string(a)) +
                                ", which has no implementation");
    }
    run(comm, std::forward<Args>(args)...);
  });
}

// The window algorithms take their message as Segments; one tensor is one.
void run_allreduce(Communicator& comm, const collectives::Segments& s, ReduceOp op, double prescale,
                   double postscale) {
  dispatch(collectives::kAllreduceImpls, comm, Collective::kAllreduce, s.total * s.es, s, op,
           prescale, postscale);
}

}  // namespace

void allreduce(Communicator& comm, const void* send, void* recv, size_t count, DataType dtype,
               ReduceOp op) {
  check_types(dtype);
  check_op(op);
  if (count == 0) return;
  const size_t bytes = count * dtype_size(dtype);
  if (comm.size() == 1) {
    collectives::PhaseScope phase(comm.workspace(), "LOCAL_COPY");
    copy_if_apart(recv, send, bytes);
    return;
  }
  const kernels::cpu::ConstSegment in{send, count};
  const kernels::cpu::Segment out{recv, count};
  const size_t start[2] = {0, count};
  const collectives::Segments s{{&in, 1}, {&out, 1}, start, count, dtype, dtype_size(dtype)};
  run_allreduce(comm, s, op, 1.0, 1.0);
}

void allreduce_segments(Communicator& comm, std::span<const kernels::cpu::ConstSegment> inputs,
                        std::span<const kernels::cpu::Segment> outputs, DataType dtype, ReduceOp op,
                        double prescale, double postscale) {
  check_types(dtype);
  check_op(op);
  if (inputs.size() != outputs.size()) {
    throw common::caller_error("allreduce_segments: " + std::to_string(inputs.size()) +
                               " inputs but " + std::to_string(outputs.size()) + " outputs");
  }
  std::vector<size_t>& start = comm.workspace().segment_start;
  start.resize(inputs.size() + 1);
  start[0] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].count != outputs[i].count) {
      throw common::caller_error("allreduce_segments: tensor " + std::to_string(i) + " has " +
                                 std::to_string(inputs[i].count) + " input but " +
                                 std::to_string(outputs[i].count) + " output elements");
    }
    start[i + 1] = start[i] + inputs[i].count;
  }
  const size_t total = start.back();
  if (total == 0) return;
  const collectives::Segments s{inputs, outputs, start.data(), total, dtype, dtype_size(dtype)};
  if (comm.size() == 1) {
    // Nothing to reduce: the result is the input, prescaled and then scaled
    // by the result's factor (the postscale: an average over one rank divides
    // by 1).
    collectives::PhaseScope phase(comm.workspace(), "LOCAL_COPY");
    const double factor = kernels::ops::result_scale(op, postscale, 1);
    s.for_each(0, total, [&](size_t i, size_t at, size_t, size_t n) {
      const size_t es = s.es;
      const auto* src = static_cast<const std::byte*>(inputs[i].data) + at * es;
      auto* dst = static_cast<std::byte*>(outputs[i].data) + at * es;
      if (prescale == 1.0) {
        copy_if_apart(dst, src, n * es);
      } else {
        const kernels::cpu::ConstSegment seg{src, n};
        kernels::cpu::pack(dtype, dst, {&seg, 1}, prescale);
      }
      kernels::cpu::scale(dtype, dst, n, factor);
    });
    return;
  }
  run_allreduce(comm, s, op, prescale, postscale);
}

void allgather(Communicator& comm, const void* send, void* recv,
               std::span<const size_t> recv_counts, DataType dtype) {
  check_types(dtype);
  check_counts(comm, recv_counts, "recv_counts");
  const size_t es = dtype_size(dtype);
  const size_t total = sum(recv_counts);
  if (total == 0) return;
  if (comm.size() == 1) {
    copy_if_apart(recv, send, total * es);
    return;
  }
  dispatch(collectives::kAllgatherImpls, comm, Collective::kAllgather, total * es, send, recv,
           recv_counts, dtype);
}

void broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root) {
  check_types(dtype);
  if (root < 0 || root >= comm.size()) {
    throw common::caller_error("broadcast root " + std::to_string(root) + " is not a rank of " +
                               std::to_string(comm.size()));
  }
  if (count == 0 || comm.size() == 1) return;
  dispatch(collectives::kBroadcastImpls, comm, Collective::kBroadcast, count * dtype_size(dtype),
           buffer, count, dtype, root);
}

void reducescatter(Communicator& comm, const void* send, void* recv,
                   std::span<const size_t> recv_counts, DataType dtype, ReduceOp op,
                   double postscale) {
  check_types(dtype);
  check_op(op);
  check_counts(comm, recv_counts, "recv_counts");
  const size_t es = dtype_size(dtype);
  const size_t total = sum(recv_counts);
  if (total == 0) return;
  if (comm.size() == 1) {
    copy_if_apart(recv, send, total * es);
    kernels::cpu::scale(dtype, recv, total, kernels::ops::result_scale(op, postscale, 1));
    return;
  }
  dispatch(collectives::kReducescatterImpls, comm, Collective::kReducescatter, total * es, send,
           recv, recv_counts, dtype, op, postscale);
}

void alltoall(Communicator& comm, const void* send, std::span<const size_t> send_counts, void* recv,
              std::span<const size_t> recv_counts, DataType dtype) {
  check_types(dtype);
  check_counts(comm, send_counts, "send_counts");
  check_counts(comm, recv_counts, "recv_counts");
  if (comm.size() == 1) {
    if (send_counts[0] != recv_counts[0]) {
      throw common::caller_error("alltoall: rank 0 sends itself " + std::to_string(send_counts[0]) +
                                 " elements but expects " + std::to_string(recv_counts[0]));
    }
    copy_if_apart(recv, send, send_counts[0] * dtype_size(dtype));
    return;
  }
  // Local totals differ between ranks: the choice must not depend on them.
  dispatch(collectives::kAlltoallImpls, comm, Collective::kAlltoall, 0, send, send_counts, recv,
           recv_counts, dtype);
}

void barrier(Communicator& comm) {
  if (comm.size() == 1) return;
  dispatch(collectives::kBarrierImpls, comm, Collective::kBarrier, 0);
}

}  // namespace ringlet::core
