#include "tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <thread>

namespace ringlet::transport::tcp {
namespace {

// Socket buffers large enough that a 4 MiB slice in flight does not stall on
// the window; the kernel doubles and caps them (net.core.*mem_max).
constexpr int kSocketBuffer = 4 << 20;

int poll_ms_until(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 100));
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw Error(-1, errno_text("fcntl(O_NONBLOCK)"));
  }
}

bool wait_fd(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, poll_ms_until(deadline));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
    if (Clock::now() >= deadline) return false;
  }
}

}  // namespace

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

std::string interface_address(const std::string& interface) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "127.0.0.1";
  std::string found;
  std::set<std::string> with_address;  // for the error: what this host has
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    with_address.insert(it->ifa_name);
    bool wanted = interface.empty() ? (it->ifa_flags & IFF_UP) && !(it->ifa_flags & IFF_LOOPBACK)
                                    : interface == it->ifa_name;
    if (!wanted || !found.empty()) continue;
    char text[INET_ADDRSTRLEN];
    auto* in = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) found = text;
  }
  ::freeifaddrs(list);
  if (found.empty() && !interface.empty()) {
    std::string names;
    for (const std::string& n : with_address) names += (names.empty() ? "" : ", ") + n;
    throw Error(-1, "tcp: network interface '" + interface +
                        "' has no IPv4 address on this host (interfaces with one: " +
                        (names.empty() ? "none" : names) + ")");
  }
  return found.empty() ? "127.0.0.1" : found;
}

std::pair<Fd, uint16_t> listen_on(const std::string& address) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw Error(-1, errno_text("socket"));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // Accepted sockets inherit the buffer sizes; setting them before listen()
  // lets the window scale be negotiated for the large buffers.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &kSocketBuffer, sizeof kSocketBuffer);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &kSocketBuffer, sizeof kSocketBuffer);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  // Never INADDR_ANY: a data link listens on one chosen address (tcp_carrier.cc).
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    throw Error(-1, "tcp: bad listen address '" + address + "'");
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw Error(-1, errno_text("bind") + " (" + address + ")");
  }
  if (::listen(fd.get(), 128) != 0) throw Error(-1, errno_text("listen"));
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  set_nonblocking(fd.get());
  return {std::move(fd), ntohs(addr.sin_port)};
}

void tune_data_socket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBuffer, sizeof kSocketBuffer);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kSocketBuffer, sizeof kSocketBuffer);
  set_nonblocking(fd);
}

Fd connect_until(const std::string& host, uint16_t port, Deadline deadline) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    throw Error(-1, "tcp: bad peer address '" + host + "'");
  }
  auto backoff = std::chrono::milliseconds(1);
  while (Clock::now() < deadline) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw Error(-1, errno_text("socket"));
    tune_data_socket(fd.get());
    int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (rc != 0 && errno == EINPROGRESS && wait_fd(fd.get(), POLLOUT, deadline)) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
    }
    if (rc == 0) return fd;
    // Refused or reset: the listener may not be up yet (or its backlog is
    // full); retry with a short, growing pause.
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
  return Fd();
}

Fd accept_until(int listener, Deadline deadline) {
  do {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      Fd owned(fd);
      tune_data_socket(fd);
      return owned;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      throw Error(-1, errno_text("accept"));
    }
  } while (wait_fd(listener, POLLIN, deadline));
  return Fd();
}

bool write_fully(int fd, const void* data, size_t bytes, Deadline deadline) {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline)) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool read_fully(int fd, void* data, size_t bytes, Deadline deadline) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLIN, deadline)) return false;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace ringlet::transport::tcp
