// The transport contract: moving bytes between two ranks, nothing more.
//
//   Carrier  one per process and kind (shm, tcp, ucx). Publishes this
//            rank's address through a KeyValue store and connects Pairs.
//   Pair     the link to one peer. Non-blocking posts of send/recv; posts in each
//            direction are matched in order (the k-th send meets the peer's k-th
//            recv), so algorithms need no tags.
//   Request  the caller-owned completion record of one post, reused across posts.
//
// Threading: a Carrier and its Pairs are driven by one thread at a time (the
// runtime's background thread). Progress happens only inside progress() and
// wait_for_activity(); nothing runs behind the caller's back.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/common/failure.h"

namespace ringlet::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Where a posted region lives. Host memory is carried by every carrier; CUDA
// memory only by carriers that say so (supports(kCuda)).
enum class MemoryKind : uint8_t { kHost, kCuda };

// Any failure to move bytes: a common::Failure whose kind says which.
// peer() is the global rank on the other side, or -1; rank() the rank that
// reports, where the thrower knows it (a layer above fills it in otherwise).
// The cause never starts with "rank N: ".
class Error : public common::Failure {
 public:
  Error(int peer, std::string cause) : Error(-1, peer, std::move(cause)) {}
  Error(int rank, int peer, std::string cause)
      : Error(common::FailureKind::kTransport, rank, peer, std::move(cause)) {}

 protected:
  Error(common::FailureKind kind, int rank, int peer, std::string cause)
      : common::Failure(kind, rank, peer, std::move(cause)) {}
};

// The peer closed its side, exited or died. Every later post on the pair fails too.
class PeerLost : public Error {
 public:
  PeerLost(int peer, std::string cause) : PeerLost(-1, peer, std::move(cause)) {}
  PeerLost(int rank, int peer, std::string cause)
      : Error(common::FailureKind::kPeerLost, rank, peer, std::move(cause)) {}
};

// A wait ran past its deadline; peer() is the rank that did not answer.
class Timeout : public Error {
 public:
  Timeout(int peer, std::string cause) : Timeout(-1, peer, std::move(cause)) {}
  Timeout(int rank, int peer, std::string cause)
      : Error(common::FailureKind::kTimeout, rank, peer, std::move(cause)) {}
};

// The rendezvous store as the transports see it: a key-value map shared by
// every rank of the job. get() blocks until the key is set or the deadline.
class KeyValue {
 public:
  virtual ~KeyValue() = default;
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  virtual std::vector<uint8_t> get(const std::string& key, Deadline deadline) = 0;
};

class Request {
 public:
  enum class State : uint8_t { kIdle, kPending, kDone, kFailed };

  State state() const { return state_; }
  bool pending() const { return state_ == State::kPending; }
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kFailed; }
  // Why it failed, with its kind (peer lost, transport error, ...) and the
  // peer; only once failed().
  const common::Failure& failure() const { return *failure_; }
  // The failure's text, or "" while it has not failed: for test messages and logs.
  std::string error() const { return failed() ? std::string(failure_->what()) : std::string(); }

  // For carriers.
  void start() { state_ = State::kPending; }
  void complete() { state_ = State::kDone; }
  void fail(common::Failure why) {
    state_ = State::kFailed;
    failure_ = std::move(why);
  }

 private:
  State state_ = State::kIdle;
  std::optional<common::Failure> failure_;  // set by fail(), kept for the next post
};

class Pair {
 public:
  virtual ~Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  int self() const { return self_; }
  int peer() const { return peer_; }

  // The region must stay valid and untouched until the request completes.
  // Sizes of matched sends and receives must be equal; a mismatch fails both
  // ends with an error naming the two sizes. Zero-byte posts are legal.
  virtual void post_send(const void* data, size_t bytes, Request& req,
                         MemoryKind kind = MemoryKind::kHost) = 0;
  virtual void post_recv(void* data, size_t bytes, Request& req,
                         MemoryKind kind = MemoryKind::kHost) = 0;

  // Moves whatever can move without blocking; true if anything did. Throws
  // PeerLost (after failing the pending requests) once the peer is gone, and
  // on every later call. A peer that leaves while nothing is pending (it
  // finished first) is not an error until the pair is used again: later
  // posts fail at once with the PeerLost message.
  virtual bool progress() = 0;

  // True while a posted request of this pair has not completed.
  virtual bool busy() const = 0;

  // The job failed and this pair is about to be destroyed: its close must
  // not wait on the peer, which may be the rank that hung. A carrier whose
  // close never waits (a socket, a segment) has nothing to do.
  virtual void abandon() {}

 protected:
  Pair(int self, int peer) : self_(self), peer_(peer) {}

 private:
  int self_;
  int peer_;
};

class Carrier {
 public:
  virtual ~Carrier() = default;
  virtual std::string_view name() const = 0;
  virtual bool supports(MemoryKind kind) const = 0;

  // Collective between exactly the two ranks: both call connect() for each
  // other. Blocks until the link is up or the deadline passes (Timeout).
  virtual std::unique_ptr<Pair> connect(int peer, Deadline deadline) = 0;

  // Blocks until some pair of this carrier may progress, or `timeout` passes.
  // Used after a short spin, so that ranks oversubscribing cores sleep.
  virtual void wait_for_activity(std::chrono::microseconds timeout) = 0;
};

// What a carrier needs to know about the job at construction.
struct CarrierOptions {
  int rank = 0;
  int size = 1;
  std::string job_id;         // names shared-memory segments; unique per job
  KeyValue* store = nullptr;  // addresses are published and looked up here
  std::string interface;      // tcp: network interface to listen on ("" = `address`)
                              // (ucx: UCX_NET_DEVICES chooses, as UCX reads it)
  // tcp: the IPv4 address to listen on and publish when no interface is
  // named; "" = 127.0.0.1 (tcp/tcp_carrier.cc says how the core chooses it).
  std::string address;
  // tcp, ucx: the job's key (RINGLET_SECRET decoded). Every data link proves
  // it in both directions before any data flows; empty is refused.
  std::string secret;
};

std::unique_ptr<Carrier> make_tcp_carrier(const CarrierOptions& options);
std::unique_ptr<Carrier> make_shm_carrier(const CarrierOptions& options);
// Defined only in builds with UCX (RINGLET_HAVE_UCX): one UCP worker, its
// address through the store, host memory (CUDA memory where UCX has it).
std::unique_ptr<Carrier> make_ucx_carrier(const CarrierOptions& options);

}  // namespace ringlet::transport
