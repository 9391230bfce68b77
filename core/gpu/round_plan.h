// How a fused message of device tensors is laid out and cut into rounds and
// parts, for the device collectives. Plain arithmetic with no CUDA in it, so
// that it is built and tested everywhere.
//
// The fused message gives each tensor a slot that starts on 16 bytes, so that
// the kernels' 16-byte accesses reach every aligned tensor. Ringlet's own
// algorithm over CUDA IPC (core/gpu/ipc_device_collectives.cc) takes the
// message a round at a time, at most `round_bytes` of it, and cuts each round
// into one part per rank, every part but the last ones `part` elements long
// and starting on 16 bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace ringlet::core::gpu {

// Elements of `element_bytes` from `elements`, rounded up to 16 bytes.
size_t padded(size_t elements, size_t element_bytes);

// Where each of `counts` starts when they are laid end to end, and their
// total (at.back(): one entry more than there are counts).
std::vector<size_t> offsets(std::span<const size_t> counts);

// The part of `total` from `offset` on that fits in `most` (none past it).
inline size_t chunk(size_t total, size_t offset, size_t most) {
  return offset < total ? std::min(most, total - offset) : 0;
}

// Where each tensor starts in the fused message (slot[i]), and its extent
// (slot.back(): one entry more than there are tensors).
std::vector<size_t> fused_slots(std::span<const size_t> counts, size_t element_bytes);

// A run of one tensor's elements within a round: `count` elements from
// element `tensor_offset` of tensor `tensor`, at element `round_offset` of
// the round.
struct Piece {
  size_t tensor;
  size_t tensor_offset;
  size_t round_offset;
  size_t count;
};

struct Round {
  size_t offset;              // the round's first element in the fused message
  size_t count;               // its elements
  size_t part;                // elements of every part but the last ones
  std::vector<Piece> pieces;  // every tensor's elements in the round, by round_offset

  // Part p: elements [lo, lo + its length) of the round (empty past the end).
  size_t part_begin(int p) const;
  size_t part_length(int p) const;
  // The pieces of part p (cut at the part's edges), by round_offset.
  std::vector<Piece> part_pieces(int p) const;
};

// One tensor of `count` elements cut into `ranks` parts that each start on
// 16 bytes from the tensor's start: part p is [begin, begin + length), the
// last ones shorter or empty; no part reaches past the tensor.
struct TensorPart {
  size_t begin;
  size_t length;
};
TensorPart tensor_part(size_t count, size_t element_bytes, int ranks, int p);

// Ringlet's ring over one round's parts, as local rank `me` of `ranks` runs
// it: every step works on one part of its own half, reading the same part
// of its predecessor's (me - 1) half, which the predecessor finished in its
// step before (its step -1 being the pack). The first ranks - 1 steps are
// the reduce-scatter (part = predecessor's + own); after them the rank holds
// part (me + 1) % ranks complete. The last ranks - 1 steps are the allgather
// (part = predecessor's), after which every part is complete.
//
// A rank never overwrites a part before its successor has read it: the
// successor reads part p of this rank as part of the chain of steps that
// leads, around the ring, to the predecessor's step this rank waits for
// before it overwrites p.
struct RingStep {
  int part;
  bool reduce;  // reduce-scatter: own += predecessor's; allgather: own = predecessor's
};
std::vector<RingStep> ring_steps(int ranks, int me);

// The rounds of a fused message of tensors of `counts` elements, with
// `ranks` parts per round and at most `round_bytes` per round.
std::vector<Round> plan_rounds(std::span<const size_t> counts, size_t element_bytes, int ranks,
                               size_t round_bytes);

}  // namespace ringlet::core::gpu
