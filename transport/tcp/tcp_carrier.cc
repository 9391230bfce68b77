// The TCP carrier: listens from construction, publishes "tcp/addr/<rank>",
// and connects pairs. The lower rank of a pair accepts, the higher one dials,
// so each pair has exactly one connection. Every connection is authenticated
// in both directions with the job's key before it carries data (handshake.h):
// an acceptor learns who arrived from it, and connections from peers other
// than the one it waits for are kept for their own connect() call.
//
// The accepting side runs on a thread of its own for the carrier's whole life
// (acceptor.h); connect() only waits for it to hand over its peer's link.
//
// Where it listens: on the named interface's address when one is given, else
// on CarrierOptions::address, which the core sets to 127.0.0.1 when the whole
// job is on one host (nothing outside it needs to connect) and otherwise to
// the source address this rank reaches the rendezvous store from (the route
// the other hosts share). Never on every interface.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>

#include "ringlet/common/random.h"
#include "store_wait.h"
#include "tcp/acceptor.h"
#include "tcp/handshake.h"
#include "tcp/socket.h"
#include "tcp/tcp_pair.h"

namespace ringlet::transport {
namespace tcp {
namespace {

namespace hs = handshake;

// The IPv4 address to listen on, from the address the core chose.
std::string listen_address(const CarrierOptions& options) {
  if (!options.interface.empty()) return interface_address(options.interface);
  const std::string& a = options.address;
  if (a.empty()) return "127.0.0.1";
  in_addr v4{};
  if (::inet_pton(AF_INET, a.c_str(), &v4) == 1) return a;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, a.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return "127.0.0.1";
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &v6.s6_addr[12], text, sizeof text);
      return text;
    }
  }
  // Reached over IPv6 only: data links speak IPv4, so take this host's
  // first non-loopback IPv4 address (RINGLET_NETWORK_INTERFACE picks another).
  return interface_address("");
}

hs::Bytes32 fresh_nonce() {
  hs::Bytes32 n{};
  common::random_bytes(n);
  return n;
}

class TcpCarrier final : public Carrier {
 public:
  explicit TcpCarrier(const CarrierOptions& options)
      : rank_(options.rank),
        size_(options.size),
        job_id_(options.job_id),
        secret_(options.secret),
        store_(options.store),
        pairs_(std::make_shared<PairList>()) {
    if (store_ == nullptr) throw Error(-1, "tcp: CarrierOptions::store is required");
    if (secret_.empty()) {
      throw Error(rank_, -1,
                  "tcp: no job secret (CarrierOptions::secret is empty): data "
                  "links are never opened unauthenticated");
    }
    me_.key = std::span(reinterpret_cast<const uint8_t*>(secret_.data()), secret_.size());
    me_.job = hs::job_digest(job_id_);
    me_.rank = rank_;
    me_.size = size_;
    const std::string address = listen_address(options);
    auto [listener, port] = listen_on(address);
    acceptor_ = std::make_unique<Acceptor>(std::move(listener), me_);
    std::string published = address + ":" + std::to_string(port);
    store_->set("tcp/addr/" + std::to_string(rank_),
                std::vector<uint8_t>(published.begin(), published.end()));
  }

  std::string_view name() const override { return "tcp"; }
  bool supports(MemoryKind kind) const override { return kind == MemoryKind::kHost; }

  std::unique_ptr<Pair> connect(int peer, Deadline deadline) override {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      throw Error(rank_, peer,
                  "cannot connect to rank " + std::to_string(peer) + " (job size " +
                      std::to_string(size_) + ")");
    }
    Fd socket = rank_ < peer ? acceptor_->take(peer, deadline) : dial(peer, deadline);
    if (!socket.valid()) timed_out(peer);
    return std::make_unique<TcpPair>(rank_, peer, std::move(socket), pairs_);
  }

  void wait_for_activity(std::chrono::microseconds timeout) override {
    auto& fds = pairs_->fds;
    fds.clear();
    for (TcpPair* pair : pairs_->pairs) {
      short events = pair->poll_events();
      if (events != 0) fds.push_back({pair->fd(), events, 0});
    }
    timespec ts{static_cast<time_t>(timeout.count() / 1000000),
                static_cast<long>(timeout.count() % 1000000) * 1000};
    // Errors (EINTR) just end the wait early; progress() reports real ones.
    ::ppoll(fds.data(), fds.size(), &ts, nullptr);
  }

 private:
  [[noreturn]] void timed_out(int peer) {
    throw Timeout(rank_, peer,
                  "timed out connecting to rank " + std::to_string(peer) + " over tcp");
  }

  // One attempt at the dialer's side of the handshake. False: retry on a fresh
  // connection (the acceptor dropped it); throws when the listener that
  // answered is not the peer (another job's, or a different secret).
  bool dial_handshake(int fd, int peer, const std::string& address, Deadline deadline) {
    const Deadline attempt = std::min(deadline, Clock::now() + Acceptor::kHandshakeTime);
    const hs::Bytes32 mine = fresh_nonce();
    const hs::Frame h = hs::hello(me_, peer, mine);
    hs::Frame in{};
    if (!write_fully(fd, h.data(), h.size(), attempt) ||
        !read_fully(fd, in.data(), in.size(), attempt)) {
      return false;
    }
    hs::Bytes32 theirs{};
    std::string why;
    if (!hs::check_challenge(me_, peer, mine, in, theirs, why)) {
      throw Error(rank_, peer,
                  "the data-link listener at " + address + " (published by rank " +
                      std::to_string(peer) + ") failed the handshake: " + why);
    }
    const hs::Frame pr = hs::proof_frame(me_, peer, mine, theirs);
    if (!write_fully(fd, pr.data(), pr.size(), attempt) ||
        !read_fully(fd, in.data(), in.size(), attempt)) {
      return false;
    }
    return hs::check_welcome(me_, peer, in, why);
  }

  Fd dial(int peer, Deadline deadline) {
    std::vector<uint8_t> value =
        get_or_timeout(*store_, "tcp/addr/" + std::to_string(peer), deadline, rank_, peer,
                       "connecting to rank " + std::to_string(peer) + " over tcp");
    std::string address(value.begin(), value.end());
    const size_t colon = address.rfind(':');
    unsigned port = 0;
    const char* const digits = address.data() + (colon == std::string::npos ? 0 : colon + 1);
    const char* const end = address.data() + address.size();
    const auto [past, ec] = std::from_chars(digits, end, port);
    if (colon == std::string::npos || ec != std::errc() || past != end || digits == end ||
        port > 65535) {
      throw Error(rank_, peer,
                  "bad tcp address '" + address + "' for rank " + std::to_string(peer));
    }
    std::string host = address.substr(0, colon);
    for (;;) {
      Fd socket = connect_until(host, static_cast<uint16_t>(port), deadline);
      if (!socket.valid()) timed_out(peer);
      if (dial_handshake(socket.get(), peer, address, deadline)) return socket;
      if (Clock::now() >= deadline) timed_out(peer);
    }
  }

  int rank_;
  int size_;
  std::string job_id_;
  std::string secret_;  // the key bytes; me_.key points into it
  hs::Identity me_;
  KeyValue* store_;
  std::unique_ptr<Acceptor> acceptor_;
  std::shared_ptr<PairList> pairs_;
};

}  // namespace
}  // namespace tcp

std::unique_ptr<Carrier> make_tcp_carrier(const CarrierOptions& options) {
  return std::make_unique<tcp::TcpCarrier>(options);
}

}  // namespace ringlet::transport
