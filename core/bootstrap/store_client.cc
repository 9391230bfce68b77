// The rendezvous store's client: one blocking request/reply at a time over one
// TCP connection, every wait bounded by poll() against a deadline. After a
// timeout the connection is out of step with the server (a late reply may
// still come), so it is closed and the next call reconnects.
//
// Before its first request on a connection the client asks the store for its
// identity (see Instances below), so that init -> shutdown -> init never
// rendezvouses through rank 0's previous store while it closes.
//
// A rendezvous is joined once: its counters (world/joined, the barriers')
// count each rank's first request. So a client interrupted after it changed
// the store marks that rendezvous as abandoned by this process, and a later
// client of it here is refused at once (see Instances::abandoned).
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/bootstrap/fd.h"
#include "core/bootstrap/store.h"
#include "core/bootstrap/store_wire.h"
#include "ringlet/common/duration_text.h"
#include "ringlet/common/failure.h"
#include "ringlet/common/hmac.h"
#include "ringlet/common/host_name.h"
#include "ringlet/common/random.h"

namespace ringlet::core {

using common::Hmac;
using bootstrap::UniqueFd;
using transport::Clock;
using transport::Deadline;
namespace wire = bootstrap::wire;

namespace {

constexpr std::chrono::seconds kDefaultTimeout{30};
// How often a wait asks its interrupt whether to give up.
constexpr std::chrono::milliseconds kInterruptSlice{50};

// Stores this process has finished with. After shutdown, init again can reach
// rank 0's old store before it closes: its data is the last session's, and it
// will vanish mid-rendezvous. The first client of a store in this process (the
// communicator's) retires it when destroyed; later connections to a retired
// store are refused and retried until the new one answers.
//
// Rendezvous this process abandoned: an interrupt came after this rank had
// changed the store (its host name set, the count of joined ranks raised),
// so the other ranks count it in and joining again would count it twice.
// Keyed by the address's MAC under the job secret: the same address and
// secret are the same job.
struct Instances {
  std::mutex mu;
  std::map<std::vector<uint8_t>, const void*> owner;  // store -> its first client here
  std::set<std::vector<uint8_t>> retired;
  std::set<common::Digest> abandoned;
};

Instances& instances() {
  static Instances* all = new Instances;  // never destroyed: detached clients may outlive main
  return *all;
}

// Milliseconds until the deadline for poll(): -1 forever, 0 when already past.
int poll_ms(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > INT_MAX ? INT_MAX : static_cast<int>(left.count());
}

// "host:port" or "[v6]:port".
std::pair<std::string, std::string> split_host_port(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    throw common::caller_error("ringlet store: address '" + address +
                               "' is not host:port (RINGLET_RENDEZVOUS)");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, address.substr(colon + 1)};
}

// One attempt to connect to any address of host:port, within `deadline`.
UniqueFd try_connect(const std::string& host, const std::string& port, Deadline deadline,
                     std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &list); rc != 0) {
    why = std::string("cannot resolve: ") + gai_strerror(rc);
    return {};
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(list, freeaddrinfo);
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    UniqueFd fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) continue;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = std::strerror(errno);
      continue;
    }
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, poll_ms(deadline)) <= 0) {
      why = "connect timed out";
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      why = std::strerror(err);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  return {};
}

}  // namespace

struct StoreClient::Impl {
  Impl(const std::string& address, const std::string& secret, int rank)
      : address(address), rank(rank), hmac(common::secret_key(secret)) {
    std::tie(host, port) = split_host_port(address);
  }

  std::string where() const { return "the rendezvous store at " + address + " (rank 0)"; }

  void connect(Deadline deadline);
  // Throws a kShutdown Failure when the interrupt says to give up waiting for
  // `what`; after this client changed the store, one that says the
  // rendezvous is abandoned (Instances::abandoned).
  void check_interrupted(const std::string& what);
  // This rendezvous in Instances::abandoned.
  common::Digest rendezvous_id() const {
    return hmac.compute(
        {std::span(reinterpret_cast<const uint8_t*>(address.data()), address.size())});
  }
  // poll() of one descriptor until it is ready or the deadline passes (0),
  // asking the interrupt between slices.
  int poll_until(pollfd& p, Deadline deadline, const std::string& what);
  wire::Frame call(wire::Op op, std::span<const uint8_t> payload, Deadline deadline,
                   const std::string& what);
  [[noreturn]] void lost(const std::string& what, const std::string& detail);

