// The rendezvous store's server: one thread, one poll() over the listener and
// every client, all sockets non-blocking, one input and one output buffer per
// connection. Nothing a client does (stall mid-frame, never read its replies,
// send garbage) can block the loop: a bad frame drops that connection only.
//
// A GET for a missing key parks the connection in `waiters` and is answered
// when a SET or ADD creates the key; the client enforces its own deadline and
// closes the connection if it gives up, which removes it here. A connection's
// will (WILL) is set as it closes, however it closes: a rank whose process
// died leaves word in the store at once.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "core/bootstrap/fd.h"
#include "core/bootstrap/store.h"
#include "core/bootstrap/store_wire.h"
#include "core/config.h"
#include "ringlet/common/host_name.h"
#include "ringlet/common/logging.h"
#include "ringlet/common/random.h"

namespace ringlet::core {

using common::Hmac;
using bootstrap::UniqueFd;
namespace wire = bootstrap::wire;

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::string peer_name(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, port, sizeof port,
              NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

// The store listens only where the rendezvous address says rank 0 is: every
// rank dials that address, so no other is needed, and a loopback rendezvous
// (a job on one host) is then unreachable from the network. A host name is
// bound at every address it resolves to here; a multi-host job must therefore
// name rank 0 by an address or name that resolves to a routable address on
// rank 0 itself (ringletrun and the MPI bootstrap publish numeric addresses).
std::vector<UniqueFd> listen_on(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  // Where rank 0 serves the store is the launch's choice (RINGLET_RENDEZVOUS).
  const std::string where =
      "the rendezvous store cannot listen on " + host + ":" + std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    throw ConfigError(where + ": cannot resolve '" + host + "': " + gai_strerror(rc) +
                      " (RINGLET_RENDEZVOUS)");
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, freeaddrinfo);
  std::vector<UniqueFd> listeners;
  std::vector<std::vector<uint8_t>> bound;  // addresses already bound (a resolver may repeat one)
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    std::vector<uint8_t> key(reinterpret_cast<uint8_t*>(a->ai_addr),
                             reinterpret_cast<uint8_t*>(a->ai_addr) + a->ai_addrlen);
    if (std::find(bound.begin(), bound.end(), key) != bound.end()) continue;
    UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) {
      why = errno_text("socket");
      continue;
    }
    int one = 1;
    // Rank 0 of the next job may reuse the port while this one's sockets linger in TIME_WAIT.
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6) setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    sockaddr_storage addr{};
    std::memcpy(&addr, a->ai_addr, a->ai_addrlen);
    // Port 0 asks for a free port: every further address takes the first one's.
    if (!listeners.empty() && port == 0) {
      sockaddr_storage first{};
      socklen_t len = sizeof first;
      getsockname(listeners.front().get(), reinterpret_cast<sockaddr*>(&first), &len);
      const uint16_t chosen = first.ss_family == AF_INET6
                                  ? reinterpret_cast<sockaddr_in6*>(&first)->sin6_port
                                  : reinterpret_cast<sockaddr_in*>(&first)->sin_port;
      if (addr.ss_family == AF_INET6) {
        reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = chosen;
      } else {
        reinterpret_cast<sockaddr_in*>(&addr)->sin_port = chosen;
      }
    }
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), a->ai_addrlen) != 0) {
      why = errno_text("bind");
      continue;
    }
    if (::listen(fd.get(), 1024) != 0) {
      why = errno_text("listen");
      continue;
    }
    bound.push_back(std::move(key));
    listeners.push_back(std::move(fd));
  }
  if (listeners.empty()) throw ConfigError(where + ": " + why + " (RINGLET_RENDEZVOUS)");
  return listeners;
}

struct Connection {
  UniqueFd fd;
  std::string peer;
  wire::Channel in;   // client -> server
  wire::Channel out;  // server -> client
  bool client_nonce = false;  // arrived: rx holds frames from here on
  // Set by the server when this connection closes, unless set by then (kWill).
  std::optional<std::pair<std::string, std::vector<uint8_t>>> will;
  std::vector<uint8_t> rx;
  std::vector<uint8_t> tx;
  size_t tx_sent = 0;
};

}  // namespace

