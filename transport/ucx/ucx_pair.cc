#include "ucx/ucx_pair.h"

#include "ucx/tags.h"

namespace ringlet::transport::ucx {
namespace {

// Where a zero-byte post points when the caller gave no address.
uint8_t kNothing = 0;

// How many rounds of progress a receive on a pair whose peer left gets to
// find a message that arrived before the peer went.
constexpr int kDrainRounds = 64;

std::string rank_text(int r) { return "rank " + std::to_string(r); }

}  // namespace

UcxPair::UcxPair(int self, int peer, std::unique_ptr<Endpoint> endpoint)
    : Pair(self, peer),
      endpoint_(std::move(endpoint)),
      worker_(endpoint_->worker()),
      lib_(worker_.lib()) {
  ucp_request_param_t p = receive_params(MemoryKind::kHost);
  ucs_status_ptr_t r = lib_.ucp_tag_recv_nbx(worker_.get(), &notice_in_, sizeof notice_in_,
                                             make_tag(TagKind::kNotice, peer), kSenderMask, &p);
  if (UCS_PTR_IS_ERR(r)) {
    throw Error(self, peer,
                "ucx: cannot post the notice receive for " + rank_text(peer) + " (" +
                    status_text(UCS_PTR_STATUS(r)) + ")");
  }
  notice_request_ = r;
}

UcxPair::~UcxPair() {
  if (abandoned_) {
    endpoint_->finish_close(kAbandonTime);
    return;
  }
  begin_close();
  endpoint_->finish_close(Endpoint::kCloseTime);
}

void UcxPair::abandon() {
  if (abandoned_) return;
  abandoned_ = true;
  begin_close();
}

void UcxPair::begin_close() {
  const bool healthy = !failure_ && !endpoint_->failed() && !busy();
  // Posts still pending are dropped, as a closed socket drops them: their
  // Requests may be gone already, so only UCX's side is released.
  release_all();
  cancel_notice();
  if (healthy) {
    // Tells the peer that this side is gone on purpose; the flushing close
    // delivers it (and whatever was sent before) before the endpoint goes.
    Notice bye{kClosedNotice, 0, 0};
    const auto* b = reinterpret_cast<const uint8_t*>(&bye);
    worker_.send_owned(endpoint_->get(), make_tag(TagKind::kNotice, self()),
                       std::vector<uint8_t>(b, b + sizeof bye));
  }
  endpoint_->begin_close(/*force=*/!healthy);
}

bool UcxPair::memory_refused(MemoryKind kind, Request& req, const char* what) {
  if (kind == MemoryKind::kHost || (kind == MemoryKind::kCuda && worker_.cuda())) return false;
  req.fail(Error(self(), peer(),
                 std::string("ucx carries host memory only here: this UCX has no CUDA support (") +
                     what + " " + rank_text(peer()) + ")"));
  return true;
}

ucp_request_param_t UcxPair::send_params(MemoryKind kind) {
  // Naming the memory type spares UCX its detection on every post.
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.memory_type = kind == MemoryKind::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  return p;
}

ucp_request_param_t UcxPair::receive_params(MemoryKind kind) {
  // Always a request, never completion on the spot: UCX 1.13 leaves the
  // message's length unreported when a receive completes at once (or fails
  // at once as truncated), and that length is what a size mismatch names.
  ucp_request_param_t p = send_params(kind);
  p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  return p;
}

void UcxPair::post_send(const void* data, size_t bytes, Request& req, MemoryKind kind) {
  if (memory_refused(kind, req, "send to")) return;
  if (failure_) {
    req.fail(*failure_);
    return;
  }
  const ucp_request_param_t p = send_params(kind);
  ucs_status_ptr_t r =
      lib_.ucp_tag_send_nbx(endpoint_->get(), data != nullptr ? data : &kNothing, bytes,
                            make_tag(TagKind::kData, self(), send_seq_++), &p);
  if (r == nullptr) {
    req.complete();
    return;
  }
  if (UCS_PTR_IS_ERR(r)) {
    // The endpoint failed before the handler ran: the peer is gone.
    const std::string why = "connection to " + rank_text(peer()) +
                            " lost (ucx: " + status_text(UCS_PTR_STATUS(r)) + ")";
    req.fail(PeerLost(self(), peer(), why));
    if (!failure_) {
      lost_ = true;
      gone_ = true;
      fail_all(PeerLost(self(), peer(), why));
    }
    return;
  }
  req.start();
  sends_.push({r, bytes, &req});
}

void UcxPair::post_recv(void* data, size_t bytes, Request& req, MemoryKind kind) {
  if (memory_refused(kind, req, "receive from")) return;
  if (failure_ && !gone_) {
    req.fail(*failure_);
    return;
  }
  if (gone_) {
    recv_from_gone(data, bytes, req, kind);
    return;
  }
  const ucp_request_param_t p = receive_params(kind);
  ucs_status_ptr_t r =
      lib_.ucp_tag_recv_nbx(worker_.get(), data != nullptr ? data : &kNothing, bytes,
                            make_tag(TagKind::kData, peer(), recv_seq_++), kExactMask, &p);
  if (UCS_PTR_IS_ERR(r)) {
    req.fail(Error(self(), peer(),
                   "ucx: cannot post a receive from " + rank_text(peer()) + " (" +
                       status_text(UCS_PTR_STATUS(r)) + ")"));
    return;
  }
  req.start();
  recvs_.push({r, bytes, &req});
}

void UcxPair::recv_from_gone(void* data, size_t bytes, Request& req, MemoryKind kind) {
  const ucp_request_param_t p = receive_params(kind);
  ucs_status_ptr_t r =
      lib_.ucp_tag_recv_nbx(worker_.get(), data != nullptr ? data : &kNothing, bytes,
                            make_tag(TagKind::kData, peer(), recv_seq_++), kExactMask, &p);
  if (UCS_PTR_IS_ERR(r) || r == nullptr) {
    req.fail(*failure_);
    return;
  }
  ucp_tag_recv_info_t info{};
  ucs_status_t status = lib_.ucp_tag_recv_request_test(r, &info);
  for (int i = 0; i < kDrainRounds && status == UCS_INPROGRESS && worker_.progress(); ++i) {
    status = lib_.ucp_tag_recv_request_test(r, &info);
  }
  if (status == UCS_INPROGRESS) {
    lib_.ucp_request_cancel(worker_.get(), r);
    status = lib_.ucp_tag_recv_request_test(r, &info);
  }
  lib_.ucp_request_free(r);
  if (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED) {
    finish_recv(bytes, status, info, req);
  } else {
    req.fail(*failure_);
  }
}

bool UcxPair::progress() {
  if (lost_) throw PeerLost(self(), peer(), failure_->cause());
  worker_.progress();
  bool moved = reap_sends();
  moved |= reap_recvs();
  moved |= check_notice();
  check_endpoint();
  return moved;
}

bool UcxPair::reap_sends() {
  bool moved = false;
  ucs_status_t error = UCS_OK;
  for (size_t i = 0; i < sends_.size(); ++i) {
    Op& op = sends_.at(i);
    if (op.request == nullptr) continue;
    const ucs_status_t status = lib_.ucp_request_check_status(op.request);
    if (status == UCS_INPROGRESS) continue;
    lib_.ucp_request_free(op.request);
    op.request = nullptr;
    moved = true;
    if (status == UCS_OK) {
      op.req->complete();
    } else if (error == UCS_OK) {
      error = status;
    }
  }
  if (error != UCS_OK) {
    // UCX fails a send only when the endpoint failed: the peer is gone.
    lose("connection to " + rank_text(peer()) + " lost (ucx: " + status_text(error) + ")");
  }
  while (!sends_.empty() && sends_.front().request == nullptr) sends_.pop();
  return moved;
}

bool UcxPair::reap_recvs() {
  bool moved = false;
  for (size_t i = 0; i < recvs_.size(); ++i) {
    Op& op = recvs_.at(i);
    if (op.request == nullptr) continue;
    ucp_tag_recv_info_t info{};
    const ucs_status_t status = lib_.ucp_tag_recv_request_test(op.request, &info);
    if (status == UCS_INPROGRESS) continue;
    lib_.ucp_request_free(op.request);
    op.request = nullptr;
    moved = true;
    if (!finish_recv(op.bytes, status, info, *op.req)) return true;  // the pair broke
  }
  while (!recvs_.empty() && recvs_.front().request == nullptr) recvs_.pop();
  return moved;
}

bool UcxPair::finish_recv(size_t posted, ucs_status_t status, const ucp_tag_recv_info_t& info,
                          Request& req) {
  if (status == UCS_OK && info.length == posted) {
    req.complete();
    return true;
  }
  if (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED) {
    // UCX reports the message's own length in both cases; a truncation that
    // does not (an older UCX) is told as "more than" the posted size.
    const bool known = status == UCS_OK || info.length > posted;
    const uint64_t sent = known ? info.length : kUnknownSize;
    const std::string why = mismatch_text(peer(), sent, self(), posted);
    req.fail(Error(self(), peer(), why));
    const Notice tell{kMismatchNotice, posted, sent};
    break_pair(why, &tell);
    return false;
  }
  if (status == UCS_ERR_CANCELED && failure_) {
    req.fail(*failure_);
    return true;
  }
  req.fail(
      Error(self(), peer(),
            "ucx: a receive from " + rank_text(peer()) + " failed (" + status_text(status) + ")"));
  return true;
}

std::string UcxPair::mismatch_text(int sender, uint64_t sent, int receiver, uint64_t posted) const {
  const std::string sent_text =
      sent == kUnknownSize ? "more than " + std::to_string(posted) : std::to_string(sent);
  return "size mismatch with " + rank_text(peer()) + ": " + rank_text(sender) + " sent " +
         sent_text + " bytes but " + rank_text(receiver) + " posted a receive of " +
         std::to_string(posted) + " bytes";
}

bool UcxPair::check_notice() {
  if (notice_request_ == nullptr) return false;
  ucp_tag_recv_info_t info{};
  const ucs_status_t status = lib_.ucp_tag_recv_request_test(notice_request_, &info);
  if (status == UCS_INPROGRESS) return false;
  lib_.ucp_request_free(notice_request_);
  notice_request_ = nullptr;
  if (status != UCS_OK || failure_) return true;
  if (notice_in_.code == kMismatchNotice) {
    break_pair(mismatch_text(self(), notice_in_.sent, peer(), notice_in_.posted), nullptr);
  } else if (notice_in_.code == kClosedNotice) {
    peer_left(rank_text(peer()) + " closed its link");
  } else {
    lose("protocol error on the link to " + rank_text(peer()) + " (unknown notice)");
  }
  return true;
}

void UcxPair::check_endpoint() {
  if (failure_ || !endpoint_->failed()) return;
  peer_left("connection to " + rank_text(peer()) +
            " lost (ucx: " + status_text(endpoint_->status()) + ")");
}

void UcxPair::peer_left(const std::string& why) {
  if (busy()) lose(why);
  // A peer that finished and left is no error until this pair is used again.
  gone_ = true;
  failure_ = PeerLost(self(), peer(), why);
}

void UcxPair::lose(const std::string& why) {
  lost_ = true;
  gone_ = true;
  fail_all(PeerLost(self(), peer(), why));
  throw PeerLost(self(), peer(), why);
}

void UcxPair::break_pair(const std::string& why, const Notice* tell) {
  fail_all(Error(self(), peer(), why));
  const bool peer_gone = gone_;
  gone_ = false;  // from now on every post fails with the mismatch
  if (tell != nullptr && !peer_gone && !endpoint_->failed()) {
    // A synchronous send completes once the peer has matched it (its notice
    // receive is always posted), so the forced close below cannot drop it.
    notice_out_ = *tell;
    ucp_request_param_t p{};
    ucs_status_ptr_t r = lib_.ucp_tag_send_sync_nbx(
        endpoint_->get(), &notice_out_, sizeof notice_out_, make_tag(TagKind::kNotice, self()), &p);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
      const auto until = Clock::now() + Endpoint::kCloseTime;
      while (lib_.ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < until &&
             !endpoint_->failed()) {
        if (!worker_.progress()) worker_.wait(std::chrono::microseconds(1000));
      }
      lib_.ucp_request_free(r);  // a notice still in flight is cancelled by the close
    }
  }
  endpoint_->close(/*force=*/true);
}