  // The greeting after the TCP connection. False: the store closed the
  // connection meanwhile (`why` says), worth a retry.
  bool greet(Deadline deadline, std::string& why);
  // Before the first request on a connection: asks the store who it is. False:
  // a retired store, or lost while asking (`why` says): reconnect and retry.
  bool check_identity(Deadline deadline, std::string& why);
  // One request and its reply on the current connection.
  wire::Frame exchange(wire::Op op, std::span<const uint8_t> payload, Deadline deadline,
                       const std::string& what);

  // Closes the connection; where it holds this client's will, first takes
  // the will back (one best-effort frame, which the server reads before the
  // close): a connection this client drops is not its process ending.
  void drop_connection();

  std::string address, host, port;
  std::string local_address;      // of the first connection (see local_address())
  std::optional<std::pair<std::string, std::vector<uint8_t>>> will;  // see set_will()
  bool will_here = false;         // the current connection holds the will
  std::vector<uint8_t> instance;  // the store's identity, once checked (empty: not tracked)
  bool verified = false;          // this connection's store passed check_identity()
  bool changed_store = false;     // a set or add went out: the rendezvous counts this rank
  int rank;
  Interrupt interrupted;
  Hmac hmac;
  std::mutex mutex;  // one request at a time on the connection
  UniqueFd fd;
  wire::Channel out, in;
  bool client_nonce_unsent = false;  // goes out with the connection's first frame
  std::vector<uint8_t> rx;
};

void StoreClient::Impl::drop_connection() {
  if (fd && will_here && !client_nonce_unsent) {
    const auto frame = wire::encode(out, wire::Op::kWill, wire::key_payload(""));
    [[maybe_unused]] ssize_t n =
        ::send(fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  will_here = false;
  fd.reset();
}

void StoreClient::Impl::connect(Deadline deadline) {
  const auto start = Clock::now();
  std::string why = "not tried";
  for (;;) {
    // Each attempt gets at most a second, so a lost SYN does not eat the whole deadline.
    fd = try_connect(host, port, std::min(deadline, Clock::now() + std::chrono::seconds(1)), why);
    if (fd && greet(deadline, why)) return;
    drop_connection();
    if (Clock::now() >= deadline) {
      throw transport::Timeout(rank, 0,
                               "could not reach " + where() + " within " +
                                   common::elapsed_text(Clock::now() - start) + ": " + why);
    }
    check_interrupted("a connection to " + where());
    // The server may simply not be up yet, or the last session's still closing:
    // retry a little later.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void StoreClient::Impl::check_interrupted(const std::string& what) {
  if (!interrupted || !interrupted()) return;
  drop_connection();  // a reply may still come: the next call starts afresh
  if (!changed_store) {
    throw common::Failure(common::FailureKind::kShutdown, rank, -1,
                          "interrupted while waiting for " + what);
  }
  {
    Instances& all = instances();
    std::lock_guard lock(all.mu);
    all.abandoned.insert(rendezvous_id());
  }
  throw common::Failure(common::FailureKind::kShutdown, rank, -1,
                        "interrupted while waiting for " + what +
                            ", after this rank had joined the rendezvous at " + address +
                            ": the other ranks count it in, so it cannot join again, and the "
                            "job must be started again");
}

int StoreClient::Impl::poll_until(pollfd& p, Deadline deadline, const std::string& what) {
  for (;;) {
    const Deadline slice =
        interrupted ? std::min(deadline, Clock::now() + kInterruptSlice) : deadline;
    const int ready = ::poll(&p, 1, poll_ms(slice));
    if (ready != 0 || Clock::now() >= deadline) return ready;
    check_interrupted(what);
  }
}

bool StoreClient::Impl::greet(Deadline deadline, std::string& why) {
  // The hello carries this connection's nonce.
  rx.clear();
  // A live store greets at once. A previous session's store that is closing
  // may still complete connections in the kernel and never greet: give each
  // attempt a second, then let connect() try a fresh connection.
  const Deadline attempt = std::min(deadline, Clock::now() + std::chrono::seconds(1));
  while (rx.size() < wire::kHelloBytes) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, poll_ms(attempt)) <= 0) {
      why = "the store accepted but sent no greeting (a previous session's store closing?)";
      return false;
    }
    uint8_t buf[64];
    ssize_t n = ::recv(fd.get(), buf, wire::kHelloBytes - rx.size(), 0);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      why = std::string("the connection closed during the greeting") +
            (n < 0 ? std::string(" (") + std::strerror(errno) + ")" : std::string()) +
            " (a previous session's store closing?)";
      return false;
    }
    rx.insert(rx.end(), buf, buf + n);
  }
  if (!std::equal(wire::kMagic.begin(), wire::kMagic.end(), rx.begin())) {
    drop_connection();
    throw common::Failure(common::FailureKind::kTransport, rank, 0,
                          where() + " did not greet as a Ringlet store");
  }
  wire::Nonce nonce;
  std::copy(rx.begin() + wire::kMagic.size(), rx.begin() + wire::kHelloBytes, nonce.begin());
  rx.clear();
  // This end's nonce goes out before the first frame (see exchange()).
  wire::Nonce mine;
  common::random_bytes(mine);
  out = {&hmac, nonce, wire::Direction::kToServer, 0, mine};
  in = {&hmac, nonce, wire::Direction::kToClient, 0, mine};
  client_nonce_unsent = true;

  verified = false;
  return true;
}

