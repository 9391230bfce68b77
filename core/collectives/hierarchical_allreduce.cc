// Hierarchical allreduce across hosts that each hold L of the communicator's
// ranks (the same L everywhere), in three steps on the two groups of
// Communicator::host_groups():
//   (1) LOCAL_REDUCESCATTER: the host's ranks reduce the message among
//       themselves and local rank i keeps part i (Horovod's even split of the
//       message over L), through the host's window (direct_reducescatter);
//   (2) CROSS_ALLREDUCE: the ranks of local index i, one per host, allreduce
//       part i across the hosts (the ring over TCP), and that ring's last
//       step scales it by the result's one factor;
//   (3) LOCAL_ALLGATHER: the host's ranks gather every part, through the
//       window again.
// Each host sends 2(H-1)/H of the message to the network against the flat
// ring's 2(HL-1)/(HL), as L rings side by side, and the network sees 2(H-1)
// steps rather than 2(HL-1) (see algorithm_table.cc for when that wins).
//
// The result is the flat allreduce's: the inputs are prescaled once as they
// are staged (as the flat path stages them), an average runs as a sum, and the
// factor result_scale(op, postscale, size) of the whole communicator is
// applied once, by (2), to the reduced part. Integer results and min/max are
// bit-identical to the flat algorithms' (their reductions do not depend on
// the order); floating sums are reduced in another order and may differ in
// the last bits.
//
// Tensors are staged as fused_pieces.h says, in pieces of L fusion pieces
// around the three steps, so that each
// rank's part of a piece, which crosses the network, is one fusion piece
// (1 MiB): a ring of a few slices per host pair.
#include <algorithm>
#include <string>
#include <vector>

#include "core/collectives/algorithms.h"
#include "core/collectives/fused_pieces.h"
#include "core/collectives/group_steps.h"
#include "core/collectives/workspace.h"
#include "ringlet/common/even_split.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/kernels/ops.h"

namespace ringlet::core::collectives {

namespace {

// The host's ranks, as many on every host, else the failure that says not.
int ranks_per_host(const Communicator& comm) {
  const World& w = comm.world();
  for (const std::vector<int>& ranks : w.ranks_on_host) {
    if (ranks.size() != w.ranks_on_host.front().size()) {
      throw common::Failure(common::FailureKind::kInternal,
                            "the hierarchical allreduce needs as many ranks on every host, but "
                            "host " + std::to_string(w.host_of[w.rank]) + " holds " +
                                std::to_string(w.local_size) + " and another " +
                                std::to_string(ranks.size()));
    }
  }
  return w.local_size;
}

}  // namespace

void hierarchical_allreduce(Communicator& comm, const Segments& s, ReduceOp op, double prescale,
                            double postscale) {
  const int L = ranks_per_host(comm);
  const Communicator::HostGroups groups = comm.host_groups();
  Workspace& ws = comm.workspace();
  const DataType dtype = s.dtype;
  const size_t es = s.es;
  const int lr = groups.host->rank();
  const ReduceOp inner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const double factor = kernels::ops::result_scale(op, postscale, comm.size());
  std::vector<size_t>& parts = ws.group_counts;
  parts.resize(L);

  // The three steps on m contiguous elements, prescaled already, in place.
  // `src` is where the input is read from (data itself, or the caller's
  // input where it is not the output).
  auto run = [&](const void* src, std::byte* data, size_t m, size_t first, size_t end) {
    size_t at = 0;
    for (int i = 0; i < L; ++i) {
      parts[i] = common::even_share(m, L, i);
      if (i < lr) at += parts[i];
    }
    std::byte* mine = data + at * es;
    PhaseScope phase(ws, "LOCAL_REDUCESCATTER", first, end);
    step::reducescatter(*groups.host, src, mine, parts, dtype, inner, 1.0);
    phase.next("CROSS_ALLREDUCE");
    step::allreduce(*groups.cross, mine, parts[lr], dtype, inner, factor);
    phase.next("LOCAL_ALLGATHER");
    step::allgather(*groups.host, mine, data, parts, dtype);
  };

  // Each rank's part of a piece, which crosses the network, is one fusion piece.
  const size_t piece = std::max<size_t>(1, ws.tuning.fusion_piece_bytes / es) * L;
  allreduce_in_pieces(ws, s, prescale, piece, run);
}

}  // namespace ringlet::core::collectives
