// Alltoall with per-rank splits over pairs, by pairwise exchange: at step s
// (1..n-1) rank r sends its block for (r+s)%n and receives the block from
// (r-s+n)%n, straight from and into the caller's buffers. Every rank talks to
// a different peer at each step, so no link carries two blocks at once and no
// rank is a hot spot. Up to 4 steps are in flight, so that small blocks cost a
// fraction of a round trip each. The own block is a local copy. In place
// (send overlapping recv) the send side is copied aside first, since a
// received block may land where a later send still reads.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/collectives/algorithms.h"
#include "core/collectives/workspace.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::collectives {

void pairwise_alltoall(Communicator& comm, const void* send_v, std::span<const size_t> send_counts,
                       void* recv_v, std::span<const size_t> recv_counts, DataType dtype) {
  const int n = comm.size();
  const int me = comm.rank();
  const size_t es = dtype_size(dtype);
  Workspace& ws = comm.workspace();
  comm.connect_all();

  std::vector<size_t> soff(n + 1, 0), roff(n + 1, 0);
  for (int r = 0; r < n; ++r) {
    soff[r + 1] = soff[r] + send_counts[r];
    roff[r + 1] = roff[r] + recv_counts[r];
  }
  const auto* send = static_cast<const std::byte*>(send_v);
  auto* recv = static_cast<std::byte*>(recv_v);
  std::vector<std::byte> aside;
  if (send < recv + roff[n] * es && recv < send + soff[n] * es) {
    aside.assign(send, send + soff[n] * es);
    send = aside.data();
  }
  if (recv_counts[me] != send_counts[me]) {
    throw transport::Error(me, "alltoall: rank " + std::to_string(me) + " sends itself " +
                                   std::to_string(send_counts[me]) + " elements but expects " +
                                   std::to_string(recv_counts[me]));
  }
  if (send_counts[me] > 0)
    kernels::cpu::copy(recv + roff[me] * es, send + soff[me] * es, send_counts[me] * es);

  constexpr int kSteps = 4;  // steps in flight; 2 requests each
  std::array<transport::Request*, 2 * kSteps> reqs{};
  std::array<transport::Pair*, 2 * kSteps> pairs{};
  for (int first = 1; first < n; first += kSteps) {
    int k = 0;
    const int last = std::min(n, first + kSteps);
    for (int s = first; s < last; ++s) {
      const int to = (me + s) % n;
      const int from = (me - s + n) % n;
      transport::Pair& rp = comm.pair(from);
      transport::Pair& sp = comm.pair(to);
      transport::Request& rr = ws.recv_reqs[(s - first) % kMaxInFlight];
      transport::Request& sr = ws.send_reqs[(s - first) % kMaxInFlight];
      rp.post_recv(recv + roff[from] * es, recv_counts[from] * es, rr);
      sp.post_send(send + soff[to] * es, send_counts[to] * es, sr);
      reqs[k] = &rr;
      pairs[k++] = &rp;
      reqs[k] = &sr;
      pairs[k++] = &sp;
    }
    comm.wait_all(std::span(reqs.data(), k), std::span(pairs.data(), k), comm.deadline());
  }
}

}  // namespace ringlet::core::collectives
