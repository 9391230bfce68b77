// The pipelined ring shared by reduce-scatter and allgather.
//
// n-1 steps; at step s the rank at ring position p sends block
// ring[p - s - 1 + shift] to its right neighbour and receives block
// ring[p - s - 2 + shift] from its left one (shift 0: reduce-scatter, whose
// final step lands block p here; shift 1: allgather, which starts by sending
// its own block). Each block is cut into sub-chunks of `slice` elements, and
// the units (sub-chunk j, step s) go in the order j-major, s-minor: the forward
// of (j, s+1) needs only the receive of (j, s), which came just before it, so a
// rank holds few sub-chunks at a time and the ring cannot fill up and stall
// (with s-major order every rank would buffer a whole block from its left
// before it could forward anything). Up to `in_flight` posts are outstanding in
// each direction, so the reduction of one sub-chunk overlaps the transfer of
// the next ones; both neighbours match the same unit sequence, so posts need
// no tags. A unit whose block has fewer than j+1 sub-chunks does not exist on
// either side (empty blocks take no posts).
//
// The Policy says where a receive lands and what is forwarded:
//   std::byte* recv_target(int block, size_t first, size_t n, std::byte* slot)
//   const std::byte* on_received(int s, int block, size_t first, size_t n, std::byte* target)
//       returns what to send at step s+1 (ignored at the last step)
//   const std::byte* first_send(int block, size_t first)
//   static constexpr bool kSlots: receives need a scratch slot
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include "core/collectives/workspace.h"
#include "core/communicator.h"

namespace ringlet::core::collectives {

struct RingPlan {
  int n = 1;
  int pos = 0;  // my ring position
  int left = 0, right = 0;
  const std::vector<int>* ring = nullptr;
  std::span<const size_t> counts;  // per global rank
  std::vector<size_t> offsets;     // per global rank, elements
  size_t es = 1;                   // element bytes
  size_t slice = 1;                // elements per sub-chunk

  RingPlan(Communicator& comm, std::span<const size_t> block_counts, size_t elem_bytes) {
    const World& w = comm.world();
    n = w.size;
    ring = &w.ring;
    pos = static_cast<int>(std::find(w.ring.begin(), w.ring.end(), w.rank) - w.ring.begin());
    left = w.ring[(pos + n - 1) % n];
    right = w.ring[(pos + 1) % n];
    counts = block_counts;
    offsets.resize(n);
    size_t off = 0;
    for (int r = 0; r < n; ++r) {
      offsets[r] = off;
      off += counts[r];
    }
    es = elem_bytes;
    slice = std::max<size_t>(1, comm.workspace().tuning.ring_slice_bytes / es);
  }
  int block_at(int p) const { return (*ring)[((p % n) + n) % n]; }
  size_t chunks(int block) const { return (counts[block] + slice - 1) / slice; }
  size_t max_chunks() const {
    size_t k = 0;
    for (int r = 0; r < n; ++r) k = std::max(k, chunks(r));
    return k;
  }
};

template <class T, size_t N>
class Fifo {
 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  T& front() { return items_[head_ % N]; }
  void push(const T& t) { items_[tail_++ % N] = t; }
  void pop() { ++head_; }

 private:
  std::array<T, N> items_{};
  size_t head_ = 0, tail_ = 0;
};

// Unit cursor in (j, s) order, skipping units whose block has no chunk j.
struct UnitCursor {
  size_t j = 0;
  int s = 0;
  int shift = 0;  // -1: receive side (block p-s-2+shift), 0: send side
  int block = 0;

