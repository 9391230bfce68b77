#include "interruptible.h"

#include <nanobind/nanobind.h>

#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "exceptions.h"

namespace nb = nanobind;

namespace ringlet::python {
namespace {

// The barriers (by process set) and the join a signal handler interrupted,
// still pending in the runtime, and the buffers of the handles not yet
// synchronized. Read and written with the GIL held.
//
// Handles are numbered afresh by each runtime, so all of it belongs to one
// session: forget_interrupted() ends it (`session` counts them), and a call
// that was waiting across it (a handler shut down, then raised) leaves
// nothing behind for the next session to take for its own.
struct Interrupted {
  std::map<int, int64_t> barriers;
  std::optional<int64_t> join;
  std::unordered_map<int64_t, Buffers> held;
  uint64_t session = 0;
};

Interrupted& interrupted() {
  static Interrupted* state = new Interrupted;  // never destroyed: used from atexit
  return *state;
}

// Waits for the handle an interrupted call left (`pending`), or for a fresh
// one from start(); when a handler interrupts this time, keep(handle) leaves
// it for the next call.
template <class Start, class Keep>
Result resume_or_start(std::optional<int64_t> pending, Start&& start, Keep&& keep) {
  const int64_t handle = pending ? *pending : start();
  const uint64_t session = interrupted().session;
  try {
    return synchronize_interruptibly(handle);
  } catch (const nb::python_error&) {
    if (interrupted().session == session) keep(handle);
    throw;
  }
}

}  // namespace

void hold_until_synchronized(int64_t handle, Buffers buffers) {
  interrupted().held[handle] = std::move(buffers);
}

Result synchronize_interruptibly(int64_t handle) {
  // The library waits in slices and asks between them (one SYNCHRONIZE
  // range in a profile for the whole wait). A handler may call shutdown():
  // the wait then ends with the handle's kAborted failure.
  std::optional<nb::python_error> raised;
  std::optional<Result> result;
  const uint64_t session = interrupted().session;
  // The buffers go once the collective is over, unless a handler ended the
  // session meanwhile (forget_interrupted() let go of them).
  auto release_buffers = [&] {
    if (interrupted().session == session) interrupted().held.erase(handle);
  };
  try {
    nb::gil_scoped_release released;
    result = synchronize(handle, [&raised] {
      nb::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() == 0) return false;
      raised.emplace();  // takes the exception the handler raised
      return true;
    });
  } catch (const Error&) {
    if (raised) throw std::move(*raised);  // the handle stays pending, its buffers held
    release_buffers();                     // the handle is gone, and the collective's use of them
    throw;
  }
  release_buffers();
  return std::move(*result);
}

void barrier_interruptibly(int process_set) {
  auto& barriers = interrupted().barriers;
  std::optional<int64_t> pending;
  if (auto it = barriers.find(process_set); it != barriers.end()) {
    pending = it->second;
    barriers.erase(it);
  }
  resume_or_start(
      pending, [&] { return barrier_async(process_set); },
      [&](int64_t handle) { interrupted().barriers[process_set] = handle; });
}

int join_interruptibly() {
  const Result r = resume_or_start(
      std::exchange(interrupted().join, std::nullopt), [] { return join_async(); },
      [](int64_t handle) { interrupted().join = handle; });
  int32_t last = -1;
  if (r.data.size() == sizeof last) std::memcpy(&last, r.data.data(), sizeof last);
  return last;
}

void init_interruptibly(const std::vector<std::vector<int>>& process_sets) {
  // The handler's exception, taken while init() still runs on this thread
  // without the GIL; raised once init() has given up.
  std::optional<nb::python_error> raised;
  std::optional<Error> failed;
  {
    nb::gil_scoped_release released;
    try {
      init_with_runtime(process_sets, [&raised] {
        nb::gil_scoped_acquire acquire;
        if (PyErr_CheckSignals() == 0) return false;
        raised.emplace();  // takes the exception the handler raised
        return true;
      });
    } catch (const Error& e) {
      failed.emplace(e);
    }
  }
  if (raised) {
    // The handler's exception goes on as it is, caused by Ringlet's account
    // of what the interrupt left: nothing (init may be called again), or a
    // rendezvous this rank had joined, so that the job must start again.
    if (failed) {
      nb::object cause = as_python(*failed, /*during_init=*/true);
      if (cause.is_valid()) PyException_SetCause(raised->value().ptr(), cause.release().ptr());
    }
    throw std::move(*raised);
  }
  if (failed) throw_as_python(*failed, /*during_init=*/true);
}

void forget_interrupted() {
  Interrupted& state = interrupted();
  state.barriers.clear();
  state.join.reset();
  state.held.clear();
  ++state.session;
}

}  // namespace ringlet::python