bool StoreClient::Impl::check_identity(Deadline deadline, std::string& why) {
  std::vector<uint8_t> id;
  try {
    auto reply =
        exchange(wire::Op::kTryGet, wire::key_payload(wire::kInstanceKey), deadline, "its identity");
    if (!reply.payload.empty() && reply.payload[0] != 0)
      id.assign(reply.payload.begin() + 1, reply.payload.end());
  } catch (const common::Failure& e) {
    // Lost while asking: the store is closing, worth a retry. Anything else
    // (a refusal: a wrong secret is final; a deadline) is reported.
    if (e.kind() != common::FailureKind::kPeerLost) throw;
    why = e.what();
    return false;
  }
  // A store served by this very process (tests run server and clients side
  // by side) outlives its clients: it is never a previous session's.
  if (id.size() >= 12) {
    uint32_t pid = 0;
    for (size_t i = 0; i < 4; ++i) pid |= static_cast<uint32_t>(id[8 + i]) << (8 * i);
    if (pid == static_cast<uint32_t>(::getpid()) &&
        std::string(id.begin() + 12, id.end()) == common::host_name()) {
      instance.clear();
      return true;
    }
  }
  Instances& all = instances();
  std::lock_guard lock(all.mu);
  if (!id.empty() && all.retired.count(id)) {
    why =
        "reached a store this process has finished with (a previous session's, or one an init "
        "that failed had joined), which is still up";
    return false;
  }
  instance = std::move(id);
  if (!instance.empty()) all.owner.emplace(instance, this);  // the first client owns it
  return true;
}

void StoreClient::Impl::lost(const std::string& what, const std::string& detail) {
  drop_connection();
  // The store lives in rank 0: losing it is losing that peer.
  throw transport::PeerLost(rank, 0, "lost " + where() + " during " + what + detail);
}

