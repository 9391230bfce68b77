// A deadline for blocking MPI calls. MPI gives a collective no timeout and
// cannot cancel one, so a rank whose peer stopped calling (a hung process, a
// rank that never reached the collective) would wait in it forever. While an
// MpiWatch lives, one process-wide thread, started at the first watch, checks
// its deadline every 100 ms; arming and disarming are a few relaxed stores, so
// no call wakes a thread. A call that outlasts its deadline is reported (the
// rank, the call, how long) and the job is ended with MPI_Abort, as Open MPI
// ends it when a rank dies: the waiting rank cannot be given back to its caller
// while MPI still owns the buffers.
#pragma once

#include <chrono>

namespace ringlet::core::collectives {

class MpiWatch {
 public:
  // `call` is a string literal ("MPI_Allreduce"); the log line names the rank.
  MpiWatch(const char* call, std::chrono::milliseconds timeout);
  ~MpiWatch();
  MpiWatch(const MpiWatch&) = delete;
  MpiWatch& operator=(const MpiWatch&) = delete;
};

}  // namespace ringlet::core::collectives
