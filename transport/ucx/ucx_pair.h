// The UCX link to one peer: an endpoint for what this rank sends, tagged
// receives on the shared worker for what the peer sends (tags.h), and one
// receive always posted for the peer's notice.
//
// Each post goes to UCX at once (ucp_tag_send_nbx / ucp_tag_recv_nbx) and is
// reaped in progress(); a send UCX completes on the spot completes its
// Request on the spot.
//
// Size mismatch: UCX completes a receive larger than the message with the
// message's length, and fails a smaller one as truncated, reporting the
// message's length too. The receiver fails its requests naming both sizes and
// sends the peer a mismatch notice (its posted size and the size that came),
// and the sender fails its own when the notice arrives, naming the same two
// sizes. Either side then closes its endpoint by force, which cancels what was
// still in flight, so that no request the caller was told failed goes on
// reading or writing the caller's memory.
//
// Loss: the endpoint's error handler (endpoint.h), or the peer's closed
// notice, which a pair sends when it is destroyed idle. With work pending, the
// pair fails it and progress() throws PeerLost, then and on every later call.
// Idle, later posts fail with the PeerLost message, except that a receive
// still finds what the peer sent before it left.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "post_queue.h"
#include "ringlet/transport/transport.h"
#include "ucx/endpoint.h"

namespace ringlet::transport::ucx {

// The payload of a notice message (TagKind::kNotice).
struct Notice {
  uint64_t code;    // kMismatchNotice or kClosedNotice
  uint64_t posted;  // mismatch: the size the receiver posted
  uint64_t sent;    // mismatch: the size that arrived; kUnknownSize if UCX did not say
};

inline constexpr uint64_t kMismatchNotice = 0x52474c4d;  // "RGLM"
inline constexpr uint64_t kClosedNotice = 0x52474c43;    // "RGLC"
inline constexpr uint64_t kUnknownSize = ~uint64_t{0};

class UcxPair final : public Pair {
 public:
  UcxPair(int self, int peer, std::unique_ptr<Endpoint> endpoint);
  ~UcxPair() override;

  void post_send(const void* data, size_t bytes, Request& req, MemoryKind kind) override;
  void post_recv(void* data, size_t bytes, Request& req, MemoryKind kind) override;
  bool progress() override;
  bool busy() const override { return !sends_.empty() || !recvs_.empty(); }
  // Begins the close at once (a healthy link's with the closed notice, so
  // that the peer learns it while this rank still answers why), and the
  // destructor waits for it only kAbandonTime: the peer may be the one that
  // hung. Every pair of a failing rank begins before any waits, so their
  // closes run together.
  void abandon() override;
  static constexpr auto kAbandonTime = std::chrono::milliseconds(200);

 private:
  // One post UCX has not completed yet (request == nullptr once reaped).
  struct Op {
    void* request = nullptr;
    size_t bytes = 0;
    Request* req = nullptr;
  };

  bool memory_refused(MemoryKind kind, Request& req, const char* what);
  static ucp_request_param_t send_params(MemoryKind kind);
  static ucp_request_param_t receive_params(MemoryKind kind);
  bool reap_sends();
  bool reap_recvs();
  bool check_notice();
  void check_endpoint();
  // A receive UCX completed (at once or in progress): completes `req`, or
  // fails it and breaks the pair on a size mismatch. False if it broke.
  bool finish_recv(size_t posted, ucs_status_t status, const ucp_tag_recv_info_t& info,
                   Request& req);
  // A receive on a pair whose peer left: only what already arrived can match.
  void recv_from_gone(void* data, size_t bytes, Request& req, MemoryKind kind);
  std::string mismatch_text(int sender, uint64_t sent, int receiver, uint64_t posted) const;
  // The peer left (closed, exited, died): fails what is pending and throws
  // when busy; otherwise only later posts fail.
  void peer_left(const std::string& why);
  [[noreturn]] void lose(const std::string& why);
  // A size mismatch: fails everything, tells the peer (unless it told us),
  // and closes the endpoint by force.
  void break_pair(const std::string& why, const Notice* tell);
  // Records why the pair can no longer be used and fails every pending post
  // (cancelling UCX's receives; sends end with the endpoint).
  void fail_all(common::Failure why);
  // Cancels and frees UCX's side of every pending post, leaving the Requests.
  void release_all();
  void cancel_notice();
  // Releases what is pending and begins the endpoint's close: flushed, after
  // the closed notice, when the link is healthy; forced otherwise.
  void begin_close();

  std::unique_ptr<Endpoint> endpoint_;
  Worker& worker_;
  const Library& lib_;
  uint64_t send_seq_ = 0;
  uint64_t recv_seq_ = 0;
  PostQueue<Op> sends_;
  PostQueue<Op> recvs_;

  Notice notice_in_{};
  Notice notice_out_{};
  void* notice_request_ = nullptr;  // the posted receive of the peer's notice

  bool lost_ = false;       // progress() throws
  bool abandoned_ = false;  // abandon() began the close: only the destructor follows
  bool gone_ = false;       // the peer left; receives may still match what it sent
  std::optional<common::Failure> failure_;
};

}  // namespace ringlet::transport::ucx
