// The C ABI over the C++ API. Every entry point catches everything: a C
// caller (or Python through ctypes) cannot unwind a C++ exception, so each
// failure becomes a status code plus a message kept per thread.
#include "ringlet/ringlet_c.h"

#include <chrono>
#include <cmath>
#include <new>
#include <span>
#include <string>

#include "ringlet/ringlet.h"
#include "status_error.h"

namespace {

thread_local std::string g_last_error;

// Recording must not throw either: with no memory for the text, a fixed
// message stands in.
void record(const char* what) noexcept {
  try {
    g_last_error = what;
  } catch (...) {
    g_last_error.clear();
  }
}

// Runs `body`; returns RINGLET_OK or the failure's status, recording its message.
// The message of an earlier failure stays until the next failure replaces it.
template <class Body>
ringlet_status guarded(Body&& body) noexcept {
  try {
    body();
    return RINGLET_OK;
  } catch (const ringlet::api::StatusError& e) {
    record(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    record("ringlet: out of memory");
  } catch (const std::exception& e) {
    record(e.what());
  } catch (...) {
    record("ringlet: unknown exception");
  }
  return RINGLET_ERR_INTERNAL;
}

// Query functions answer -1 rather than failing when not initialized.
template <class Query>
int query(Query&& q) noexcept {
  int value = -1;
  if (guarded([&] { value = q(); }) != RINGLET_OK) return -1;
  return value;
}

// The C caller hands arbitrary ints; the C++ side validates them, so the
// casts are safe.
ringlet::DataType to_dtype(ringlet_dtype d) { return static_cast<ringlet::DataType>(d); }
ringlet::ReduceOp to_op(ringlet_op op) { return static_cast<ringlet::ReduceOp>(op); }

// A C counts array has size() entries. Its length needs the job's size, so
// "not initialized" is reported here, under the name of the collective.
std::span<const size_t> counts_of(const size_t* counts, const char* call, const char* name) {
  int size = 0;
  int rank = 0;
  try {
    size = ringlet::size();
    rank = ringlet::rank();
  } catch (const ringlet::api::StatusError& e) {
    if (e.status() != RINGLET_ERR_NOT_INITIALIZED) throw;
    throw ringlet::api::StatusError(RINGLET_ERR_NOT_INITIALIZED,
                                    std::string("ringlet: ") + call + " called before init()");
  }
  if (counts == nullptr) {
    throw ringlet::api::StatusError(
        RINGLET_ERR_INVALID_ARGUMENT, std::string("ringlet: ") + call + " on rank " +
                                          std::to_string(rank) + ": " + name +
                                          " is null (it needs one entry per rank, " +
                                          std::to_string(size) + ")");
  }
  return {counts, static_cast<size_t>(size)};
}

// Arguments the C caller can get wrong before the C++ API sees them.
[[noreturn]] void bad_argument(const char* call, const std::string& why) {
  throw ringlet::api::StatusError(RINGLET_ERR_INVALID_ARGUMENT, std::string("ringlet: ") + call + ": " + why);
}

}  // namespace

extern "C" {

const char* ringlet_last_error(void) { return g_last_error.c_str(); }

ringlet_status ringlet_init(void) { return guarded([] { ringlet::init(); }); }
ringlet_status ringlet_shutdown(void) { return guarded([] { ringlet::shutdown(); }); }
int ringlet_is_initialized(void) {
  bool yes = false;
  guarded([&] { yes = ringlet::is_initialized(); });
  return yes ? 1 : 0;
}

int ringlet_rank(void) { return query([] { return ringlet::rank(); }); }
int ringlet_size(void) { return query([] { return ringlet::size(); }); }
int ringlet_local_rank(void) { return query([] { return ringlet::local_rank(); }); }
int ringlet_local_size(void) { return query([] { return ringlet::local_size(); }); }
int ringlet_cross_rank(void) { return query([] { return ringlet::cross_rank(); }); }
int ringlet_cross_size(void) { return query([] { return ringlet::cross_size(); }); }

ringlet_status ringlet_allreduce(const void* send, void* recv, size_t count, ringlet_dtype dtype,
                                 ringlet_op op) {
  return guarded([&] { ringlet::allreduce(send, recv, count, to_dtype(dtype), to_op(op)); });
}

ringlet_status ringlet_allgather(const void* send, void* recv, const size_t* recv_counts,
                                 ringlet_dtype dtype) {
  return guarded([&] {
    ringlet::allgather(send, recv, counts_of(recv_counts, "allgather", "recv_counts"),
                       to_dtype(dtype));
  });
}

ringlet_status ringlet_broadcast(void* buffer, size_t count, ringlet_dtype dtype, int root) {
  return guarded([&] { ringlet::broadcast(buffer, count, to_dtype(dtype), root); });
}

ringlet_status ringlet_reducescatter(const void* send, void* recv, const size_t* recv_counts,
                                     ringlet_dtype dtype, ringlet_op op) {
  return guarded([&] {
    ringlet::reducescatter(send, recv, counts_of(recv_counts, "reducescatter", "recv_counts"),
                           to_dtype(dtype), to_op(op));
  });
}

ringlet_status ringlet_alltoall(const void* send, const size_t* send_counts, void* recv,
                                const size_t* recv_counts, ringlet_dtype dtype) {
  return guarded([&] {
    auto sends = counts_of(send_counts, "alltoall", "send_counts");
    auto recvs = counts_of(recv_counts, "alltoall", "recv_counts");
    ringlet::alltoall(send, sends, recv, recvs, to_dtype(dtype));
  });
}

ringlet_status ringlet_barrier(void) { return guarded([] { ringlet::barrier(); }); }

ringlet_status ringlet_allreduce_async(const char* name, const void* send, void* recv, size_t count,
                                       ringlet_dtype dtype, ringlet_op op, double prescale,
                                       double postscale, int64_t* handle) {
  return guarded([&] {
    if (handle == nullptr) bad_argument("allreduce_async", "handle is null");
    *handle = 0;
    if (name == nullptr) bad_argument("allreduce_async", "name is null");
    if (count > static_cast<size_t>(INT64_MAX)) bad_argument("allreduce_async", "count " + std::to_string(count) + " is too large");
    const ringlet::DataType dt = to_dtype(dtype);
    const std::vector<int64_t> shape{static_cast<int64_t>(count)};
    ringlet::Tensor in{const_cast<void*>(send), dt, shape, -1};
    ringlet::Tensor out{recv, dt, shape, -1};
    *handle = ringlet::allreduce_async(name, std::move(in), std::move(out), to_op(op), prescale, postscale);
  });
}

ringlet_status ringlet_poll(int64_t handle, int* done) {
  return guarded([&] {
    if (done == nullptr) bad_argument("poll", "done is null");
    *done = ringlet::poll(handle) ? 1 : 0;
  });
}

ringlet_status ringlet_wait(int64_t handle, double timeout_seconds) {
  return guarded([&] {
    if (!(timeout_seconds >= 0) || !std::isfinite(timeout_seconds)) {
      bad_argument("wait", "timeout_seconds must be finite and >= 0, got " + std::to_string(timeout_seconds));
    }
    const double ms = std::ceil(timeout_seconds * 1e3);
    const double cap = 1e11;  // about three years; ringlet::wait caps there too
    ringlet::wait(handle, std::chrono::milliseconds(static_cast<int64_t>(ms < cap ? ms : cap)));
  });
}

ringlet_status ringlet_synchronize(int64_t handle) {
  return guarded([&] { (void)ringlet::synchronize(handle); });
}

ringlet_status ringlet_join(int* last_rank) {
  return guarded([&] {
    const int last = ringlet::join();
    if (last_rank != nullptr) *last_rank = last;
  });
}

ringlet_status ringlet_start_timeline(const char* file, int mark_cycles) {
  return guarded([&] {
    if (file == nullptr) bad_argument("start_timeline", "file is null");
    ringlet::start_timeline(file, mark_cycles != 0);
  });
}

ringlet_status ringlet_stop_timeline(void) { return guarded([] { ringlet::stop_timeline(); }); }

}  // extern "C"
