// The failures of the device collectives: common::Failure, the one failure
// type of every layer, reported by `rank` (and naming `peer` where one did
// not answer), which the runtime hands to the collective's handles as it
// hands the host collectives' failures.
#pragma once

#include <string>
#include <utility>

#include "ringlet/common/failure.h"

namespace ringlet::core::gpu {

using ErrorKind = common::FailureKind;

inline common::Failure device_failure(ErrorKind kind, int rank, std::string cause, int peer = -1) {
  return common::Failure(kind, rank, peer, std::move(cause));
}

}  // namespace ringlet::core::gpu
