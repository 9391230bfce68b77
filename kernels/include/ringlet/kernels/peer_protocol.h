// The allreduce whose kernels synchronise among themselves: the ranks of one
// host (on one GPU or on GPUs that reach each other) run one kernel each, and
// the kernels raise and wait for flags in each other's memory, with no host
// round trip between the steps. This header is the protocol as plain
// arithmetic and one block program, shared by the CUDA kernel
// (kernels/cuda/peer_allreduce.cu) and the CPU test that runs the same program
// on threads (tests/kernels/peer_protocol_test.cc). It needs no CUDA header.
//
// Memory: every rank owns a flag area of kFlagBytes in device memory that its
// peers can write (CUDA IPC), holding one flag per (block, sending rank).
// Block b of rank s raises its flag in the area of every peer r, at slot
// (b, s); rank r's block b waits for slot (b, s) of its own area. A flag
// holds flag_value(round, step) and only ever grows (rounds are numbered by a
// counter that advances alike on every rank), so nothing is reset between
// calls and a waiter asks "is it at least v?".
//
// One round, every block b of every rank (all ranks launch the same number of
// blocks, kernel_blocks()):
//   step 1 (arrived): raise; wait for every peer's block b. The kernel runs
//     after the work queued before it on its rank's stream, so a peer's flag
//     means that its inputs are written and its outputs free to write.
//   work: one-shot: chunk b of the whole message, every input folded in rank
//     order into this rank's own output; two-shot: chunk b of this rank's
//     part, every input folded in rank order into every rank's output (each
//     part is folded once, by one rank, so all ranks hold the same bits).
//   step 2 (done): raise; wait for every peer's block b. Block b of a peer
//     raises it once it read and wrote all it touches of chunk b, so when
//     every block of this kernel has passed it, no peer still reads this
//     rank's inputs or writes its outputs: the kernel's end on this rank's
//     stream orders everything after it.
// Chunks cut the same extent the same way on every rank (split() of the same
// lengths), which is what lets block b wait only for the peers' block b.
//
// A wait gives up past the deadline it is given, reports the peer it waited
// for, and the block leaves the kernel (the results are then undefined and
// the collective fails); no kernel spins for ever.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringlet/kernels/ops.h"  // RINGLET_HD

namespace ringlet::kernels::peer {

inline constexpr int kMaxRanks = 8;    // ranks of one host in one window
inline constexpr int kMaxBlocks = 64;  // blocks of one rank's kernel
inline constexpr int kThreads = 512;   // threads of a block
inline constexpr size_t kFlagBytes = sizeof(uint64_t) * kMaxRanks * kMaxBlocks;

enum Step : uint64_t { kArrived = 1, kDone = 2 };

RINGLET_HD constexpr uint64_t flag_value(uint64_t round, Step step) { return round * 4 + step; }
// Where block `block` of rank `from` raises its flag in a peer's area.
RINGLET_HD constexpr size_t flag_slot(int block, int from) {
  return static_cast<size_t>(block) * kMaxRanks + from;
}

// Piece i of `count` elements of `element_bytes` cut into `pieces` pieces
// that each start on 16 bytes from the extent's start, the last ones shorter
// or empty.
struct Range {
  size_t begin;
  size_t length;
};
RINGLET_HD Range split(size_t count, size_t element_bytes, int pieces, int i) {
  const size_t per16 = element_bytes >= 16 ? 1 : 16 / element_bytes;  // elements in 16 bytes
  const size_t even = (count + pieces - 1) / pieces;
  const size_t piece = (even + per16 - 1) / per16 * per16;
  size_t begin = piece * static_cast<size_t>(i);
  if (begin > count) begin = count;
  const size_t end = begin + piece < count ? begin + piece : count;
  return {begin, end - begin};
}

// Blocks one round launches for a message of `count` elements: enough for
// kChunkBytes each of the largest piece a rank works on, at least 1 and at
// most `cap` (the same on every rank: the window's agreed limit), so that one
// block does a small message and a large one fills what the ranks may hold
// resident at once.
inline constexpr size_t kChunkBytes = size_t{64} << 10;
RINGLET_HD int kernel_blocks(size_t count, size_t element_bytes, int ranks, bool two_shot,
                             int cap) {
  const size_t work = two_shot ? split(count, element_bytes, ranks, 0).length : count;
  const size_t wanted = (work * element_bytes + kChunkBytes - 1) / kChunkBytes;
  const size_t limit = cap < 1 ? 1 : (cap > kMaxBlocks ? kMaxBlocks : cap);
  return wanted < 1 ? 1 : static_cast<int>(wanted < limit ? wanted : limit);
}

// What every block of one rank's kernel knows of the round.
struct Round {
  uint64_t round;
  int ranks;
  int me;      // this rank's index among them (local rank)
  int blocks;  // kernel_blocks(), the same on every rank
  size_t count;
  size_t element_bytes;
  bool two_shot;
};

// The elements block `block` works on: [begin, begin + length) of the
// message.
RINGLET_HD Range block_work(const Round& r, int block) {
  const Range part =
      r.two_shot ? split(r.count, r.element_bytes, r.ranks, r.me) : Range{0, r.count};
  const Range chunk = split(part.length, r.element_bytes, r.blocks, block);
  return {part.begin + chunk.begin, chunk.length};
}

// One block's program. `p` is the platform: p.arrive(block, value) makes the
// block's writes so far visible to the peers and raises its flag at every
// peer; p.wait(block, value) waits until every peer's flag in this rank's
// area is at least `value` and returns false past the deadline (having
// reported it); p.work(range) folds the range (one-shot: into this rank's
// output; two-shot: into every rank's).
template <class Platform>
RINGLET_HD void run_block(Platform& p, const Round& r, int block) {
  p.arrive(block, flag_value(r.round, kArrived));
  if (!p.wait(block, flag_value(r.round, kArrived))) return;
  p.work(block_work(r, block));
  p.arrive(block, flag_value(r.round, kDone));
  (void)p.wait(block, flag_value(r.round, kDone));
}

// What a wait that gave up leaves for the host, in host memory the device
// writes (the first failure wins): 0 while none did.
RINGLET_HD constexpr uint64_t failure_code(int peer, uint64_t round, Step step) {
  return (round << 16) | (static_cast<uint64_t>(step) << 8) | (static_cast<uint64_t>(peer) + 1);
}
// What the host writes there when the runtime stops (a failed round): every
// waiting kernel leaves at its next look, so that nothing on the device
// outlives the round.
inline constexpr uint64_t kHostAbort = ~uint64_t{0};
RINGLET_HD constexpr int failed_peer(uint64_t code) { return static_cast<int>(code & 0xff) - 1; }
RINGLET_HD constexpr Step failed_step(uint64_t code) {
  return static_cast<Step>((code >> 8) & 0xff);
}
RINGLET_HD constexpr uint64_t failed_round(uint64_t code) { return code >> 16; }

}  // namespace ringlet::kernels::peer
