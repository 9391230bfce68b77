#include "tcp/tcp_pair.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ringlet::transport::tcp {
namespace {

constexpr uint64_t kData = 0x52474c44;      // "RGLD"
constexpr uint64_t kMismatch = 0x52474c4d;  // "RGLM"
constexpr size_t kHeader = sizeof(WireHeader);
// One syscall moves at most this much, so that size_t regions of many GiB
// never overflow the ssize_t a syscall returns.
constexpr size_t kMaxIo = size_t{1} << 30;

// Written in place of the rest of a frame whose send failed half-way, so the
// peer's stream stays in step and it can still read the mismatch notice.
const uint8_t kZeros[64 << 10] = {};

}  // namespace

TcpPair::TcpPair(int self, int peer, Fd socket, std::shared_ptr<PairList> list)
    : Pair(self, peer), socket_(std::move(socket)), list_(std::move(list)) {
  list_->pairs.push_back(this);
  list_->fds.reserve(list_->pairs.size());
}

TcpPair::~TcpPair() {
  auto& pairs = list_->pairs;
  pairs.erase(std::remove(pairs.begin(), pairs.end(), this), pairs.end());
}

void TcpPair::post_send(const void* data, size_t bytes, Request& req, MemoryKind kind) {
  if (kind != MemoryKind::kHost) {
    req.fail(Error(self(), peer(),
                   "tcp carries host memory only (send to rank " + std::to_string(peer()) + ")"));
    return;
  }
  if (failure_) {
    req.fail(*failure_);
    return;
  }
  req.start();
  sends_.push({static_cast<const uint8_t*>(data), bytes, &req});
}

void TcpPair::post_recv(void* data, size_t bytes, Request& req, MemoryKind kind) {
  if (kind != MemoryKind::kHost) {
    req.fail(
        Error(self(), peer(),
              "tcp carries host memory only (receive from rank " + std::to_string(peer()) + ")"));
    return;
  }
  if (failure_) {
    req.fail(*failure_);
    return;
  }
  req.start();
  recvs_.push({static_cast<uint8_t*>(data), bytes, &req});
}

bool TcpPair::progress() {
  if (lost_) throw PeerLost(self(), peer(), failure_->cause());
  bool moved = pump_sends();
  moved |= pump_recvs();
  return moved;
}

short TcpPair::poll_events() const {
  if (lost_) return 0;
  short events = 0;
  if (!failure_ && (in_header_got_ < kHeader || !recvs_.empty())) events |= POLLIN;
  if (out_frame_ != Frame::kNone || notice_pending_ || (!failure_ && !sends_.empty())) {
    events |= POLLOUT;
  }
  return events;
}

bool TcpPair::start_frame() {
  out_done_ = 0;
  if (notice_pending_) {
    notice_pending_ = false;
    out_frame_ = Frame::kNotice;
    out_header_ = notice_;
    out_payload_ = 0;
    return true;
  }
  if (failure_ || sends_.empty()) return false;
  const Send& s = sends_.front();
  out_frame_ = Frame::kData;
  out_header_ = {kData, s.bytes, 0};
  out_payload_ = s.bytes;
  return true;
}

