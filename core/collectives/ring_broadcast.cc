// Pipelined ring broadcast from any root: a chain root -> root+1 -> ... ->
// root-1 along the ring order. The buffer is cut into sub-chunks of
// ring_slice_bytes; each rank receives sub-chunk j from its left neighbour
// straight into the buffer and forwards it to the right as soon as it has
// arrived, while sub-chunks j+1.. are still on the way: the time is one pass
// of the buffer plus (n-1) sub-chunk latencies instead of (n-1) passes. Up to
// ring_in_flight posts per direction keep the link busy while a forward is
// being posted. The last rank of the chain only receives, the root only sends.
#include <algorithm>
#include <array>

#include "core/collectives/algorithms.h"
#include "core/collectives/ring_engine.h"

namespace ringlet::core::collectives {

void ring_broadcast(Communicator& comm, void* buffer, size_t count, DataType dtype, int root) {
  const World& w = comm.world();
  const int n = w.size;
  Workspace& ws = comm.workspace();
  const size_t es = dtype_size(dtype);
  const size_t slice = std::max<size_t>(1, ws.tuning.ring_slice_bytes / es);
  const size_t chunks = (count + slice - 1) / slice;
  const int D = std::clamp(ws.tuning.ring_in_flight, 1, kMaxInFlight);
  const int pos =
      static_cast<int>(std::find(w.ring.begin(), w.ring.end(), w.rank) - w.ring.begin());
  const int root_pos =
      static_cast<int>(std::find(w.ring.begin(), w.ring.end(), root) - w.ring.begin());
  const int hop = (pos - root_pos + n) % n;  // 0 at the root, n-1 at the end of the chain
  const bool receives = hop != 0;
  const bool sends = hop != n - 1;
  const int left = w.ring[(pos + n - 1) % n];
  const int right = w.ring[(pos + 1) % n];
  auto* data = static_cast<std::byte*>(buffer);

  std::array<transport::Pair*, 2> pair_list{};
  int npairs = 0;
  transport::Pair* lp = receives ? &comm.pair(left) : nullptr;
  transport::Pair* rp = sends ? &comm.pair(right) : nullptr;
  if (lp) pair_list[npairs++] = lp;
  if (rp && rp != lp) pair_list[npairs++] = rp;
  std::span<transport::Pair* const> pairs(pair_list.data(), npairs);

  size_t recv_posted = 0, recv_done = receives ? 0 : chunks;
  size_t send_posted = 0, send_done = sends ? 0 : chunks;
  auto piece = [&](size_t j) { return std::min(slice, count - j * slice) * es; };
  auto deadline = comm.deadline();
  int idle = 0;
  while (recv_done < chunks || send_done < chunks) {
    bool did = false;
    while (receives && recv_done < recv_posted &&
           !ws.recv_reqs[recv_done % kMaxInFlight].pending()) {
      auto& r = ws.recv_reqs[recv_done % kMaxInFlight];
      if (r.failed()) throw r.failure();
      ++recv_done;
      did = true;
    }
    while (sends && send_done < send_posted && !ws.send_reqs[send_done % kMaxInFlight].pending()) {
      auto& r = ws.send_reqs[send_done % kMaxInFlight];
      if (r.failed()) throw r.failure();
      ++send_done;
      did = true;
    }
    // Forward what has arrived (everything, at the root).
    while (sends && send_posted < recv_done && send_posted - send_done < static_cast<size_t>(D)) {
      rp->post_send(data + send_posted * slice * es, piece(send_posted),
                    ws.send_reqs[send_posted % kMaxInFlight]);
      ++send_posted;
      did = true;
    }
    while (receives && recv_posted < chunks && recv_posted - recv_done < static_cast<size_t>(D)) {
      lp->post_recv(data + recv_posted * slice * es, piece(recv_posted),
                    ws.recv_reqs[recv_posted % kMaxInFlight]);
      ++recv_posted;
      did = true;
    }
    if (recv_done == chunks && send_done == chunks) break;
    if (did) {
      deadline = comm.deadline();
      idle = 0;
    }
    const int waiting_for = comm.global_rank(recv_done < chunks ? left : right);
    if (comm.progress_or_wait(pairs, idle, deadline, waiting_for)) deadline = comm.deadline();
  }
}

}  // namespace ringlet::core::collectives
