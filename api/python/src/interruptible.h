// Waits on other ranks that Python's signal handlers can interrupt. A rank
// waiting for peers that never come would otherwise sit in C++ until the
// stall timeout, with Ctrl-C (KeyboardInterrupt) and SIGALRM handlers queued
// behind it: these wait with the GIL released, and the library asks every
// 50 ms whether to give up (the interrupted overloads of synchronize() and
// init_with_runtime()), which runs the handlers (PyErr_CheckSignals: on the
// main thread, as Python runs them). A handler's exception propagates as it is, and what was
// waited for stays pending, so the process goes on: a handle can be
// synchronized again, an interrupted barrier or join is resumed by the next
// call, and an interrupted init() started nothing (but see
// init_interruptibly for one interrupted after this rank joined).
//
// Call with the GIL held; each throws nanobind::python_error for a
// handler's exception and ringlet::Error for Ringlet's own failures.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <vector>

#include "ringlet/ringlet.h"

namespace ringlet::python {

// The arrays a handle's collective reads or writes, held from submission
// until the handle is synchronized: a caller whose wait was interrupted may
// drop its own references, and the collective must not write into freed
// memory when it completes later.
struct Buffers {
  std::vector<nanobind::ndarray<nanobind::ro>> inputs;
  std::vector<nanobind::ndarray<>> outputs;
};
void hold_until_synchronized(int64_t handle, Buffers buffers);

// synchronize(handle), which then lets go of the handle's buffers.
Result synchronize_interruptibly(int64_t handle);

// barrier(process_set) and join(). An interrupted one stays pending, and the
// next call (on the same set) waits for it instead of starting another: the
// ranks still meet once per barrier a rank completes.
void barrier_interruptibly(int process_set);
int join_interruptibly();

// init_with_runtime(), whose rendezvous runs the handlers while it waits for
// the ranks that have not arrived. A failure raises init()'s ValueError. A
// handler's exception is raised with Ringlet's InitError (code kAborted) as
// its __cause__: interrupted before this rank reached the rendezvous, init()
// may be called again; after it joined, the job must be started again, and
// a later init() raises that InitError at once.
void init_interruptibly(const std::vector<std::vector<int>>& process_sets);

// Forgets the interrupted barriers and join, and lets go of every handle's
// buffers: after shutdown(), whether it returned or threw (it ends the
// session either way, and failed what was pending once it returns nothing
// touches them). A call still waiting across it (in a signal handler's
// shutdown()) leaves nothing for the next session.
void forget_interrupted();

}  // namespace ringlet::python