struct StoreServer::Impl {
  Impl(const std::string& host, uint16_t port, const std::string& secret)
      : hmac(common::secret_key(secret)), listeners(listen_on(host, port)) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    getsockname(listeners.front().get(), reinterpret_cast<sockaddr*>(&addr), &len);
    bound_port = ntohs(addr.ss_family == AF_INET6
                           ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                           : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    wake = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake) {
      throw common::Failure(common::FailureKind::kInternal,
                            "the rendezvous store: " + errno_text("eventfd"));
    }
    // This server's identity, read by every client as it connects: a client
    // whose process has finished with a store (shutdown, then init again)
    // refuses that store should it still be closing, and waits for the next.
    // 8 random bytes, the pid (4 bytes, little-endian) and the host name, so
    // that a client in this very process knows the store is its own.
    std::vector<uint8_t> instance(12);
    common::random_bytes(std::span(instance).first(8));
    const auto pid = static_cast<uint32_t>(::getpid());
    for (size_t i = 0; i < 4; ++i) instance[8 + i] = static_cast<uint8_t>(pid >> (8 * i));
    const std::string machine = common::host_name();
    instance.insert(instance.end(), machine.begin(), machine.end());
    data[wire::kInstanceKey] = std::move(instance);
  }

  void run(std::stop_token stop);
  void accept_all(int listener);
  void on_readable(uint64_t id);
  void handle(uint64_t id, wire::Frame frame);
  void reply(uint64_t id, wire::Op op, std::span<const uint8_t> payload);
  void flush(uint64_t id);
  void refuse(uint64_t id, const std::string& why);
  void drop(uint64_t id) {
    auto will = std::move(conns.at(id).will);
    conns.erase(id);
    open_connections.store(conns.size());
    if (will && !data.contains(will->first)) {
      data[will->first] = std::move(will->second);
      stored(will->first);
    }
  }
  void stored(const std::string& key);

  Hmac hmac;
  std::vector<UniqueFd> listeners;  // one per address of the rendezvous host
  UniqueFd wake;  // written by the destructor to end poll()
  uint16_t bound_port = 0;
  std::atomic<uint64_t> refused{0};
  std::atomic<size_t> open_connections{0};  // conns.size(), for other threads

  // Owned by the server thread alone.
  std::map<std::string, std::vector<uint8_t>> data;
  std::map<std::string, std::vector<uint64_t>> waiters;  // key -> connection ids
  std::map<uint64_t, Connection> conns;
  uint64_t next_id = 1;

  std::jthread thread;  // last member: starts after the rest exists
};

void StoreServer::Impl::run(std::stop_token stop) {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stop.stop_requested()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake.get(), POLLIN, 0});
    for (const UniqueFd& l : listeners) fds.push_back({l.get(), POLLIN, 0});
    for (auto& [id, c] : conns) {
      short events = POLLIN;
      if (c.tx_sent < c.tx.size()) events |= POLLOUT;
      fds.push_back({c.fd.get(), events, 0});
      ids.push_back(id);
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      common::log(common::LogLevel::kError, "store: poll failed, the store stops serving: %s",
                  std::strerror(errno));
      return;
    }
    if (fds[0].revents) break;
    const size_t first_conn = 1 + listeners.size();
    for (size_t l = 0; l < listeners.size(); ++l) {
      if (fds[1 + l].revents & POLLIN) accept_all(listeners[l].get());
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      const short ev = fds[i + first_conn].revents;
      if (ev == 0 || !conns.contains(ids[i])) continue;
      if (ev & POLLOUT) flush(ids[i]);
      if (conns.contains(ids[i]) && (ev & (POLLIN | POLLHUP | POLLERR))) on_readable(ids[i]);
    }
  }
}

