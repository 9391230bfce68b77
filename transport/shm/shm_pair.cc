#include "shm/shm_pair.h"

#include <algorithm>
#include <cstring>

#include "shm/doorbell.h"
#include "shm/liveness.h"

namespace ringlet::transport::shm {
namespace {

// progress() calls that moved nothing between two checks of the peer's pid.
// The closed flags are read on every idle call; the pid costs syscalls.
constexpr uint32_t kIdleCallsPerLivenessCheck = 256;

}  // namespace

ShmPair::ShmPair(int self, int peer, Segment out, Segment in, Segment peer_page,
                 std::shared_ptr<PairList> list)
    : Pair(self, peer),
      out_segment_(std::move(out)),
      in_segment_(std::move(in)),
      peer_page_segment_(std::move(peer_page)),
      out_(reinterpret_cast<ChannelControl*>(out_segment_.data())),
      in_(reinterpret_cast<ChannelControl*>(in_segment_.data())),
      out_data_(out_segment_.data() + kChannelDataOffset),
      in_data_(in_segment_.data() + kChannelDataOffset),
      peer_page_(reinterpret_cast<RankPage*>(peer_page_segment_.data())),
      list_(std::move(list)) {
  list_->pairs.push_back(this);
}

ShmPair::~ShmPair() {
  auto& pairs = list_->pairs;
  pairs.erase(std::remove(pairs.begin(), pairs.end(), this), pairs.end());
  out_->sender_closed.store(1, std::memory_order_release);
  in_->receiver_closed.store(1, std::memory_order_release);
  ring(peer_page_->bell);
}

void ShmPair::post_send(const void* data, size_t bytes, Request& req, MemoryKind kind) {
  if (kind != MemoryKind::kHost) {
    req.fail(Error(self(), peer(),
                   "shm carries host memory only (send to rank " + std::to_string(peer()) + ")"));
    return;
  }
  if (failure_) {
    req.fail(*failure_);
    return;
  }
  req.start();
  sends_.push({static_cast<const std::byte*>(data), bytes, &req});
}

void ShmPair::post_recv(void* data, size_t bytes, Request& req, MemoryKind kind) {
  if (kind != MemoryKind::kHost) {
    req.fail(
        Error(self(), peer(),
              "shm carries host memory only (receive from rank " + std::to_string(peer()) + ")"));
    return;
  }
  if (failure_) {
    req.start();
    recvs_.push({static_cast<std::byte*>(data), bytes, &req});
    // A peer that closed after sending left its last messages in the slots:
    // they can still be received; anything beyond them never will be.
    if (peer_left_ && !lost_) pump_recvs();
    if (req.pending()) fail_all(*failure_);
    return;
  }
  req.start();
  recvs_.push({static_cast<std::byte*>(data), bytes, &req});
}

bool ShmPair::progress() {
  if (lost_) throw PeerLost(self(), peer(), failure_->cause());
  if (failure_) return false;
  bool moved = pump_sends();
  moved |= pump_recvs();
  if (lost_) throw PeerLost(self(), peer(), failure_->cause());
  if (moved) {
    // One ring per call, not per chunk: the peer re-reads both counters.
    ring(peer_page_->bell);
    idle_calls_ = 0;
    return true;
  }
  if (out_->mismatch.load(std::memory_order_acquire) != 0) {
    std::string why = "size mismatch with rank " + std::to_string(peer()) + ": rank " +
                      std::to_string(self()) + " sent " + std::to_string(out_->mismatch_sent) +
                      " bytes but rank " + std::to_string(peer()) + " posted a receive of " +
                      std::to_string(out_->mismatch_posted) + " bytes";
    fail_all(Error(self(), peer(), why));
    return true;
  }
  if (peer_closed()) {
    peer_gone("closed its end of the pair");
  } else if (++idle_calls_ % kIdleCallsPerLivenessCheck == 0) {
    check_alive();
  }
  return false;
}

bool ShmPair::pump_sends() {
  bool moved = false;
  while (!sends_.empty()) {
    if (head_ - peer_tail_ == kSlots) {
      peer_tail_ = out_->tail.load(std::memory_order_acquire);
      if (head_ - peer_tail_ == kSlots) break;
    }
    Send& s = sends_.front();
    size_t chunk = std::min(kSlotBytes, s.bytes - send_done_);
    uint64_t slot = head_ % kSlots;
    out_->slots[slot] = {s.bytes, chunk};
    // A zero-byte message may come with a null pointer, which memcpy forbids.
    if (chunk > 0) std::memcpy(out_data_ + slot * kSlotBytes, s.data + send_done_, chunk);
    out_->head.store(++head_, std::memory_order_release);
    send_done_ += chunk;
    moved = true;
    if (send_done_ == s.bytes) {  // a zero-byte message is one empty chunk
      s.req->complete();
      sends_.pop();
      send_done_ = 0;
    }
  }
  return moved;
}

bool ShmPair::pump_recvs() {
  bool moved = false;
  while (!recvs_.empty()) {
    if (tail_ == peer_head_) {
      peer_head_ = in_->head.load(std::memory_order_acquire);
      if (tail_ == peer_head_) break;
    }
    Recv& r = recvs_.front();
    uint64_t slot = tail_ % kSlots;
    SlotHeader h = in_->slots[slot];
    if (recv_done_ == 0 && h.message_bytes != r.bytes) {
      in_->mismatch_sent = h.message_bytes;
      in_->mismatch_posted = r.bytes;
      in_->mismatch.store(1, std::memory_order_release);
      std::string why = "size mismatch with rank " + std::to_string(peer()) + ": rank " +
                        std::to_string(peer()) + " sent " + std::to_string(h.message_bytes) +
                        " bytes but rank " + std::to_string(self()) + " posted a receive of " +
                        std::to_string(r.bytes) + " bytes";
      fail_all(Error(self(), peer(), why));
      return true;  // progress() rings the peer so it sees the flag
    }
    if (!chunk_fits(h, r.bytes, recv_done_)) {
      // Not what a sender writes: the channel can no longer be trusted.
      lost_ = true;
      fail_all(PeerLost(
          self(), peer(),
          "corrupt message from rank " + std::to_string(peer()) + " over shm: a chunk of " +
              std::to_string(h.chunk_bytes) + " bytes where at most " +
              std::to_string(std::min<uint64_t>(kSlotBytes, r.bytes - recv_done_)) + " fit"));
      return true;  // progress() throws PeerLost
    }
    if (h.chunk_bytes > 0) {
      std::memcpy(r.data + recv_done_, in_data_ + slot * kSlotBytes, h.chunk_bytes);
    }
    in_->tail.store(++tail_, std::memory_order_release);
    recv_done_ += h.chunk_bytes;
    moved = true;
    if (recv_done_ == r.bytes) {
      r.req->complete();
      recvs_.pop();
      recv_done_ = 0;
    }
  }
  return moved;
}

bool ShmPair::ready() const {
  if (lost_ || failure_) return false;
  if (!sends_.empty() && head_ - out_->tail.load(std::memory_order_acquire) < kSlots) return true;
  if (!recvs_.empty() && in_->head.load(std::memory_order_acquire) != tail_) return true;
  return out_->mismatch.load(std::memory_order_relaxed) != 0 || (busy() && peer_closed());
}

bool ShmPair::peer_closed() const {
  return out_->receiver_closed.load(std::memory_order_acquire) != 0 ||
         in_->sender_closed.load(std::memory_order_acquire) != 0;
}

void ShmPair::check_alive() {
  if (lost_ || failure_) return;
  if (peer_closed()) {
    peer_gone("closed its end of the pair");
  } else if (process_gone(peer_page_->pid)) {
    peer_gone("exited (pid " + std::to_string(peer_page_->pid) + ")");
  }
}

// The peer may have written its last messages between our previous pump and
// its close (the close is published after the data), so drain the slots once
// more first: only what is still pending after that can never complete. With
// nothing pending the loss is only recorded, so a peer that finished and
// closed first does not fail a rank that got everything it needed.
void ShmPair::peer_gone(const std::string& how) {
  if (pump_recvs()) ring(peer_page_->bell);
  if (lost_) throw PeerLost(self(), peer(), failure_->cause());  // what it left was corrupt
  peer_left_ = true;
  failure_ = PeerLost(self(), peer(),
                      "connection to rank " + std::to_string(peer()) + " closed: rank " +
                          std::to_string(peer()) + " " + how);
  if (!busy()) return;  // later posts fail with failure_
  lost_ = true;
  fail_all(*failure_);
  throw PeerLost(self(), peer(), failure_->cause());
}

void ShmPair::fail_all(common::Failure why) {
  failure_ = std::move(why);
  fail_queued(sends_, *failure_);
  fail_queued(recvs_, *failure_);
  send_done_ = 0;
  recv_done_ = 0;
}

}  // namespace ringlet::transport::shm
