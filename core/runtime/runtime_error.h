// The error a runtime handle or call fails with. Its message names the tensor,
// the ranks and the cause, ready for the user; its kind says what the caller
// can do about it (fix the call, restart the job, ...), so that bindings map
// it to a status or an exception type without reading the text.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ringlet::core::runtime {

enum class ErrorKind : uint8_t {
  kInvalidArgument,  // this rank's call was wrong (bad shape, duplicate name, unknown set)
  kMismatch,         // the ranks disagree about a collective (dtype, shape, op, root, ...)
  kPeerLost,         // a peer died or closed its links
  kTimeout,          // a peer did not answer within RINGLET_TIMEOUT_SECONDS
  kShutdown,         // the runtime was shut down (by this rank or another) first
  kStalled,          // tensors waited for ranks that never submitted them: past
                     // RINGLET_STALL_TIMEOUT_SECONDS (that collective fails) or
                     // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (the runtime stops)
  kInternal,         // anything else
};

std::string_view to_string(ErrorKind k);  // "invalid argument", "mismatch", ...

class RuntimeError : public std::runtime_error {
 public:
  RuntimeError(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// The kind of an exception caught around a collective: transport errors are
// PeerLost / Timeout, a RuntimeError keeps its kind, the rest are internal.
ErrorKind kind_of(const std::exception& e);

}  // namespace ringlet::core::runtime
