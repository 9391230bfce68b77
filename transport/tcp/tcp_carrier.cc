// The TCP carrier: listens from construction, publishes "tcp/addr/<rank>",
// and connects pairs. The lower rank of a pair accepts, the higher one dials,
// so each pair has exactly one connection. Every connection is authenticated
// in both directions with the job's key before it carries data (handshake.h):
// an acceptor learns who arrived from it, and connections from peers other
// than the one it waits for are kept for their own connect() call.
//
// A thread of the carrier accepts for its whole life and runs the handshakes
// of all pending connections side by side, each with its own short deadline:
// a stranger that connects and stalls, drips bytes or sends garbage costs one
// slot until it is dropped (and logged), and never delays a real peer, fails
// the job, or waits unanswered in the backlog once the pairs are connected.
// connect() only waits for the thread to hand over its peer's link.
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

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "ringlet/transport/random.h"
#include "store_wait.h"
#include "tcp/handshake.h"
#include "tcp/socket.h"
#include "tcp/tcp_pair.h"

namespace ringlet::transport {
namespace tcp {
namespace {

namespace hs = handshake;

// How long one connection may take to finish its handshake. A real peer
// needs a round trip and two MACs; a connection still incomplete after this
// is a stranger or a peer that will retry.
constexpr auto kHandshakeTime = std::chrono::seconds(5);
// Connections whose handshake runs at once; past this the oldest is dropped.
constexpr size_t kMaxPending = 64;

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

std::string peer_text(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

hs::Bytes32 fresh_nonce() {
  hs::Bytes32 n{};
  random_bytes(n);
  return n;
}

// One accepted connection whose handshake is under way.
struct Pending {
  Fd fd;
  std::string from;  // the remote address, for the log
  Clock::time_point expires;
  bool challenged = false;  // HELLO checked and CHALLENGE sent; PROOF due
  int32_t dialer = -1;
  hs::Bytes32 dialer_nonce{}, acceptor_nonce{};
  std::vector<uint8_t> rx;
};

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
      throw Error(-1, prefix() + "tcp: no job secret (CarrierOptions::secret is empty): data "
                                 "links are never opened unauthenticated");
    }
    me_.key = std::span(reinterpret_cast<const uint8_t*>(secret_.data()), secret_.size());
    me_.job = hs::job_digest(job_id_);
    me_.rank = rank_;
    me_.size = size_;
    const std::string address = listen_address(options);
    auto [listener, port] = listen_on(address);
    listener_ = std::move(listener);
    wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake_.valid()) throw Error(-1, prefix() + "tcp: " + errno_text("eventfd"));
    acceptor_ = std::jthread([this](std::stop_token stop) { accept_loop(stop); });
    std::string published = address + ":" + std::to_string(port);
    store_->set("tcp/addr/" + std::to_string(rank_),
                std::vector<uint8_t>(published.begin(), published.end()));
  }

  ~TcpCarrier() override {
    acceptor_.request_stop();
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
    if (acceptor_.joinable()) acceptor_.join();
  }

  std::string_view name() const override { return "tcp"; }
  bool supports(MemoryKind kind) const override { return kind == MemoryKind::kHost; }

  std::unique_ptr<Pair> connect(int peer, Deadline deadline) override {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      throw Error(peer, prefix() + "cannot connect to rank " + std::to_string(peer) +
                            " (job size " + std::to_string(size_) + ")");
    }
    Fd socket = rank_ < peer ? accept_from(peer, deadline) : dial(peer, deadline);
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
  std::string prefix() const { return "rank " + std::to_string(rank_) + ": "; }

  [[noreturn]] void timed_out(int peer) {
    throw Timeout(peer,
                  prefix() + "timed out connecting to rank " + std::to_string(peer) + " over tcp");
  }

  // Logged, not thrown: a stranger must not be able to fail the job.
  void refuse(const Pending& p, const std::string& why) {
    ++refused_;
    std::cerr << "ringlet: " << prefix() << "refused a tcp data-link connection from " << p.from
              << ": " << why << std::endl;
  }

