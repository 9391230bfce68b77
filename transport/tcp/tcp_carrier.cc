// The TCP carrier: listens from construction, publishes "tcp/addr/<rank>",
// and connects pairs. The lower rank of a pair accepts, the higher one dials,
// so each pair has exactly one connection. A handshake (magic, ranks, job id)
// tells an acceptor who arrived: connections from peers other than the one it
// waits for are kept for their own connect() call.
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "store_wait.h"
#include "tcp/socket.h"
#include "tcp/tcp_pair.h"

namespace ringlet::transport {
namespace tcp {
namespace {

constexpr uint32_t kMagic = 0x524c5443;  // "RLTC"
constexpr uint32_t kMaxJobId = 256;

struct Hello {
  uint32_t magic;
  int32_t rank;    // who sends this hello
  int32_t target;  // whom it means to reach
  uint32_t job_id_bytes;
};

class TcpCarrier final : public Carrier {
 public:
  explicit TcpCarrier(const CarrierOptions& options)
      : rank_(options.rank),
        size_(options.size),
        job_id_(options.job_id),
        store_(options.store),
        pairs_(std::make_shared<PairList>()) {
    if (store_ == nullptr) throw Error(-1, "tcp: CarrierOptions::store is required");
    if (job_id_.size() > kMaxJobId) throw Error(-1, "tcp: job id longer than 256 bytes");
    // Listen on the chosen interface only; with none, on every address but
    // publish the one peers are most likely to reach.
    std::string address = interface_address(options.interface);
    auto [listener, port] = listen_on(options.interface.empty() ? "" : address);
    listener_ = std::move(listener);
    std::string published = address + ":" + std::to_string(port);
    store_->set("tcp/addr/" + std::to_string(rank_),
                std::vector<uint8_t>(published.begin(), published.end()));
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

  bool send_hello(int fd, int target, Deadline deadline) {
    Hello hello{kMagic, rank_, target, static_cast<uint32_t>(job_id_.size())};
    return write_fully(fd, &hello, sizeof hello, deadline) &&
           write_fully(fd, job_id_.data(), job_id_.size(), deadline);
  }

  // Reads a hello and checks it belongs to this job and is meant for us.
  // Returns the sender's rank, or -1 for a connection to drop. A hello from
  // another job is an error for a dialer (it reached the wrong listener) but
  // is only dropped by an acceptor, so a stray connection cannot fail it.
  int read_hello(int fd, Deadline deadline, bool dialer) {
    Hello hello{};
    if (!read_fully(fd, &hello, sizeof hello, deadline)) return -1;
    if (hello.magic != kMagic || hello.job_id_bytes > kMaxJobId) return -1;
    std::string job(hello.job_id_bytes, '\0');
    if (!read_fully(fd, job.data(), job.size(), deadline)) return -1;
    if (job != job_id_) {
      if (!dialer) return -1;
      throw Error(hello.rank, prefix() + "rank " + std::to_string(hello.rank) +
                                  " connected with job id '" + job + "', expected '" + job_id_ +
                                  "'");
    }
    if (hello.target != rank_ || hello.rank < 0 || hello.rank >= size_) return -1;
    return hello.rank;
  }

  Fd accept_from(int peer, Deadline deadline) {
    for (;;) {
      if (auto it = stashed_.find(peer); it != stashed_.end()) {
        Fd socket = std::move(it->second);
        stashed_.erase(it);
        return socket;
      }
      Fd socket = accept_until(listener_.get(), deadline);
      if (!socket.valid()) timed_out(peer);
      int from = read_hello(socket.get(), deadline, /*dialer=*/false);
      if (from < 0 || !send_hello(socket.get(), from, deadline)) continue;
      // Another peer's connect() ran ahead of ours: keep it for later.
      stashed_[from] = std::move(socket);
    }
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
      if (send_hello(socket.get(), peer, deadline) &&
          read_hello(socket.get(), deadline, /*dialer=*/true) == peer) {
        return socket;
      }
      if (Clock::now() >= deadline) timed_out(peer);
    }
  }

  int rank_;
  int size_;
  std::string job_id_;
  KeyValue* store_;
  Fd listener_;
  std::map<int, Fd> stashed_;  // accepted, handshaken, not yet claimed by connect()
  std::shared_ptr<PairList> pairs_;
};

}  // namespace
}  // namespace tcp

std::unique_ptr<Carrier> make_tcp_carrier(const CarrierOptions& options) {
  return std::make_unique<tcp::TcpCarrier>(options);
}

}  // namespace ringlet::transport
