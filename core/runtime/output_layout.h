// The shape and per-rank sizes of a collective whose output only
// negotiation sizes (allgather, reducescatter, alltoall): the same for host
// and device tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/communicator.h"
#include "core/runtime/negotiation.h"

namespace ringlet::core::runtime {

// What the collective moves, in elements, and the shape of this rank's output.
struct OutputLayout {
  std::vector<size_t> send;  // allgather, reducescatter: rank r's block; alltoall: to rank r
  std::vector<size_t> recv;  // alltoall: from rank r
  size_t elements = 0;       // this rank's output
  std::vector<int64_t> shape;
  std::vector<int64_t> received_splits;  // alltoall
  size_t largest = 0;                    // alltoall: the most any rank sends any other
};

// `mine` is this rank's request; resp.per_rank holds every rank's shapes
// (allgather) or splits (alltoall).
OutputLayout output_layout(Communicator& comm, const Response& resp, const Metadata& mine);

}  // namespace ringlet::core::runtime
