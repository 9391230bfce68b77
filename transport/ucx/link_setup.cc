#include "ucx/link_setup.h"

#include <algorithm>

#include "ringlet/common/logging.h"
#include "ringlet/common/random.h"
#include "store_wait.h"
#include "ucx/tags.h"

namespace ringlet::transport::ucx {
namespace {

namespace hs = tcp::handshake;

std::string rank_text(int r) { return "rank " + std::to_string(r); }

hs::Bytes32 fresh_nonce() {
  hs::Bytes32 n{};
  common::random_bytes(n);
  return n;
}

std::string address_key(int rank) { return "ucx/addr/" + std::to_string(rank); }

}  // namespace

LinkSetup::LinkSetup(std::shared_ptr<Worker> worker, hs::Identity me, KeyValue* store)
    : worker_(std::move(worker)), me_(me), store_(store) {
  post_receive();
}

LinkSetup::~LinkSetup() {
  // Endpoints never handed to a pair carried only handshake frames: nothing
  // that must still arrive, and a peer that never connected would not answer
  // a flush.
  for (auto& [peer, ep] : endpoints_) ep->close(/*force=*/true);
  if (rx_request_ != nullptr) {
    worker_->lib().ucp_request_cancel(worker_->get(), rx_request_);
    worker_->lib().ucp_request_free(rx_request_);
  }
}

void LinkSetup::post_receive() {
  // Never completed on the spot: UCX 1.13 then leaves the sender's tag unreported.
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  ucs_status_ptr_t r = worker_->lib().ucp_tag_recv_nbx(
      worker_->get(), rx_.data(), rx_.size(), make_tag(TagKind::kHandshake, 0), kKindMask, &p);
  if (UCS_PTR_IS_ERR(r) || r == nullptr) {
    throw Error(me_.rank, -1,
                "ucx: cannot post the handshake receive (" +
                    status_text(r == nullptr ? UCS_ERR_NO_MESSAGE : UCS_PTR_STATUS(r)) + ")");
  }
  rx_request_ = r;
}

Endpoint& LinkSetup::endpoint_to(int peer, Deadline deadline) {
  auto it = endpoints_.find(peer);
  if (it == endpoints_.end() || it->second->failed()) {
    const std::vector<uint8_t> address =
        get_or_timeout(*store_, address_key(peer), deadline, me_.rank, peer,
                       "connecting to " + rank_text(peer) + " over ucx");
    endpoints_[peer] = std::make_unique<Endpoint>(worker_, peer, address);
    it = endpoints_.find(peer);
  }
  return *it->second;
}

void LinkSetup::send(Endpoint& to, const Frame& frame) {
  worker_->send_owned(to.get(), make_tag(TagKind::kHandshake, me_.rank),
                      std::vector<uint8_t>(frame.begin(), frame.end()));
}

void LinkSetup::refuse(int from, const std::string& why) {
  // The logger's prefix names this rank.
  common::log(common::LogLevel::kWarning, "refused a ucx data-link handshake from %s: %s",
              rank_text(from).c_str(), why.c_str());
}

bool LinkSetup::serve(Deadline deadline) {
  bool moved = worker_->progress();
  if (rx_request_ != nullptr) {
    const ucs_status_t status = worker_->lib().ucp_tag_recv_request_test(rx_request_, &rx_info_);
    if (status != UCS_INPROGRESS) {
      worker_->lib().ucp_request_free(rx_request_);
      rx_request_ = nullptr;
      const int from = tag_sender(rx_info_.sender_tag);
      if (status == UCS_OK && rx_info_.length == rx_.size()) {
        inbox_.emplace_back(from, rx_);
      } else {
        refuse(from, "a handshake message of " + std::to_string(rx_info_.length) +
                         " bytes, expected " + std::to_string(rx_.size()) + " (" +
                         status_text(status) + ")");
      }
      post_receive();
    }
  }
  // Expired half-done handshakes go: the dialer retries with a fresh HELLO.
  const auto now = Clock::now();
  std::erase_if(accepting_, [&](const auto& a) { return a.second.expires < now; });
  if (inbox_.empty()) return moved;
  std::vector<std::pair<int, Frame>> frames;
  frames.swap(inbox_);
  for (const auto& [from, frame] : frames) handle(from, frame, deadline);
  return true;
}

void LinkSetup::handle(int from, const Frame& frame, Deadline deadline) {
  hs::Message m;
  std::string why;
  if (!hs::parse(frame, me_.size, m, why)) return refuse(from, why);
  if (m.from != from) {
    return refuse(from, "the frame claims to come from " + rank_text(m.from));
  }
  switch (m.kind) {
    case hs::Kind::kHello: {
      int32_t dialer = -1;
      Bytes32 dialer_nonce{};
      if (!hs::check_hello(me_, frame, dialer, dialer_nonce, why)) return refuse(from, why);
      if (dialer < me_.rank) {
        return refuse(from, "a HELLO from a lower rank (the higher rank of a pair dials)");
      }
      Endpoint* to = nullptr;
      try {
        to = &endpoint_to(dialer, std::min(deadline, Clock::now() + kHandshakeTime));
      } catch (const Error& e) {
        return refuse(from, e.cause());
      }
      const Bytes32 mine = fresh_nonce();
      accepting_[dialer] = {dialer_nonce, mine, Clock::now() + kHandshakeTime};
      send(*to, hs::challenge(me_, dialer, dialer_nonce, mine));
      return;
    }
    case hs::Kind::kProof: {
      auto it = accepting_.find(from);
      if (it == accepting_.end()) return refuse(from, "a PROOF without a HELLO answered");
      const Accepting a = it->second;
      accepting_.erase(it);
      if (!hs::check_proof(me_, from, a.dialer_nonce, a.acceptor_nonce, frame, why)) {
        return refuse(from, why);
      }
      proven_.insert(from);
      return;
    }
    case hs::Kind::kChallenge:
      challenges_[from] = frame;
      return;
    default:
      return refuse(from, "an unexpected handshake frame");
  }
}

void LinkSetup::wait(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  worker_->wait(std::clamp(left, std::chrono::microseconds(0), std::chrono::microseconds(1000)));
}

std::unique_ptr<Endpoint> LinkSetup::dial(int peer, Deadline deadline) {
  Endpoint& to = endpoint_to(peer, deadline);
  const Bytes32 mine = fresh_nonce();
  challenges_.erase(peer);
  send(to, hs::hello(me_, peer, mine));
  for (;;) {
    const bool moved = serve(deadline);
    if (auto it = challenges_.find(peer); it != challenges_.end()) {
      const Frame frame = it->second;
      challenges_.erase(it);
      Bytes32 theirs{};
      std::string why;
      if (hs::check_challenge(me_, peer, mine, frame, theirs, why)) {
        send(to, hs::proof_frame(me_, peer, mine, theirs));
        old_nonces_.erase(peer);
        auto ep = std::move(endpoints_[peer]);
        endpoints_.erase(peer);
        return ep;
      }
      const auto& old = old_nonces_[peer];
      const bool stale = std::any_of(old.begin(), old.end(), [&](const Bytes32& n) {
        Bytes32 ignored{};
        std::string unused;
        return hs::check_challenge(me_, peer, n, frame, ignored, unused);
      });
      if (!stale) {
        throw Error(me_.rank, peer,
                    "the ucx link to " + rank_text(peer) + " failed the handshake: " + why);
      }
      continue;
    }
    if (to.failed()) {
      throw PeerLost(me_.rank, peer,
                     "connection to " + rank_text(peer) +
                         " lost while connecting (ucx: " + status_text(to.status()) + ")");
    }
    if (Clock::now() >= deadline) {
      old_nonces_[peer].push_back(mine);
      throw Timeout(me_.rank, peer, "timed out connecting to " + rank_text(peer) + " over ucx");
    }
    if (!moved) wait(deadline);
  }
}

std::unique_ptr<Endpoint> LinkSetup::accept(int peer, Deadline deadline) {
  for (;;) {
    if (proven_.erase(peer) != 0) {
      auto ep = std::move(endpoints_[peer]);
      endpoints_.erase(peer);
      if (ep != nullptr) return ep;
    }
    const bool moved = serve(deadline);
    if (proven_.count(peer) != 0) continue;
    if (Clock::now() >= deadline) {
      throw Timeout(me_.rank, peer, "timed out connecting to " + rank_text(peer) + " over ucx");
    }
    if (!moved) wait(deadline);
  }
}

}  // namespace ringlet::transport::ucx
