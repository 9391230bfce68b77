// The TCP link to one peer: one connected, non-blocking socket carrying both
// directions. Each message is a 24-byte header (kind, size) and the payload.
//
// The receiver checks the size in the header against its posted receive. On a
// mismatch the stream can no longer be trusted, so the pair breaks: the
// receiver fails its requests and sends a mismatch notice (after padding out
// any frame it was half-way through sending), and the sender fails its own
// when the notice arrives. Both errors name both sizes.
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "post_queue.h"
#include "ringlet/transport/transport.h"
#include "tcp/socket.h"

namespace ringlet::transport::tcp {

class TcpPair;

// The carrier's view of its live pairs, shared with them so that either may
// be destroyed first. The pollfd vector is reused across waits.
struct PairList {
  std::vector<TcpPair*> pairs;
  std::vector<pollfd> fds;
};

struct WireHeader {
  uint64_t kind;
  uint64_t bytes;  // kData: payload size; kMismatch: the size the receiver posted
  uint64_t aux;    // kMismatch: the size the sender sent
};

class TcpPair final : public Pair {
 public:
  TcpPair(int self, int peer, Fd socket, std::shared_ptr<PairList> list);
  ~TcpPair() override;

  void post_send(const void* data, size_t bytes, Request& req, MemoryKind kind) override;
  void post_recv(void* data, size_t bytes, Request& req, MemoryKind kind) override;
  bool progress() override;
  bool busy() const override { return !sends_.empty() || !recvs_.empty(); }

  int fd() const { return socket_.get(); }
  // What wait_for_activity should poll this socket for (0: nothing to wait on).
  short poll_events() const;

 private:
  struct Send {
    const uint8_t* data;
    size_t bytes;
    Request* req;
  };
  struct Recv {
    uint8_t* data;
    size_t bytes;
    Request* req;
  };
  // What the frame currently being written is.
  enum class Frame : uint8_t { kNone, kData, kPadding, kNotice };

  bool pump_sends();
  bool pump_recvs();
  bool start_frame();
  [[noreturn]] void lose(const std::string& why);
  void break_pair(const std::string& why);
  // Records why the pair can no longer be used and fails every pending post.
  void fail_all(common::Failure why);

  Fd socket_;
  std::shared_ptr<PairList> list_;
  PostQueue<Send> sends_;
  PostQueue<Recv> recvs_;

  Frame out_frame_ = Frame::kNone;
  WireHeader out_header_{};
  size_t out_payload_ = 0;  // payload bytes of the current frame
  size_t out_done_ = 0;     // bytes of header + payload written
  bool notice_pending_ = false;
  WireHeader notice_{};

  WireHeader in_header_{};
  size_t in_header_got_ = 0;
  size_t in_done_ = 0;

  bool lost_ = false;
  std::optional<common::Failure> failure_;  // set once the pair is lost or broken
};

}  // namespace ringlet::transport::tcp
