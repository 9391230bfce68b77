// Checks a request on the submitting rank, before it is queued: what this
// rank alone can tell is wrong (no name, a bad dtype or shape, a null buffer,
// a root or split that does not fit the set). What only the ranks together
// can tell (shapes that differ between ranks) is negotiation's.
#pragma once

#include "core/config.h"

#include <string>

#include "core/runtime/process_set_table.h"
#include "core/runtime/request.h"
#include "core/runtime/runtime_error.h"

namespace ringlet::core::runtime {

// The error for `r`: kInvalidArgument, "rank R: <collective> '<name>': <why>".
RuntimeError request_error(const Request& r, int rank, const std::string& why);

// Throws request_error() on the first problem found. Completes what the
// request leaves to defaults: alltoall's even split over the set, and the
// device id in the metadata. `rank` is this rank (a global rank); `sets` says
// which ranks the request's set holds (the world needs no lookup).
// A device tensor is refused naming `gpu_operations` (HOROVOD_GPU_OPERATIONS).
void validate_request(Request& r, int rank, const ProcessSetTable& sets,
                      GpuOperations gpu_operations = GpuOperations::kNccl);

}  // namespace ringlet::core::runtime