  void settle(const RingPlan& plan, int base_shift, size_t kmax) {
    for (; j < kmax; advance_raw(plan)) {
      block = plan.block_at(plan.pos - s - 1 + base_shift + shift);
      if (j < plan.chunks(block)) return;
    }
  }
  void advance_raw(const RingPlan& plan) {
    if (++s == plan.n - 1) {
      s = 0;
      ++j;
    }
  }
  bool valid(size_t kmax) const { return j < kmax; }
};

template <class Policy>
void run_ring(Communicator& comm, const RingPlan& plan, int shift, Policy& pol) {
  Workspace& ws = comm.workspace();
  const int D = std::clamp(ws.tuning.ring_in_flight, 1, kMaxInFlight / 2);
  const size_t slot_bytes = plan.slice * plan.es;
  constexpr int kMaxSlots = kMaxInFlight + 2;
  const int nslots = Policy::kSlots ? 2 * D + 2 : 0;
  std::byte* scratch = Policy::kSlots ? ws.ring_scratch(slot_bytes * nslots) : nullptr;
  std::array<int, kMaxSlots> free_slots{};
  int nfree = 0;
  for (int i = 0; i < nslots; ++i) free_slots[nfree++] = i;

  transport::Pair* left = &comm.pair(plan.left);
  transport::Pair* right = &comm.pair(plan.right);
  std::array<transport::Pair*, 2> pair_list = {left, right};
  std::span<transport::Pair* const> pairs(pair_list.data(), left == right ? 1 : 2);

  struct RecvEntry {
    int s, block, slot;
    size_t first, count, req;
    std::byte* target;
  };
  struct SendEntry {
    int slot;
    size_t req;
  };
  struct Ready {
    const std::byte* data;
    int slot;
  };
  Fifo<RecvEntry, kMaxInFlight> recvq;
  Fifo<SendEntry, kMaxInFlight> sendq;
  Fifo<Ready, kMaxSlots + kMaxInFlight> ready;
  size_t recv_posts = 0, send_posts = 0;

  const size_t kmax = plan.max_chunks();
  UnitCursor rc;
  rc.shift = -1;
  rc.settle(plan, shift, kmax);
  UnitCursor sc;
  sc.settle(plan, shift, kmax);

  auto deadline = comm.deadline();
  int idle = 0;
  for (;;) {
    bool did = false;
    // Receives complete in posting order: reduce (or keep) and queue the forward.
    while (!recvq.empty()) {
      RecvEntry& e = recvq.front();
      transport::Request& req = ws.recv_reqs[e.req % kMaxInFlight];
      if (req.pending()) break;
      if (req.failed()) throw req.failure();
      const std::byte* fwd = pol.on_received(e.s, e.block, e.first, e.count, e.target);
      if (e.s < plan.n - 2) {
        ready.push({fwd, e.slot});
      } else if (e.slot >= 0) {
        free_slots[nfree++] = e.slot;
      }
      recvq.pop();
      did = true;
    }
    while (!sendq.empty()) {
      SendEntry& e = sendq.front();
      transport::Request& req = ws.send_reqs[e.req % kMaxInFlight];
      if (req.pending()) break;
      if (req.failed()) throw req.failure();
      if (e.slot >= 0) free_slots[nfree++] = e.slot;
      sendq.pop();
      did = true;
    }
    // Sends in unit order: step 0 from the caller's data, later steps forward.
    while (sendq.size() < static_cast<size_t>(D) && sc.valid(kmax)) {
      const size_t first = sc.j * plan.slice;
      const size_t count = std::min(plan.slice, plan.counts[sc.block] - first);
      const std::byte* data;
      int slot = -1;
      if (sc.s == 0) {
        data = pol.first_send(sc.block, first);
      } else if (!ready.empty()) {
        data = ready.front().data;
        slot = ready.front().slot;
        ready.pop();
      } else {
        break;
      }
      const size_t r = send_posts++;
      sendq.push({slot, r});
      right->post_send(data, count * plan.es, ws.send_reqs[r % kMaxInFlight]);
      sc.advance_raw(plan);
      sc.settle(plan, shift, kmax);
      did = true;
    }
    // Receives run ahead of the forwards by at most the slots (or as many
    // entries when receiving in place), so that the ready queue stays bounded.
    while (recvq.size() < static_cast<size_t>(D) && rc.valid(kmax) &&
           recvq.size() + ready.size() < static_cast<size_t>(2 * D + 2) &&
           (!Policy::kSlots || nfree > 0)) {
      const size_t first = rc.j * plan.slice;
      const size_t count = std::min(plan.slice, plan.counts[rc.block] - first);
      int slot = -1;
      std::byte* slot_ptr = nullptr;
      if (Policy::kSlots) {
        slot = free_slots[--nfree];
        slot_ptr = scratch + static_cast<size_t>(slot) * slot_bytes;
      }
      std::byte* target = pol.recv_target(rc.block, first, count, slot_ptr);
      const size_t r = recv_posts++;
      recvq.push({rc.s, rc.block, slot, first, count, r, target});
      left->post_recv(target, count * plan.es, ws.recv_reqs[r % kMaxInFlight]);
      rc.advance_raw(plan);
      rc.settle(plan, shift, kmax);
      did = true;
    }
    if (recvq.empty() && sendq.empty() && !rc.valid(kmax) && !sc.valid(kmax)) break;
    if (did) {
      deadline = comm.deadline();
      idle = 0;
    }
    const int waiting_for = comm.global_rank(!recvq.empty() ? plan.left : plan.right);
    if (comm.progress_or_wait(pairs, idle, deadline, waiting_for)) deadline = comm.deadline();
  }
}

}  // namespace ringlet::core::collectives
