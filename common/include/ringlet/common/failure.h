// The one failure type every layer throws. It carries what went wrong as
// fields (the kind, this rank, the peer that failed to answer, the collective,
// the tensor, the cause) instead of as text: each layer fills in the fields it
// knows as the failure travels up, and the message a user reads is formatted
// from them once, at the API. Nothing is ever parsed back out of what().
#pragma once

#include <cstdint>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ringlet::common {

enum class FailureKind : uint8_t {
  kInvalidArgument,  // this rank's call was wrong (bad shape, duplicate name, unknown set)
  kMismatch,         // the ranks disagree about a collective (dtype, shape, op, root, ...)
  kPeerLost,         // a peer died or closed its links
  kTimeout,          // a peer did not answer within RINGLET_TIMEOUT_SECONDS
  kShutdown,         // the runtime was shut down (by this rank or another) first
  kStalled,          // tensors waited for ranks that never submitted them: past
                     // RINGLET_STALL_TIMEOUT_SECONDS (that collective fails) or
                     // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (the runtime stops)
  kConfig,           // a bad environment variable or launch
  kTransport,        // bytes could not be moved for another reason (a protocol error, ...)
  kInternal,         // anything else
};

// "invalid argument", "peer lost", "timeout", ...
std::string_view to_string(FailureKind k);

// "'a', 'b', 'c', 'd' and 12 more": tensor names for messages, at most four shown.
std::string names_text(std::span<const std::string> names);

// A std::runtime_error, so that code which only logs a failure needs nothing
// of ours to catch it.
class Failure : public std::runtime_error {
 public:
  Failure(FailureKind kind, std::string cause) : Failure(kind, -1, -1, std::move(cause)) {}
  // `rank` is the rank that reports (this one), `peer` the rank that failed
  // to answer or died; -1 where not known.
  Failure(FailureKind kind, int rank, int peer, std::string cause);

  FailureKind kind() const { return kind_; }
  int rank() const { return rank_; }
  int peer() const { return peer_; }
  const std::string& collective() const { return collective_; }
  // The tensors the collective carried (one, or all those fused into it).
  const std::vector<std::string>& tensors() const { return tensors_; }
  // What went wrong, without "rank N: " or the collective's name.
  const std::string& cause() const { return cause_; }

  // Each fills its field only where no layer below did: the one nearest the
  // failure knows best, and a name is never said twice.
  Failure& at_rank(int rank);
  Failure& with_peer(int peer);
  Failure& in_collective(std::string_view collective);
  Failure& for_tensor(std::string_view tensor);
  Failure& for_tensors(std::span<const std::string> tensors);

  // For a layer that learns more: a second-hand report takes the kind and
  // the peer of the first-hand failure it heard of.
  Failure& set_kind(FailureKind kind);
  Failure& set_peer(int peer);
  Failure& set_cause(std::string cause);
  Failure& add_cause(std::string_view more);  // "<cause>; <more>"

  // "rank R: " + body(): for logs and for code that reads a failure below the API.
  const char* what() const noexcept override { return text_.c_str(); }

  // "rank R: <cause>": what another rank is told, which names its own
  // collective and tensors.
  std::string told() const;

  // The message without the rank: "<collective> of <tensors> failed: <cause>"
  // (the names quoted, at most four shown), "<cause> in <collective>" or the
  // cause alone.
  std::string body() const;

 private:
  void refresh();

  FailureKind kind_;
  int rank_;
  int peer_;
  std::string collective_;
  std::vector<std::string> tensors_;
  std::string cause_;
  std::string text_;
};

// A caller's mistake (a bad argument, an unknown handle), found before
// anything moved: kInvalidArgument, failing that call only.
inline Failure caller_error(std::string cause) {
  return Failure(FailureKind::kInvalidArgument, std::move(cause));
}

}  // namespace ringlet::common