wire::Frame StoreClient::Impl::call(wire::Op op, std::span<const uint8_t> payload,
                                    Deadline deadline, const std::string& what) {
  const auto start = Clock::now();
  for (;;) {
    if (!fd) connect(deadline);
    if (verified) break;
    std::string why;
    if (check_identity(deadline, why)) {
      verified = true;
      break;
    }
    drop_connection();
    if (Clock::now() >= deadline) {
      throw transport::Timeout(rank, 0,
                               "could not reach " + where() + " within " +
                                   common::elapsed_text(Clock::now() - start) + ": " + why);
    }
    check_interrupted(what + " from " + where());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // A new connection holds the will again before anything else goes out.
  if (will && !will_here && op != wire::Op::kWill) {
    exchange(wire::Op::kWill, wire::key_payload(will->first, will->second), deadline,
             "will of key '" + will->first + "'");
    will_here = true;
  }
  // Counted before it goes: the store may apply it even if no reply comes.
  if (op == wire::Op::kSet || op == wire::Op::kAdd) changed_store = true;
  return exchange(op, payload, deadline, what);
}

wire::Frame StoreClient::Impl::exchange(wire::Op op, std::span<const uint8_t> payload,
                                        Deadline deadline, const std::string& what) {
  std::vector<uint8_t> frame;
  if (client_nonce_unsent) {
    frame.assign(out.client_nonce.begin(), out.client_nonce.end());
    client_nonce_unsent = false;
  }
  const auto encoded = wire::encode(out, op, payload);
  frame.insert(frame.end(), encoded.begin(), encoded.end());
  for (size_t sent = 0; sent < frame.size();) {
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, poll_ms(deadline)) <= 0) {
      drop_connection();
      throw transport::Timeout(rank, 0, "timed out sending " + what + " to " + where());
    }
    ssize_t n = ::send(fd.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) lost(what, std::string(" (") + std::strerror(errno) + ")");
    sent += static_cast<size_t>(n);
  }
  const auto start = Clock::now();
  for (;;) {
    wire::Decoded d = wire::decode(in, rx, /*accept_refusal=*/true);
    if (d.status == wire::Status::kBad) {
      // Out of step from here on: the next call starts a fresh connection.
      drop_connection();
      throw transport::Error(
          rank, 0,
          "the reply of " + where() + " to " + what + " failed authentication (" + d.why + ")");
    }
    if (d.status == wire::Status::kFrame) {
      rx.erase(rx.begin(), rx.begin() + static_cast<ptrdiff_t>(d.consumed));
      if (d.frame.op == wire::Op::kRefused) {
        drop_connection();
        throw common::Failure(common::FailureKind::kTransport, rank, 0,
                              where() + " refused " + what + ": " +
                                  std::string(d.frame.payload.begin(), d.frame.payload.end()) +
                                  " (is RINGLET_SECRET the same on every rank?)");
      }
      if (d.frame.op == wire::Op::kError) {
        throw common::Failure(common::FailureKind::kInternal, rank, 0,
                              where() + " could not do " + what + ": " +
                                  std::string(d.frame.payload.begin(), d.frame.payload.end()));
      }
      return std::move(d.frame);
    }
    pollfd p{fd.get(), POLLIN, 0};
    const int ready = poll_until(p, deadline, what + " from " + where());
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      drop_connection();  // a late reply would arrive out of step; start afresh next call
      throw transport::Timeout(rank, 0,
                               "timed out after " + common::elapsed_text(Clock::now() - start) +
                                   " waiting for " + what + " from " + where());
    }
    uint8_t buf[64 * 1024];
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) lost(what, " (the connection closed)");
    if (n < 0) lost(what, std::string(" (") + std::strerror(errno) + ")");
    rx.insert(rx.end(), buf, buf + n);
  }
}

StoreClient::StoreClient(const std::string& host_port, std::string secret, int rank,
                         Deadline deadline, Interrupt interrupted) {
  if (secret.empty()) {
    throw common::caller_error("no job secret for rank " + std::to_string(rank) +
                               " (RINGLET_SECRET is empty): refusing to talk to "
                               "the rendezvous store unauthenticated");
  }
  impl_ = std::make_unique<Impl>(host_port, secret, rank);
  {
    Instances& all = instances();
    std::lock_guard lock(all.mu);
    if (all.abandoned.count(impl_->rendezvous_id())) {
      throw common::Failure(common::FailureKind::kShutdown, rank, -1,
                            "an earlier init of this process was interrupted after this rank had "
                            "joined the rendezvous at " +
                                host_port +
                                ": it cannot join again, and the job must be started again");
    }
  }
  impl_->interrupted = std::move(interrupted);
  impl_->connect(deadline);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  char host[NI_MAXHOST] = "";
  if (::getsockname(impl_->fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
      getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, nullptr, 0,
                  NI_NUMERICHOST) == 0) {
    impl_->local_address = host;
  }
}

