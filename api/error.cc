// The names of the public error codes, shared by ringlet::to_string and the
// C ABI's ringlet_status_string so that logs of both read the same.
#include "ringlet/ringlet.h"

namespace ringlet {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotInitialized:
      return "not initialized";
    case ErrorCode::kConfig:
      return "configuration error";
    case ErrorCode::kPeerLost:
      return "peer lost";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kInternal:
      return "internal error";
    case ErrorCode::kMismatch:
      return "mismatch across ranks";
    case ErrorCode::kAborted:
      return "aborted by shutdown";
  }
  return "unknown status";
}

}  // namespace ringlet
