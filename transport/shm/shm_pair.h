// The shared-memory link to a peer on the same host: an outgoing channel this
// rank created, an incoming one the peer created, and the peer's rank page
// (its doorbell and pid).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "post_queue.h"
#include "ringlet/transport/transport.h"
#include "shm/channel.h"
#include "shm/segment.h"

namespace ringlet::transport::shm {

class ShmPair;

// The carrier's list of live pairs, shared so either side may go first.
struct PairList {
  std::vector<ShmPair*> pairs;
};

class ShmPair final : public Pair {
 public:
  ShmPair(int self, int peer, Segment out, Segment in, Segment peer_page,
          std::shared_ptr<PairList> list);
  ~ShmPair() override;

  void post_send(const void* data, size_t bytes, Request& req, MemoryKind kind) override;
  void post_recv(void* data, size_t bytes, Request& req, MemoryKind kind) override;
  bool progress() override;
  bool busy() const override { return !sends_.empty() || !recvs_.empty(); }

  // For the carrier's wait: whether progress() would move something (or
  // report a failure) right now, without doing it.
  bool ready() const;
  // Throws PeerLost if the peer process is gone and work is pending.
  void check_alive();

 private:
  struct Send {
    const std::byte* data;
    size_t bytes;
    Request* req;
  };
  struct Recv {
    std::byte* data;
    size_t bytes;
    Request* req;
  };

  bool pump_sends();
  bool pump_recvs();
  bool peer_closed() const;
  void peer_gone(const std::string& how);
  // Records why the pair can no longer be used and fails every pending post.
  void fail_all(common::Failure why);

  Segment out_segment_;
  Segment in_segment_;
  Segment peer_page_segment_;
  ChannelControl* out_;
  ChannelControl* in_;
  std::byte* out_data_;
  const std::byte* in_data_;
  RankPage* peer_page_;
  std::shared_ptr<PairList> list_;

  PostQueue<Send> sends_;
  PostQueue<Recv> recvs_;
  size_t send_done_ = 0;    // bytes of the front send already in slots
  size_t recv_done_ = 0;    // bytes of the front receive already copied out
  uint64_t head_ = 0;       // our copy of out_->head (we are its only writer)
  uint64_t tail_ = 0;       // our copy of in_->tail (we are its only writer)
  uint64_t peer_tail_ = 0;  // last seen out_->tail
  uint64_t peer_head_ = 0;  // last seen in_->head
  uint32_t idle_calls_ = 0;

  bool lost_ = false;
  bool peer_left_ = false;  // the peer closed or exited (not a size mismatch)
  std::optional<common::Failure> failure_;  // set once the pair is lost or broken
};

}  // namespace ringlet::transport::shm