bool TcpPair::pump_sends() {
  bool moved = false;
  for (;;) {
    if (out_frame_ == Frame::kNone && !start_frame()) return moved;
    iovec iov[2];
    int count = 0;
    if (out_done_ < kHeader) {
      iov[count++] = {reinterpret_cast<char*>(&out_header_) + out_done_, kHeader - out_done_};
    }
    size_t payload_done = out_done_ > kHeader ? out_done_ - kHeader : 0;
    size_t payload_left = std::min(out_payload_ - payload_done, kMaxIo);
    if (payload_left > 0) {
      if (out_frame_ == Frame::kPadding) {
        iov[count++] = {const_cast<uint8_t*>(kZeros), std::min(payload_left, sizeof kZeros)};
      } else {
        iov[count++] = {const_cast<uint8_t*>(sends_.front().data) + payload_done, payload_left};
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    ssize_t n = ::sendmsg(socket_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      if (errno == EINTR) continue;
      lose("connection to rank " + std::to_string(peer()) + " closed (" + errno_text("send") + ")");
    }
    moved = true;
    out_done_ += static_cast<size_t>(n);
    if (out_done_ < kHeader + out_payload_) continue;
    if (out_frame_ == Frame::kData) {
      sends_.front().req->complete();
      sends_.pop();
    }
    out_frame_ = Frame::kNone;
  }
}

bool TcpPair::pump_recvs() {
  bool moved = false;
  while (!failure_) {
    void* dst;
    size_t want;
    if (in_header_got_ < kHeader) {
      dst = reinterpret_cast<char*>(&in_header_) + in_header_got_;
      want = kHeader - in_header_got_;
    } else if (in_header_.kind == kMismatch) {
      break_pair("size mismatch with rank " + std::to_string(peer()) + ": rank " +
                 std::to_string(self()) + " sent " + std::to_string(in_header_.aux) +
                 " bytes but rank " + std::to_string(peer()) + " posted a receive of " +
                 std::to_string(in_header_.bytes) + " bytes");
      return true;
    } else if (in_header_.kind != kData) {
      lose("protocol error on the connection to rank " + std::to_string(peer()) +
           " (bad frame header)");
    } else if (recvs_.empty()) {
      // Leave the payload in the socket: TCP flow control holds the sender
      // back until a receive is posted.
      return moved;
    } else {
      Recv& r = recvs_.front();
      if (in_header_.bytes != r.bytes) {
        notice_ = {kMismatch, r.bytes, in_header_.bytes};
        notice_pending_ = true;
        break_pair("size mismatch with rank " + std::to_string(peer()) + ": rank " +
                   std::to_string(peer()) + " sent " + std::to_string(in_header_.bytes) +
                   " bytes but rank " + std::to_string(self()) + " posted a receive of " +
                   std::to_string(r.bytes) + " bytes");
        pump_sends();  // push the notice out now; the caller may not progress again
        return true;
      }
      if (in_done_ == r.bytes) {
        r.req->complete();
        recvs_.pop();
        in_header_got_ = 0;
        in_done_ = 0;
        moved = true;
        continue;
      }
      dst = r.data + in_done_;
      want = std::min(r.bytes - in_done_, kMaxIo);
    }
    iovec iov[2] = {{dst, want}, {nullptr, 0}};
    int count = 1;
    if (in_header_got_ < kHeader && !recvs_.empty() && recvs_.front().bytes > 0) {
      // Read the header and the posted buffer in one syscall. Only the posted
      // size is read, so a matching message never spills into the next one;
      // a mismatching one breaks the pair anyway.
      iov[count++] = {recvs_.front().data, std::min(recvs_.front().bytes, kMaxIo)};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    ssize_t n = ::recvmsg(socket_.get(), &msg, MSG_DONTWAIT);
    if (n > 0) {
      moved = true;
      size_t got = static_cast<size_t>(n);
      if (in_header_got_ < kHeader) {
        size_t header_part = std::min(got, kHeader - in_header_got_);
        in_header_got_ += header_part;
        got -= header_part;
      }
      in_done_ += got;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return moved;
    if (n < 0 && errno == EINTR) continue;
    std::string why = "connection to rank " + std::to_string(peer()) + " closed (" +
                      (n == 0 ? std::string("peer closed the socket") : errno_text("recv")) + ")";
    if (!busy() && in_header_got_ == 0 && out_frame_ == Frame::kNone) {
      // A peer that finished and left is no error until this pair is used
      // again: later posts fail with this message.
      failure_ = PeerLost(self(), peer(), why);
      return moved;
    }
    lose(why);
  }
  return moved;
}

void TcpPair::fail_all(common::Failure why) {
  failure_ = std::move(why);
  fail_queued(sends_, *failure_);
  fail_queued(recvs_, *failure_);
}

void TcpPair::break_pair(const std::string& why) {
  // A data frame half-written keeps its length on the wire, filled with zeros.
  if (out_frame_ == Frame::kData) out_frame_ = Frame::kPadding;
  fail_all(Error(self(), peer(), why));
}

void TcpPair::lose(const std::string& why) {
  lost_ = true;
  out_frame_ = Frame::kNone;
  notice_pending_ = false;
  fail_all(PeerLost(self(), peer(), why));
  throw PeerLost(self(), peer(), why);
}

}  // namespace ringlet::transport::tcp
