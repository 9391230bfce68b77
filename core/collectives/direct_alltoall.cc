// Direct alltoall through the shared-memory window (one host), per-rank
// splits. Each rank stages its whole send buffer (a round, see window_layout.h, at a time)
// and, in the first round, its send counts into the control block; after one
// flag per round every rank reads, from every peer's staging, the block that
// peer addressed to it and copies it into place. A rank cannot know its peers'
// send layouts or how many rounds the largest sender needs, so the first
// round's counts tell both; then every rank runs the same number of rounds.
// One flag per round: alltoall blocks are read whole, so finer slices would
// not let anyone start earlier. In place with several rounds, the send side is
// copied aside first (a received block could land where a later round reads).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"

namespace ringlet::core::collectives {

void direct_alltoall(Communicator& comm, const void* send_v, std::span<const size_t> send_counts,
                     void* recv_v, std::span<const size_t> recv_counts, DataType dtype) {
  namespace cpu = kernels::cpu;
  WindowView v(comm);
  Workspace& ws = comm.workspace();
  const int n = v.size();
  const int me = v.me();
  const size_t es = dtype_size(dtype);
  const size_t re = v.round_elems(es);
  std::vector<size_t> roff(n + 1, 0);
  size_t send_total = 0;
  for (int r = 0; r < n; ++r) {
    roff[r + 1] = roff[r] + recv_counts[r];
    send_total += send_counts[r];
  }
  const auto* send = static_cast<const std::byte*>(send_v);
  auto* recv = static_cast<std::byte*>(recv_v);
  std::vector<std::byte> aside;
  if (send_total > re && send < recv + roff[n] * es && recv < send + send_total * es) {
    aside.assign(send, send + send_total * es);
    send = aside.data();
  }

  // Round 0: counts and the first piece.
  const uint64_t g0 = ws.next_round();
  v.wait_half_free(g0);
  uint64_t* my_counts = v.counts(me, g0);
  for (int d = 0; d < n; ++d) my_counts[d] = send_counts[d];
  cpu::copy(v.staging(me, g0), send, std::min(re, send_total) * es);
  v.publish(v.control(me).staged, flag_value(g0, 1));

  ws.peer_offset.assign(n, 0);
  ws.peer_count.assign(n, 0);
  size_t rounds = 1;
  for (int p = 0; p < n; ++p) {
    if (p != me) v.wait_at_least(p, &SegmentControl::staged, flag_value(g0, 1));
    const uint64_t* c = v.counts(p, g0);
    size_t total_p = 0;
    for (int d = 0; d < n; ++d) {
      if (d == me) ws.peer_offset[p] = total_p;
      total_p += c[d];
    }
    ws.peer_count[p] = c[me];
    if (ws.peer_count[p] != recv_counts[p]) {
      throw transport::Error(v.global(p), "alltoall: rank " + std::to_string(v.global(p)) +
                                              " sends " + std::to_string(ws.peer_count[p]) +
                                              " elements to rank " + std::to_string(comm.rank()) +
                                              ", which expects " + std::to_string(recv_counts[p]));
    }
    rounds = std::max(rounds, (total_p + re - 1) / re);
  }

  for (size_t j = 0; j < rounds; ++j) {
    const size_t lo = j * re, hi = lo + re;
    uint64_t g = g0;
    if (j > 0) {
      g = ws.next_round();
      v.wait_half_free(g);
      if (send_total > lo) {
        cpu::copy(v.staging(me, g), send + lo * es, std::min(re, send_total - lo) * es);
      }
      v.publish(v.control(me).staged, flag_value(g, 1));
    }
    for (int q = 0; q < n; ++q) {
      const int p = (me + q) % n;
      const size_t b0 = std::max(lo, ws.peer_offset[p]);
      const size_t b1 = std::min(hi, ws.peer_offset[p] + ws.peer_count[p]);
      if (b0 >= b1) continue;
      if (p != me) v.wait_at_least(p, &SegmentControl::staged, flag_value(g, 1));
      cpu::copy(recv + (roff[p] + b0 - ws.peer_offset[p]) * es, v.staging(p, g) + (b0 - lo) * es,
                (b1 - b0) * es);
    }
    v.finish_round(g);
  }
}

}  // namespace ringlet::core::collectives
