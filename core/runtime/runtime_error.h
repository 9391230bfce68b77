// The error a runtime handle or call fails with: a common::Failure whose kind
// says what the caller can do about it (fix the call, restart the job, ...),
// so that bindings map it to a status or an exception type without reading
// the text, and whose fields (rank, peer, collective, tensor, cause) the API
// formats into the user's message.
#pragma once

#include <exception>
#include <string>

#include "ringlet/common/failure.h"

namespace ringlet::core::runtime {

using ErrorKind = common::FailureKind;
using common::to_string;

class RuntimeError : public common::Failure {
 public:
  RuntimeError(ErrorKind kind, std::string cause) : Failure(kind, std::move(cause)) {}
  // `rank`: the rank that reports (this one).
  RuntimeError(ErrorKind kind, int rank, std::string cause)
      : Failure(kind, rank, -1, std::move(cause)) {}
  explicit RuntimeError(const common::Failure& f) : Failure(f) {}
};

// What a caught exception says as a failure of this rank: a common::Failure
// keeps its fields, anything else is internal with its text as the cause.
inline common::Failure failure_from(const std::exception& e, int rank) {
  const auto* f = dynamic_cast<const common::Failure*>(&e);
  common::Failure out = f ? *f : common::Failure(ErrorKind::kInternal, e.what());
  out.at_rank(rank);
  return out;
}

}  // namespace ringlet::core::runtime