void StoreServer::Impl::accept_all(int listener) {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int raw = ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len,
                        SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) return;  // EAGAIN, or a connection that died before we took it
    int one = 1;
    setsockopt(raw, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const uint64_t id = next_id++;
    Connection& c = conns[id];
    c.fd = UniqueFd(raw);
    c.peer = peer_name(addr, len);
    common::random_bytes(c.in.nonce);
    c.in.hmac = c.out.hmac = &hmac;
    c.out.nonce = c.in.nonce;
    open_connections.store(conns.size());
    c.in.direction = wire::Direction::kToServer;
    c.out.direction = wire::Direction::kToClient;
    c.tx.assign(wire::kMagic.begin(), wire::kMagic.end());
    c.tx.insert(c.tx.end(), c.in.nonce.begin(), c.in.nonce.end());
    flush(id);
  }
}

void StoreServer::Impl::on_readable(uint64_t id) {
  Connection& c = conns.at(id);
  uint8_t chunk[64 * 1024];
  bool closed = false;  // EOF or reset, once what came before it is handled
  // A client that floods must not starve the others: take at most 1 MiB per
  // wake-up; poll() reports the rest next time round.
  for (size_t taken = 0; taken < (1u << 20);) {
    ssize_t n = ::recv(c.fd.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      c.rx.insert(c.rx.end(), chunk, chunk + n);
      taken += static_cast<size_t>(n);
      if (!c.client_nonce && c.rx.size() >= c.in.client_nonce.size()) {
        std::copy_n(c.rx.begin(), c.in.client_nonce.size(), c.in.client_nonce.begin());
        c.out.client_nonce = c.in.client_nonce;
        c.rx.erase(c.rx.begin(), c.rx.begin() + c.in.client_nonce.size());
        c.client_nonce = true;
      }
      if (!c.client_nonce) continue;
      // Refuse a too-long length now rather than after buffering it.
      if (c.rx.size() >= wire::kHeaderBytes && wire::get_u32(c.rx.data()) > wire::kMaxPayload) {
        break;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    closed = true;
    break;
  }
  size_t offset = 0;
  while (conns.contains(id) && conns.at(id).client_nonce) {
    Connection& cc = conns.at(id);
    wire::Decoded d = wire::decode(cc.in, std::span(cc.rx).subspan(offset));
    if (d.status == wire::Status::kNeedMore) break;
    if (d.status == wire::Status::kBad) {
      refuse(id, d.why);
      return;
    }
    offset += d.consumed;
    handle(id, std::move(d.frame));
  }
  if (!conns.contains(id)) return;
  auto& rx = conns.at(id).rx;
  rx.erase(rx.begin(), rx.begin() + static_cast<ptrdiff_t>(offset));
  if (!closed) return;
  // EOF or reset, after the frames that came before it: a clean goodbye
  // unless it cut a frame short.
  if (rx.empty()) {
    drop(id);
    return;
  }
  refuse(id, "connection closed inside a frame (" + std::to_string(rx.size()) +
                 " bytes of it arrived)");
}

void StoreServer::Impl::handle(uint64_t id, wire::Frame frame) {
  wire::Request request;
  try {
    request = wire::parse_request(frame);
  } catch (const wire::BadRequest& e) {
    refuse(id, e.what());
    return;
  }
  const std::string& key = request.key;
  switch (request.op) {
    case wire::Op::kSet:
      data[key].assign(request.value.begin(), request.value.end());
      reply(id, wire::Op::kOk, {});
      stored(key);
      return;
    case wire::Op::kWill:
      // An empty key takes the will back (the client drops this connection).
      if (key.empty()) {
        conns.at(id).will.reset();
      } else {
        conns.at(id).will.emplace(key,
                                  std::vector<uint8_t>(request.value.begin(), request.value.end()));
      }
      reply(id, wire::Op::kOk, {});
      return;
    case wire::Op::kGet:
      if (auto it = data.find(key); it != data.end()) {
        reply(id, wire::Op::kOk, it->second);
      } else {
        waiters[key].push_back(id);
      }
      return;
    case wire::Op::kTryGet: {
      auto it = data.find(key);
      std::vector<uint8_t> out(1 + (it != data.end() ? it->second.size() : 0));
      if (it != data.end()) {
        out[0] = 1;
        std::copy(it->second.begin(), it->second.end(), out.begin() + 1);
      }
      reply(id, wire::Op::kOk, out);
      return;
    }
    case wire::Op::kAdd: {
      int64_t value = 0;
      if (auto it = data.find(key); it != data.end()) {
        const auto parsed = parse_int64(std::string(it->second.begin(), it->second.end()));
        if (!parsed) {
          const std::string why = "ADD to key '" + key + "', which holds a non-integer value";
          reply(id, wire::Op::kError, std::span(reinterpret_cast<const uint8_t*>(why.data()),
                                                why.size()));
          return;
        }
        value = *parsed;
      }
      int64_t sum = 0;
      if (__builtin_add_overflow(value, request.delta, &sum)) {
        const std::string why = "ADD of " + std::to_string(request.delta) + " to key '" + key +
                                "' overflows its value " + std::to_string(value);
        reply(id, wire::Op::kError, std::span(reinterpret_cast<const uint8_t*>(why.data()),
                                              why.size()));
        return;
      }
      value = sum;
      const std::string text = std::to_string(value);
      data[key].assign(text.begin(), text.end());
      std::vector<uint8_t> out;
      wire::put_u64(out, static_cast<uint64_t>(value));
      reply(id, wire::Op::kOk, out);
      stored(key);
      return;
    }
    default:
      return;
  }
}

void StoreServer::Impl::stored(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  const std::vector<uint64_t> ids = std::move(it->second);
  waiters.erase(it);
  const std::vector<uint8_t>& value = data.at(key);
  for (uint64_t waiter : ids) {
    if (conns.contains(waiter)) reply(waiter, wire::Op::kOk, value);
  }
}

void StoreServer::Impl::reply(uint64_t id, wire::Op op, std::span<const uint8_t> payload) {
  Connection& c = conns.at(id);
  const auto frame = wire::encode(c.out, op, payload);
  c.tx.insert(c.tx.end(), frame.begin(), frame.end());
  flush(id);
}

void StoreServer::Impl::flush(uint64_t id) {
  Connection& c = conns.at(id);
  while (c.tx_sent < c.tx.size()) {
    ssize_t n = ::send(c.fd.get(), c.tx.data() + c.tx_sent, c.tx.size() - c.tx_sent,
                       MSG_NOSIGNAL);
    if (n > 0) {
      c.tx_sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;  // poll() reports POLLOUT when there is room again
    } else {
      drop(id);  // the client went away; its reads will say so
      return;
    }
  }
  c.tx.clear();
  c.tx_sent = 0;
}

void StoreServer::Impl::refuse(uint64_t id, const std::string& why) {
  Connection& c = conns.at(id);
  ++refused;
  common::log(common::LogLevel::kWarning, "store: refused message from %s: %s", c.peer.c_str(),
              why.c_str());
  // Tell the client why, best effort: one non-blocking send, then close.
  const auto note = wire::encode_refusal(why);
  [[maybe_unused]] ssize_t n = ::send(c.fd.get(), note.data(), note.size(), MSG_NOSIGNAL);
  drop(id);
}

StoreServer::StoreServer(uint16_t port, std::string secret)
    : StoreServer("127.0.0.1", port, std::move(secret)) {}

StoreServer::StoreServer(const std::string& host, uint16_t port, std::string secret) {
  if (secret.empty()) {
    throw common::caller_error(
        "ringlet store: no job secret (RINGLET_SECRET is empty): the store refuses to serve "
        "unauthenticated");
  }
  impl_ = std::make_unique<Impl>(host, port, secret);
  impl_->thread = std::jthread([impl = impl_.get()](std::stop_token stop) { impl->run(stop); });
}

StoreServer::~StoreServer() {
  impl_->thread.request_stop();
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->wake.get(), &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t StoreServer::port() const { return impl_->bound_port; }

uint64_t StoreServer::refused() const { return impl_->refused.load(); }

size_t StoreServer::connections() const { return impl_->open_connections.load(); }

}  // namespace ringlet::core