const std::string& StoreClient::local_address() const { return impl_->local_address; }

void StoreClient::set_interrupt(Interrupt interrupted) {
  std::lock_guard lock(impl_->mutex);
  impl_->interrupted = std::move(interrupted);
}

StoreClient::~StoreClient() {
  if (!impl_ || impl_->instance.empty()) return;
  Instances& all = instances();
  std::lock_guard lock(all.mu);
  auto it = all.owner.find(impl_->instance);
  if (it != all.owner.end() && it->second == impl_.get()) {
    all.owner.erase(it);
    all.retired.insert(impl_->instance);
  }
}

void StoreClient::set(const std::string& key, const std::vector<uint8_t>& value) {
  std::lock_guard lock(impl_->mutex);
  impl_->call(wire::Op::kSet, wire::key_payload(key, value), Clock::now() + kDefaultTimeout,
              "set of key '" + key + "'");
}

void StoreClient::set_will(const std::string& key, const std::vector<uint8_t>& value) {
  std::lock_guard lock(impl_->mutex);
  impl_->will.emplace(key, value);
  impl_->will_here = false;
  impl_->call(wire::Op::kWill, wire::key_payload(key, value), Clock::now() + kDefaultTimeout,
              "will of key '" + key + "'");
  impl_->will_here = true;
}

std::vector<uint8_t> StoreClient::get(const std::string& key, Deadline deadline) {
  std::lock_guard lock(impl_->mutex);
  return impl_->call(wire::Op::kGet, wire::key_payload(key), deadline, "key '" + key + "'").payload;
}

std::optional<std::vector<uint8_t>> StoreClient::try_get(const std::string& key) {
  std::lock_guard lock(impl_->mutex);
  auto reply = impl_->call(wire::Op::kTryGet, wire::key_payload(key),
                           Clock::now() + kDefaultTimeout, "look-up of key '" + key + "'");
  if (reply.payload.empty() || reply.payload[0] == 0) return std::nullopt;
  return std::vector<uint8_t>(reply.payload.begin() + 1, reply.payload.end());
}

int64_t StoreClient::add(const std::string& key, int64_t delta) {
  std::lock_guard lock(impl_->mutex);
  std::vector<uint8_t> d;
  wire::put_u64(d, static_cast<uint64_t>(delta));
  auto reply = impl_->call(wire::Op::kAdd, wire::key_payload(key, d),
                           Clock::now() + kDefaultTimeout, "add to key '" + key + "'");
  if (reply.payload.size() != 8) {
    throw common::Failure(
        common::FailureKind::kTransport, impl_->rank, 0,
        impl_->where() + " answered add to key '" + key + "' with a malformed value");
  }
  return static_cast<int64_t>(wire::get_u64(reply.payload.data()));
}

// Each rank counts itself in; the last one to arrive opens the gate that the
// others wait on. Names are single-use, as the header says.
void StoreClient::barrier(const std::string& name, int size, Deadline deadline) {
  const std::string count = "barrier/" + name + "/arrived";
  const std::string gate = "barrier/" + name + "/open";
  if (add(count, 1) == size) set(gate, {1});
  try {
    get(gate, deadline);
  } catch (const transport::Timeout&) {
    std::string arrived = "?";
    try {
      arrived = std::to_string(add(count, 0));
    } catch (const std::exception&) {
      // Best effort: the count only improves the message.
    }
    throw transport::Timeout(impl_->rank, 0,
                             "barrier '" + name + "' timed out with " + arrived + " of " +
                                 std::to_string(size) + " ranks arrived at " + impl_->where());
  }
}

}  // namespace ringlet::core
