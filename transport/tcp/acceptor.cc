#include "tcp/acceptor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ringlet/common/logging.h"
#include "ringlet/common/random.h"

namespace ringlet::transport::tcp {
namespace {

namespace hs = handshake;

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

}  // namespace

Acceptor::Acceptor(Fd listener, hs::Identity me) : listener_(std::move(listener)), me_(me) {
  wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) {
    throw Error(me_.rank, -1, "tcp: " + errno_text("eventfd"));
  }
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

Acceptor::~Acceptor() {
  thread_.request_stop();
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

Fd Acceptor::take(int peer, Deadline deadline) {
  std::unique_lock lock(mu_);
  if (!handed_over_.wait_until(lock, deadline, [&] { return proven_.contains(peer); })) {
    return Fd();
  }
  auto it = proven_.find(peer);
  Fd socket = std::move(it->second);
  proven_.erase(it);
  return socket;
}

// Logged, not thrown: a stranger must not be able to fail the job.
void Acceptor::refuse(const Pending& p, const std::string& why) {
  ++refused_;
  // The logger's prefix names this rank.
  common::log(common::LogLevel::kWarning, "refused a tcp data-link connection from %s: %s",
              p.from.c_str(), why.c_str());
}

void Acceptor::run(const std::stop_token& stop) {
  std::vector<pollfd> fds;
  while (!stop.stop_requested()) {
    const auto now = Clock::now();
    std::erase_if(pending_, [&](const Pending& p) {
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
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(left, 0))) <= 0) {
      continue;  // a timeout (expiries are handled above) or EINTR
    }
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

void Acceptor::accept_new() {
  for (;;) {
    const int raw = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
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

// Reads what has arrived (never past the frame) and takes the next step.
// False: drop the connection.
bool Acceptor::advance(Pending& p) {
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
  // 112 bytes into a fresh socket's buffer: never more than a moment.
  const Deadline send_by = Clock::now() + std::chrono::seconds(1);
  if (!p.challenged) {
    if (!hs::check_hello(me_, p.rx, p.dialer, p.dialer_nonce, why)) {
      refuse(p, why);
      return false;
    }
    common::random_bytes(p.acceptor_nonce);
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
    proven_[p.dialer] = std::move(p.fd);
  }
  handed_over_.notify_all();
  return false;
}

}  // namespace ringlet::transport::tcp
