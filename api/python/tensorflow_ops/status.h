// Ringlet's errors as TensorFlow statuses, shared by every op of the library.
#pragma once

#include <exception>

#include "absl/status/status.h"

namespace ringlet::tensorflow_ops {

// The status payload that carries ringlet::ErrorCode in decimal
// (ringlet/tensorflow/errors.py's ERROR_CODE_PAYLOAD).
inline constexpr char kErrorCodePayload[] = "ringlet.error_code";

// The status Horovod gives the same cause, for the exception in `error`.
absl::Status status_of(std::exception_ptr error);

}  // namespace ringlet::tensorflow_ops