  // Reads what has arrived on `p` (never past the frame) and takes the next
  // step. Returns false when the connection is to be dropped.
  bool advance(Pending& p) {
    uint8_t buf[hs::kFrameBytes];
    const ssize_t n = ::recv(p.fd.get(), buf, hs::kFrameBytes - p.rx.size(), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    if (n <= 0) {
      if (!p.rx.empty() || p.challenged) {
        refuse(p, "closed inside the handshake (" + std::to_string(p.rx.size()) + " of " +
                      std::to_string(hs::kFrameBytes) + " bytes of a frame arrived)");
      }
      return false;
    }
    p.rx.insert(p.rx.end(), buf, buf + n);
    if (p.rx.size() < hs::kFrameBytes) return true;
    std::string why;
    const Deadline send_by = Clock::now() + std::chrono::seconds(1);
    if (!p.challenged) {
      if (!hs::check_hello(me_, p.rx, p.dialer, p.dialer_nonce, why)) {
        refuse(p, why);
        return false;
      }
      p.acceptor_nonce = fresh_nonce();
      const hs::Frame c = hs::challenge(me_, p.dialer, p.dialer_nonce, p.acceptor_nonce);
      if (!write_fully(p.fd.get(), c.data(), c.size(), send_by)) return false;
      p.challenged = true;
      p.rx.clear();
      return true;
    }
    if (!hs::check_proof(me_, p.dialer, p.dialer_nonce, p.acceptor_nonce, p.rx, why)) {
      refuse(p, why);
      return false;
    }
    const hs::Frame w = hs::welcome(me_, p.dialer);
    if (!write_fully(p.fd.get(), w.data(), w.size(), send_by)) return false;
    // Proven: this is the rank. A newer link replaces an older one it gave up on.
    {
      std::lock_guard lock(mu_);
      stashed_[p.dialer] = std::move(p.fd);
    }
    handed_over_.notify_all();
    return false;
  }

  // connect()'s side: the acceptor thread hands over the peer's link.
  Fd accept_from(int peer, Deadline deadline) {
    std::unique_lock lock(mu_);
    if (!handed_over_.wait_until(lock, deadline, [&] { return stashed_.contains(peer); })) {
      timed_out(peer);
    }
    auto it = stashed_.find(peer);
    Fd socket = std::move(it->second);
    stashed_.erase(it);
    return socket;
  }

  void accept_loop(const std::stop_token& stop) {
    std::vector<pollfd> fds;
    while (!stop.stop_requested()) {
      const auto now = Clock::now();
      // Drop handshakes that ran out of time.
      std::erase_if(pending_, [&](Pending& p) {
        if (now < p.expires) return false;
        refuse(p, "handshake not completed within " +
                      std::to_string(std::chrono::seconds(kHandshakeTime).count()) + " s");
        return true;
      });
      auto wake = now + std::chrono::seconds(1);
      for (const Pending& p : pending_) wake = std::min(wake, p.expires);
      fds.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      fds.push_back({listener_.get(), POLLIN, 0});
      for (const Pending& p : pending_) fds.push_back({p.fd.get(), POLLIN, 0});
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
      const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(left, 0)));
      if (ready <= 0) continue;  // a timeout (expiry above) or EINTR
      if (fds[0].revents != 0) return;
      // Handshakes first (their indices match fds[2..]), then new arrivals.
      std::vector<bool> drop(pending_.size(), false);
      for (size_t i = 0; i < pending_.size(); ++i) {
        if (fds[i + 2].revents != 0) drop[i] = !advance(pending_[i]);
      }
      for (size_t i = pending_.size(); i-- > 0;) {
        if (drop[i]) pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      }
      if (fds[1].revents & POLLIN) accept_new();
    }
  }

  void accept_new() {
    for (;;) {
      int raw = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (raw < 0) return;  // EAGAIN, or a connection that died before we took it
      Pending p;
      p.fd = Fd(raw);
      tune_data_socket(raw);
      p.from = peer_text(raw);
      p.expires = Clock::now() + kHandshakeTime;
      if (pending_.size() >= kMaxPending) {
        refuse(pending_.front(), "dropped: more than " + std::to_string(kMaxPending) +
                                     " connections were in their handshake at once");
        pending_.pop_front();
      }
      pending_.push_back(std::move(p));
    }
  }

  // One attempt at the dialer's side of the handshake. False: retry on a fresh
  // connection (the acceptor dropped it); throws when the listener that
  // answered is not the peer (another job's, or a different secret).
  bool dial_handshake(int fd, int peer, const std::string& address, Deadline deadline) {
    const Deadline attempt = std::min(deadline, Clock::now() + kHandshakeTime);
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
      throw Error(peer, prefix() + "the data-link listener at " + address + " (published by rank " +
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
    size_t colon = address.rfind(':');
    if (colon == std::string::npos) {
      throw Error(peer,
                  prefix() + "bad tcp address '" + address + "' for rank " + std::to_string(peer));
    }
    std::string host = address.substr(0, colon);
    auto port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
    for (;;) {
      Fd socket = connect_until(host, port, deadline);
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
  Fd listener_;
  Fd wake_;                      // written by the destructor to end the acceptor's poll()
  std::deque<Pending> pending_;  // acceptor thread only: handshakes under way, oldest first
  std::mutex mu_;
  std::condition_variable handed_over_;
  std::map<int, Fd> stashed_;  // under mu_: authenticated, not yet claimed by connect()
  std::atomic<uint64_t> refused_{0};
  std::jthread acceptor_;  // last: starts after everything it uses exists
  std::shared_ptr<PairList> pairs_;
};

}  // namespace
}  // namespace tcp

std::unique_ptr<Carrier> make_tcp_carrier(const CarrierOptions& options) {
  return std::make_unique<tcp::TcpCarrier>(options);
}

}  // namespace ringlet::transport