void UcxPair::fail_all(common::Failure why) {
  failure_ = std::move(why);
  while (!recvs_.empty()) {
    Op& op = recvs_.front();
    if (op.request != nullptr) {
      lib_.ucp_request_cancel(worker_.get(), op.request);
      lib_.ucp_request_free(op.request);
    }
    if (op.req->pending()) op.req->fail(*failure_);
    recvs_.pop();
  }
  while (!sends_.empty()) {
    Op& op = sends_.front();
    // Released by UCX once it ends: the endpoint fails or closes by force.
    if (op.request != nullptr) lib_.ucp_request_free(op.request);
    if (op.req->pending()) op.req->fail(*failure_);
    sends_.pop();
  }
}

void UcxPair::release_all() {
  for (PostQueue<Op>* queue : {&recvs_, &sends_}) {
    for (; !queue->empty(); queue->pop()) {
      Op& op = queue->front();
      if (op.request == nullptr) continue;
      if (queue == &recvs_) lib_.ucp_request_cancel(worker_.get(), op.request);
      lib_.ucp_request_free(op.request);
    }
  }
}

void UcxPair::cancel_notice() {
  if (notice_request_ == nullptr) return;
  lib_.ucp_request_cancel(worker_.get(), notice_request_);
  lib_.ucp_request_free(notice_request_);
  notice_request_ = nullptr;
}

}  // namespace ringlet::transport::ucx
