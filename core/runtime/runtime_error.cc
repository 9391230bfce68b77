#include "core/runtime/runtime_error.h"

#include "ringlet/transport/transport.h"

namespace ringlet::core::runtime {

std::string_view to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kMismatch:
      return "mismatch across ranks";
    case ErrorKind::kPeerLost:
      return "peer lost";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kShutdown:
      return "shut down";
    case ErrorKind::kStalled:
      return "stalled";
    case ErrorKind::kInternal:
      return "internal";
  }
  return "internal";
}

ErrorKind kind_of(const std::exception& e) {
  if (const auto* r = dynamic_cast<const RuntimeError*>(&e)) return r->kind();
  if (dynamic_cast<const transport::PeerLost*>(&e)) return ErrorKind::kPeerLost;
  if (dynamic_cast<const transport::Timeout*>(&e)) return ErrorKind::kTimeout;
  return ErrorKind::kInternal;
}

}  // namespace ringlet::core::runtime
