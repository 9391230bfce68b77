// Setting up UCX links: endpoints from the addresses in the store, and the
// data-link handshake (tcp/handshake.h, under the "ucx-link" labels) as
// tagged messages, so that both sides prove the job secret before a pair is
// handed out. As for TCP, the higher rank of a pair dials and the lower one
// accepts:
//
//   dialer   -> acceptor   HELLO      (its nonce)
//   acceptor -> dialer     CHALLENGE  (its nonce, its MAC over the dialer's)
//   dialer   -> acceptor   PROOF      (its MAC over the acceptor's nonce)
//
// The addresses come from the store, which is itself authenticated; the
// handshake adds that the process behind an address holds the secret now.
//
// One receive for handshake frames from any rank is always posted. A rank
// waiting in dial() or accept() answers every HELLO and PROOF that arrives,
// whichever peer it is waiting for, and keeps what it proved for the call that
// asks, so that connect() may be called in any order, even one with a cycle.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ringlet/transport/transport.h"
#include "tcp/handshake.h"
#include "ucx/endpoint.h"
#include "ucx/worker.h"

namespace ringlet::transport::ucx {

class LinkSetup {
 public:
  // How long an acceptor keeps a HELLO it answered waiting for its PROOF.
  static constexpr auto kHandshakeTime = std::chrono::seconds(5);

  // `me.key` must outlive this; `store` too.
  LinkSetup(std::shared_ptr<Worker> worker, tcp::handshake::Identity me, KeyValue* store);
  ~LinkSetup();
  LinkSetup(const LinkSetup&) = delete;
  LinkSetup& operator=(const LinkSetup&) = delete;

  // Proves this rank to `peer` (a lower rank) and returns the endpoint once
  // the peer proved itself. Timeout naming the peer at the deadline; an Error
  // naming it when it answers without the secret; PeerLost if its endpoint fails.
  std::unique_ptr<Endpoint> dial(int peer, Deadline deadline);
  // Waits until `peer` (a higher rank) has proven itself; returns its endpoint.
  std::unique_ptr<Endpoint> accept(int peer, Deadline deadline);

 private:
  using Frame = tcp::handshake::Frame;
  using Bytes32 = tcp::handshake::Bytes32;

  // An acceptor's half-done handshake with one dialer.
  struct Accepting {
    Bytes32 dialer_nonce{}, acceptor_nonce{};
    Clock::time_point expires;
  };

  Endpoint& endpoint_to(int peer, Deadline deadline);
  void post_receive();
  // One round: progress, read what arrived, answer it. True if anything did.
  bool serve(Deadline deadline);
  void handle(int from, const Frame& frame, Deadline deadline);
  void send(Endpoint& to, const Frame& frame);
  void refuse(int from, const std::string& why);
  // Sleeps on the worker until something arrives, at most until `deadline`.
  void wait(Deadline deadline);

  std::shared_ptr<Worker> worker_;
  tcp::handshake::Identity me_;
  KeyValue* store_;

  Frame rx_{};  // the posted receive's buffer
  ucp_tag_recv_info_t rx_info_{};
  void* rx_request_ = nullptr;
  std::vector<std::pair<int, Frame>> inbox_;  // frames received, by sender

  std::map<int, std::unique_ptr<Endpoint>> endpoints_;  // made, not yet handed out
  std::map<int, Accepting> accepting_;                  // dialers answered
  std::set<int> proven_;                                // dialers proven, not yet accepted
  std::map<int, Frame> challenges_;                     // CHALLENGEs for dial()
  // Nonces of this rank's earlier, abandoned dials, by peer: a CHALLENGE
  // answering one of them is stale, not a forgery.
  std::map<int, std::vector<Bytes32>> old_nonces_;
};

}  // namespace ringlet::transport::ucx
