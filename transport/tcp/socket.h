// RAII file descriptor and the socket helpers the TCP carrier is built from.
// Everything here is set-up path code: it may allocate and block (always with
// a deadline). The per-message path lives in tcp_pair.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "ringlet/common/fd.h"
#include "ringlet/transport/transport.h"

namespace ringlet::transport::tcp {

// Owns one file descriptor; closes it exactly once.
using Fd = common::UniqueFd;

// "strerror(errno)" with the call that failed, for error messages.
std::string errno_text(const char* call);

// IPv4 address (dotted) of `interface`, or of the first non-loopback interface
// that is up when `interface` is empty; "127.0.0.1" when there is none.
// Throws Error when a named interface has no IPv4 address.
std::string interface_address(const std::string& interface);

// A non-blocking listening socket bound to the IPv4 `address` (never to every
// interface: "" is refused) on an ephemeral port; returns the socket and the port.
std::pair<Fd, uint16_t> listen_on(const std::string& address);

// Non-blocking TCP_NODELAY, 4 MiB buffers: what every data socket gets.
void tune_data_socket(int fd);

// Connects to host:port, retrying refused connections until the deadline.
// Returns an invalid Fd at the deadline.
Fd connect_until(const std::string& host, uint16_t port, Deadline deadline);

// Accepts one connection if the listener has one ready within the deadline.
Fd accept_until(int listener, Deadline deadline);

// Blocking-with-deadline full transfers on a non-blocking socket, for the
// handshake. Return false at the deadline or when the peer closed.
bool write_fully(int fd, const void* data, size_t bytes, Deadline deadline);
bool read_fully(int fd, void* data, size_t bytes, Deadline deadline);

}  // namespace ringlet::transport::tcp
