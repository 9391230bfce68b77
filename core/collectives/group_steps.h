// The steps of a hierarchical collective, each run on one of its groups (the
// ranks of one host, or one rank per host: Communicator::host_groups()). A
// step runs the algorithm the group's own facts choose from the table (direct
// through the host's window, the ring across hosts), and handles the cases
// the entry points handle before choosing (one rank, nothing to move) alike.
// Failures go up to the hierarchical collective, which reports them for the
// communicator it runs on; the groups fail with it.
#pragma once

#include <cstddef>
#include <span>

#include "core/communicator.h"
#include "ringlet/types.h"

namespace ringlet::core::collectives::step {

// Reduces every member's `send` (the sum of counts) and leaves member r's
// block, counts[r] elements scaled by result_scale(op, postscale, size), in
// its `own_out` (which may be its own block of `send`).
void reducescatter(Communicator& group, const void* send, void* own_out,
                   std::span<const size_t> counts, DataType dtype, ReduceOp op, double postscale);
// In place: `data` becomes op over the members, scaled by
// result_scale(op, postscale, size).
void allreduce(Communicator& group, void* data, size_t count, DataType dtype, ReduceOp op,
               double postscale);
// Member r's counts[r] elements, in member order; `send` may be recv's own block.
void allgather(Communicator& group, const void* send, void* recv, std::span<const size_t> counts,
               DataType dtype);
void broadcast(Communicator& group, void* buffer, size_t count, DataType dtype, int root);

}  // namespace ringlet::core::collectives::step
