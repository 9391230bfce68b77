// The layout of one direction of a shm pair: segment "/ringlet-<job>-<a>-<b>"
// carries bytes from rank a to rank b. The higher rank of the pair creates
// both directions, the lower one opens them.
//
// A FIFO of kSlots slots of kSlotBytes. The sender copies a chunk of its
// message into the slot at `head`, then publishes it by advancing head
// (release); the receiver copies the chunk out and frees the slot by
// advancing tail. Each side writes one counter only, so no lock is needed.
//
// Why 8 x 512 KiB: a chunk of 512 KiB takes ~50 us to copy at memory speed,
// so the per-chunk handoff (two cache-line transfers and a doorbell ring) is
// lost in it; 8 slots let the sender run 4 MiB ahead, enough for a ring's
// several slices in flight while the receiver reduces, and the whole
// direction (4 MiB) still fits in a last-level cache share. Memory is 8 MiB
// per pair, allocated once at connect.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ringlet/transport/shared_window.h"

namespace ringlet::transport::shm {

constexpr uint64_t kSlots = 8;
constexpr size_t kSlotBytes = size_t{512} << 10;

struct SlotHeader {
  uint64_t message_bytes;  // size of the whole message the chunk belongs to
  uint64_t chunk_bytes;
};

// The peer writes the header into memory this rank maps, so a receiver trusts
// its chunk size only once it fits both the slot and what is left of the
// posted receive (`posted` bytes, `done` of them copied already).
inline bool chunk_fits(const SlotHeader& h, uint64_t posted, uint64_t done) {
  return h.chunk_bytes <= kSlotBytes && done <= posted && h.chunk_bytes <= posted - done;
}

struct ChannelControl {
  alignas(64) std::atomic<uint64_t> head;  // chunks published (sender writes)
  alignas(64) std::atomic<uint64_t> tail;  // chunks consumed (receiver writes)
  alignas(64) std::atomic<uint32_t> sender_closed;
  std::atomic<uint32_t> receiver_closed;
  // Set by the receiver when a message's size differs from its posted
  // receive; the sender fails its side when it sees the flag.
  std::atomic<uint32_t> mismatch;
  uint64_t mismatch_sent;
  uint64_t mismatch_posted;
  alignas(64) SlotHeader slots[kSlots];
};

// Data starts on its own page so that chunk copies are page-aligned.
constexpr size_t kChannelDataOffset = 4096;
static_assert(sizeof(ChannelControl) <= kChannelDataOffset);
constexpr size_t kChannelBytes = kChannelDataOffset + kSlots * kSlotBytes;

// A request to connect, dropped by a higher rank into a lower rank's page.
// kFree -> kRequested (dialer) -> kServicing -> kMapped (acceptor) -> kFree
// (dialer, once it unlinked the two channels).
struct ConnectSlot {
  enum : uint32_t { kFree, kRequested, kServicing, kMapped };
  std::atomic<uint32_t> state;
  int32_t from;  // the dialer's rank
};
constexpr int kConnectSlots = 32;

// Each rank's page, in a nameless memfd that peers map: the doorbell every
// peer rings when it gives this rank something to do, the pid by which peers
// tell whether this rank is alive, and the slots by which higher ranks ask to
// connect. It exists from the carrier's construction on, so a peer can ask
// before this rank reaches its connect() call, as a TCP backlog would hold it.
struct RankPage {
  Doorbell bell;
  alignas(64) int32_t pid;
  alignas(64) ConnectSlot connect[kConnectSlots];
};
constexpr size_t kRankPageBytes = 4096;
static_assert(sizeof(RankPage) <= kRankPageBytes);

}  // namespace ringlet::transport::shm
