// The accepting side of TCP data links: a thread that owns the listener for
// the carrier's whole life, authenticates every arrival (handshake.h) and
// keeps each proven link for the connect() call that asks for its rank.
//
// All pending handshakes run side by side, each with its own short deadline:
// a stranger that connects and stalls, drips bytes or sends garbage costs one
// slot until it is dropped (and logged), and never delays a real peer, fails
// the job, or waits unanswered in the backlog once the pairs are connected.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/transport/transport.h"
#include "tcp/handshake.h"
#include "tcp/socket.h"

namespace ringlet::transport::tcp {

class Acceptor {
 public:
  // How long one connection may take to finish its handshake. A real peer
  // needs a round trip and two MACs; a connection still incomplete after this
  // is a stranger, or a peer that will retry on a fresh connection.
  static constexpr auto kHandshakeTime = std::chrono::seconds(5);
  // Handshakes under way at once; past this the oldest is dropped.
  static constexpr size_t kMaxPending = 64;

  // Serves `listener` (non-blocking) as `me` from a thread until destroyed.
  // `me.key` must outlive the acceptor. Throws Error if it cannot start.
  Acceptor(Fd listener, handshake::Identity me);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // The authenticated link from `peer`; an invalid Fd at the deadline.
  Fd take(int peer, Deadline deadline);

  // Connections refused so far (logged each): for tests.
  uint64_t refused() const { return refused_.load(); }

 private:
  // One accepted connection whose handshake is under way.
  struct Pending {
    Fd fd;
    std::string from;  // the remote address, for the log
    Clock::time_point expires;
    bool challenged = false;  // HELLO checked and CHALLENGE sent; PROOF due
    int32_t dialer = -1;
    handshake::Bytes32 dialer_nonce{}, acceptor_nonce{};
    std::vector<uint8_t> rx;
  };

  void run(const std::stop_token& stop);
  void accept_new();
  bool advance(Pending& p);
  void refuse(const Pending& p, const std::string& why);

  Fd listener_;
  handshake::Identity me_;
  Fd wake_;                        // written by the destructor to end poll()
  std::deque<Pending> pending_;    // thread only: handshakes under way, oldest first
  std::mutex mu_;
  std::condition_variable handed_over_;
  std::map<int, Fd> proven_;  // under mu_: authenticated, not yet taken
  std::atomic<uint64_t> refused_{0};
  std::jthread thread_;  // last: starts after everything it uses exists
};

}  // namespace ringlet::transport::tcp
