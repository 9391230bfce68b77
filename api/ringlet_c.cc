// The C ABI over the C++ API. Every entry point catches everything: a C
// caller (or Python through ctypes) cannot unwind a C++ exception, so each
// failure becomes a status code plus a message kept per thread.
#include "ringlet/ringlet_c.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ringlet/ringlet.h"

namespace {

using ringlet::Error;
using ringlet::ErrorCode;

// The C codes are the C++ codes: a failure crosses as e.code() unchanged.
static_assert(static_cast<int>(ErrorCode::kInvalidArgument) == RINGLET_ERR_INVALID_ARGUMENT);
static_assert(static_cast<int>(ErrorCode::kNotInitialized) == RINGLET_ERR_NOT_INITIALIZED);
static_assert(static_cast<int>(ErrorCode::kConfig) == RINGLET_ERR_CONFIG);
static_assert(static_cast<int>(ErrorCode::kPeerLost) == RINGLET_ERR_PEER_LOST);
static_assert(static_cast<int>(ErrorCode::kTimeout) == RINGLET_ERR_TIMEOUT);
static_assert(static_cast<int>(ErrorCode::kInternal) == RINGLET_ERR_INTERNAL);
static_assert(static_cast<int>(ErrorCode::kMismatch) == RINGLET_ERR_MISMATCH);
static_assert(static_cast<int>(ErrorCode::kAborted) == RINGLET_ERR_ABORTED);

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
  } catch (const Error& e) {
    record(e.what());
    return static_cast<ringlet_status>(e.code());
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

// The C enums name the C++ values.
static_assert(static_cast<int>(ringlet::DataType::kFloat32) == RINGLET_FLOAT32);
static_assert(static_cast<int>(ringlet::DataType::kFloat64) == RINGLET_FLOAT64);
static_assert(static_cast<int>(ringlet::DataType::kFloat16) == RINGLET_FLOAT16);
static_assert(static_cast<int>(ringlet::DataType::kBFloat16) == RINGLET_BFLOAT16);
static_assert(static_cast<int>(ringlet::DataType::kInt8) == RINGLET_INT8);
static_assert(static_cast<int>(ringlet::DataType::kUInt8) == RINGLET_UINT8);
static_assert(static_cast<int>(ringlet::DataType::kInt32) == RINGLET_INT32);
static_assert(static_cast<int>(ringlet::DataType::kInt64) == RINGLET_INT64);
static_assert(static_cast<int>(ringlet::DataType::kInt16) == RINGLET_INT16);
static_assert(static_cast<int>(ringlet::DataType::kUInt16) == RINGLET_UINT16);
static_assert(ringlet::kNumDataTypes == RINGLET_UINT16 + 1, "a dtype without a C name");
static_assert(static_cast<int>(ringlet::ReduceOp::kSum) == RINGLET_SUM);
static_assert(static_cast<int>(ringlet::ReduceOp::kProd) == RINGLET_PROD);
static_assert(static_cast<int>(ringlet::ReduceOp::kMin) == RINGLET_MIN);
static_assert(static_cast<int>(ringlet::ReduceOp::kMax) == RINGLET_MAX);
static_assert(static_cast<int>(ringlet::ReduceOp::kAvg) == RINGLET_AVG);
static_assert(ringlet::kNumReduceOps == RINGLET_AVG + 1, "a reduce op without a C name");

// The C caller hands any int. DataType and ReduceOp are fixed on int32_t,
// so every int is a value they hold (C++ defines the cast), and the C++ API
// checks it in each call: an unknown value is refused there, as
// an invalid argument naming the value, the call and the rank.
static_assert(std::is_same_v<std::underlying_type_t<ringlet::DataType>, int32_t>);
static_assert(std::is_same_v<std::underlying_type_t<ringlet::ReduceOp>, int32_t>);
static_assert(sizeof(int) == sizeof(int32_t));
ringlet::DataType to_dtype(int d) { return static_cast<ringlet::DataType>(d); }
ringlet::ReduceOp to_op(int op) { return static_cast<ringlet::ReduceOp>(op); }

// Arguments the C caller can get wrong before the C++ API sees them. The
// rank is named where there is one.
[[noreturn]] void bad_argument(const char* call, const std::string& why) {
  std::string where = std::string("ringlet: ") + call;
  try {
    where += " on rank " + std::to_string(ringlet::rank());
  } catch (const Error&) {
  }
  throw Error(ErrorCode::kInvalidArgument, where + ": " + why);
}

// A C counts array has size() entries. Its length needs the job's size, so
// "not initialized" is reported here, under the name of the collective.
std::span<const size_t> counts_of(const size_t* counts, const char* call, const char* name) {
  int size = 0;
  try {
    size = ringlet::size();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotInitialized) throw;
    throw Error(ErrorCode::kNotInitialized,
                std::string("ringlet: ") + call + " called before init()");
  }
  if (counts == nullptr) {
    bad_argument(call, std::string(name) + " is null (it needs one entry per rank, " +
                           std::to_string(size) + ")");
  }
  return {counts, static_cast<size_t>(size)};
}

// A C shape: ndim entries, or none for a scalar.
std::vector<int64_t> shape_of(const int64_t* shape, int ndim, const char* call,
                              const std::string& name) {
  if (ndim < 0)
    bad_argument(call, "'" + name + "': ndim is " + std::to_string(ndim) + "; it must be >= 0");
  if (ndim > 0 && shape == nullptr) {
    bad_argument(call, "'" + name + "': shape is null but ndim is " + std::to_string(ndim));
  }
  return ndim > 0 ? std::vector<int64_t>(shape, shape + ndim) : std::vector<int64_t>{};
}

// The checks every named asynchronous call starts with: where the handle
// goes (cleared first, so that a failed call never leaves a stale one), and
// the name.
void start_async(const char* call, const char* name, int64_t* handle) {
  if (handle == nullptr) bad_argument(call, "handle is null");
  *handle = 0;
  if (name == nullptr) bad_argument(call, "name is null");
}

// A C set of n global ranks.
std::vector<int> ranks_of(const int* ranks, int n, const char* call) {
  if (n < 0)
    bad_argument(call, "the number of ranks is " + std::to_string(n) + "; it must be >= 0");
  if (n > 0 && ranks == nullptr)
    bad_argument(call, "ranks is null but holds " + std::to_string(n) + " entries");
  return std::vector<int>(ranks, ranks + n);
}

}  // namespace

// The opaque result of ringlet_synchronize_result: the C++ result as is.
struct ringlet_result {
  ringlet::Result result;
};

extern "C" {

const char* ringlet_last_error(void) { return g_last_error.c_str(); }

const char* ringlet_status_string(int status) {
  if (status == RINGLET_OK) return "ok";
  return ringlet::to_string(static_cast<ErrorCode>(status));
}

ringlet_status ringlet_init(void) {
  return guarded([] { ringlet::init(); });
}

ringlet_status ringlet_init_with_process_sets(const int* ranks, const int* set_sizes,
                                              int num_sets) {
  return guarded([&] {
    const char* call = "init_with_process_sets";
    if (num_sets < 0)
      bad_argument(call, "num_sets is " + std::to_string(num_sets) + "; it must be >= 0");
    if (num_sets > 0 && set_sizes == nullptr) bad_argument(call, "set_sizes is null");
    std::vector<std::vector<int>> sets;
    sets.reserve(static_cast<size_t>(num_sets));
    size_t at = 0;
    for (int i = 0; i < num_sets; ++i) {
      if (set_sizes[i] < 0) {
        bad_argument(call,
                     "set_sizes[" + std::to_string(i) + "] is " + std::to_string(set_sizes[i]));
      }
      if (set_sizes[i] > 0 && ranks == nullptr) bad_argument(call, "ranks is null");
      sets.emplace_back(ranks + at, ranks + at + set_sizes[i]);
      at += static_cast<size_t>(set_sizes[i]);
    }
    ringlet::init(sets);
  });
}
ringlet_status ringlet_shutdown(void) {
  return guarded([] { ringlet::shutdown(); });
}
int ringlet_is_initialized(void) {
  bool yes = false;
  guarded([&] { yes = ringlet::is_initialized(); });
  return yes ? 1 : 0;
}

int ringlet_rank(void) {
  return query([] { return ringlet::rank(); });
}
int ringlet_size(void) {
  return query([] { return ringlet::size(); });
}
int ringlet_local_rank(void) {
  return query([] { return ringlet::local_rank(); });
}
int ringlet_local_size(void) {
  return query([] { return ringlet::local_size(); });
}
int ringlet_cross_rank(void) {
  return query([] { return ringlet::cross_rank(); });
}
int ringlet_cross_size(void) {
  return query([] { return ringlet::cross_size(); });
}

ringlet_status ringlet_allreduce(const void* send, void* recv, size_t count, int dtype, int op) {
  return guarded([&] { ringlet::allreduce(send, recv, count, to_dtype(dtype), to_op(op)); });
}

ringlet_status ringlet_allgather(const void* send, void* recv, const size_t* recv_counts,
                                 int dtype) {
  return guarded([&] {
    ringlet::allgather(send, recv, counts_of(recv_counts, "allgather", "recv_counts"),
                       to_dtype(dtype));
  });
}

ringlet_status ringlet_broadcast(void* buffer, size_t count, int dtype, int root) {
  return guarded([&] { ringlet::broadcast(buffer, count, to_dtype(dtype), root); });
}

ringlet_status ringlet_reducescatter(const void* send, void* recv, const size_t* recv_counts,
                                     int dtype, int op) {
  return guarded([&] {
    ringlet::reducescatter(send, recv, counts_of(recv_counts, "reducescatter", "recv_counts"),
                           to_dtype(dtype), to_op(op));
  });
}

ringlet_status ringlet_alltoall(const void* send, const size_t* send_counts, void* recv,
                                const size_t* recv_counts, int dtype) {
  return guarded([&] {
    auto sends = counts_of(send_counts, "alltoall", "send_counts");
    auto recvs = counts_of(recv_counts, "alltoall", "recv_counts");
    ringlet::alltoall(send, sends, recv, recvs, to_dtype(dtype));
  });
}

ringlet_status ringlet_barrier(void) {
  return guarded([] { ringlet::barrier(); });
}

ringlet_status ringlet_allreduce_async(const char* name, const void* send, void* recv, size_t count,
                                       int dtype, int op, double prescale, double postscale,
                                       int64_t* handle) {
  return guarded([&] {
    start_async("allreduce_async", name, handle);
    if (count > static_cast<size_t>(INT64_MAX))
      bad_argument("allreduce_async", "count " + std::to_string(count) + " is too large");
    const ringlet::DataType dt = to_dtype(dtype);
    const std::vector<int64_t> shape{static_cast<int64_t>(count)};
    ringlet::Tensor in{const_cast<void*>(send), dt, shape, -1};
    ringlet::Tensor out{recv, dt, shape, -1};
    *handle = ringlet::allreduce_async(name, std::move(in), std::move(out), to_op(op), prescale,
                                       postscale);
  });
}

ringlet_status ringlet_allreduce_async_ex(const char* name, const void* send, void* recv,
                                          const int64_t* shape, int ndim, int dtype, int op,
                                          double prescale, double postscale, int process_set,
                                          int64_t* handle) {
  return guarded([&] {
    start_async("allreduce_async_ex", name, handle);
    std::vector<int64_t> dims = shape_of(shape, ndim, "allreduce_async_ex", name);
    ringlet::Tensor in{const_cast<void*>(send), to_dtype(dtype), dims, -1};
    ringlet::Tensor out{recv, to_dtype(dtype), std::move(dims), -1};
    *handle = ringlet::allreduce_async(name, std::move(in), std::move(out), to_op(op), prescale,
                                       postscale, process_set);
  });
}

ringlet_status ringlet_allgather_async(const char* name, const void* send, const int64_t* shape,
                                       int ndim, int dtype, int process_set, int64_t* handle) {
  return guarded([&] {
    start_async("allgather_async", name, handle);
    ringlet::Tensor in{const_cast<void*>(send), to_dtype(dtype),
                       shape_of(shape, ndim, "allgather_async", name), -1};
    *handle = ringlet::allgather_async(name, std::move(in), process_set);
  });
}

ringlet_status ringlet_broadcast_async(const char* name, void* buffer, const int64_t* shape,
                                       int ndim, int dtype, int root, int process_set,
                                       int64_t* handle) {
  return guarded([&] {
    start_async("broadcast_async", name, handle);
    ringlet::Tensor t{buffer, to_dtype(dtype), shape_of(shape, ndim, "broadcast_async", name), -1};
    *handle = ringlet::broadcast_async(name, std::move(t), root, process_set);
  });
}

ringlet_status ringlet_reducescatter_async(const char* name, const void* send, const int64_t* shape,
                                           int ndim, int dtype, int op, double prescale,
                                           double postscale, int process_set, int64_t* handle) {
  return guarded([&] {
    start_async("reducescatter_async", name, handle);
    ringlet::Tensor in{const_cast<void*>(send), to_dtype(dtype),
                       shape_of(shape, ndim, "reducescatter_async", name), -1};
    *handle = ringlet::reducescatter_async(name, std::move(in), to_op(op), prescale, postscale,
                                           process_set);
  });
}

ringlet_status ringlet_alltoall_async(const char* name, const void* send, const int64_t* shape,
                                      int ndim, int dtype, const int64_t* splits, int nsplits,
                                      int process_set, int64_t* handle) {
  return guarded([&] {
    start_async("alltoall_async", name, handle);
    ringlet::Tensor in{const_cast<void*>(send), to_dtype(dtype),
                       shape_of(shape, ndim, "alltoall_async", name), -1};
    if (nsplits < 0) {
      bad_argument("alltoall_async",
                   "'" + std::string(name) + "': nsplits is " + std::to_string(nsplits));
    }
    if (nsplits > 0 && splits == nullptr) {
      bad_argument("alltoall_async", "'" + std::string(name) + "': splits is null but nsplits is " +
                                         std::to_string(nsplits));
    }
    std::vector<int64_t> rows(splits, splits + (nsplits > 0 ? nsplits : 0));
    *handle = ringlet::alltoall_async(name, std::move(in), std::move(rows), process_set);
  });
}

ringlet_status ringlet_grouped_allreduce_async(int n, const char* const* names,
                                               const void* const* sends, void* const* recvs,
                                               const int64_t* const* shapes, const int* ndims,
                                               int dtype, int op, double prescale, double postscale,
                                               int process_set, int64_t* handles) {
  return guarded([&] {
    const char* call = "grouped_allreduce_async";
    if (handles == nullptr) bad_argument(call, "handles is null");
    if (n <= 0)
      bad_argument(call, "a group of " + std::to_string(n) + " members; it needs at least one");
    std::fill(handles, handles + n, int64_t{0});
    if (names == nullptr || sends == nullptr || recvs == nullptr || shapes == nullptr ||
        ndims == nullptr) {
      bad_argument(call, "names, sends, recvs, shapes and ndims must all be non-null");
    }
    std::vector<std::string> member_names;
    std::vector<ringlet::Tensor> ins, outs;
    member_names.reserve(n);
    ins.reserve(n);
    outs.reserve(n);
    for (int i = 0; i < n; ++i) {
      if (names[i] == nullptr) bad_argument(call, "names[" + std::to_string(i) + "] is null");
      member_names.emplace_back(names[i]);
      std::vector<int64_t> dims = shape_of(shapes[i], ndims[i], call, names[i]);
      ins.push_back({const_cast<void*>(sends[i]), to_dtype(dtype), dims, -1});
      outs.push_back({recvs[i], to_dtype(dtype), std::move(dims), -1});
    }
    const std::vector<int64_t> got = ringlet::grouped_allreduce_async(
        member_names, ins, outs, to_op(op), prescale, postscale, process_set);
    std::copy(got.begin(), got.end(), handles);
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
      bad_argument("wait", "timeout_seconds must be finite and >= 0, got " +
                               std::to_string(timeout_seconds));
    }
    const double ms = std::ceil(timeout_seconds * 1e3);
    const double cap = 1e11;  // about three years; ringlet::wait caps there too
    ringlet::wait(handle, std::chrono::milliseconds(static_cast<int64_t>(ms < cap ? ms : cap)));
  });
}

ringlet_status ringlet_synchronize(int64_t handle) {
  return guarded([&] { (void)ringlet::synchronize(handle); });
}

ringlet_status ringlet_synchronize_result(int64_t handle, ringlet_result** out) {
  return guarded([&] {
    // Checked before synchronizing: the handle is released by it, and a
    // result with nowhere to go would be lost.
    if (out == nullptr) bad_argument("synchronize_result", "out is null");
    *out = nullptr;
    auto result = std::make_unique<ringlet_result>();
    result->result = ringlet::synchronize(handle);
    *out = result.release();
  });
}

const void* ringlet_result_data(const ringlet_result* result) {
  return result != nullptr && !result->result.data.empty() ? result->result.data.data() : nullptr;
}

size_t ringlet_result_bytes(const ringlet_result* result) {
  return result != nullptr ? result->result.data.size() : 0;
}

int ringlet_result_ndim(const ringlet_result* result) {
  return result != nullptr ? static_cast<int>(result->result.shape.size()) : 0;
}

const int64_t* ringlet_result_shape(const ringlet_result* result) {
  return result != nullptr && !result->result.shape.empty() ? result->result.shape.data() : nullptr;
}

const int64_t* ringlet_result_received_splits(const ringlet_result* result, int* n) {
  const bool any = result != nullptr && !result->result.received_splits.empty();
  if (n != nullptr) *n = any ? static_cast<int>(result->result.received_splits.size()) : 0;
  return any ? result->result.received_splits.data() : nullptr;
}

void ringlet_result_free(ringlet_result* result) { delete result; }

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

ringlet_status ringlet_stop_timeline(void) {
  return guarded([] { ringlet::stop_timeline(); });
}

ringlet_status ringlet_add_process_set(const int* ranks, int n, int* id) {
  return guarded([&] {
    if (id == nullptr) bad_argument("add_process_set", "id is null");
    *id = -1;
    *id = ringlet::add_process_set(ranks_of(ranks, n, "add_process_set"));
  });
}

ringlet_status ringlet_remove_process_set(int id) {
  return guarded([&] { ringlet::remove_process_set(id); });
}

ringlet_status ringlet_process_set_barrier(int id) {
  return guarded([&] { ringlet::barrier(id); });
}

ringlet_status ringlet_process_set_size(int id, int* size) {
  return guarded([&] {
    if (size == nullptr) bad_argument("process_set_size", "size is null");
    *size = ringlet::process_set_size(id);
  });
}

ringlet_status ringlet_process_set_rank(int id, int* rank) {
  return guarded([&] {
    if (rank == nullptr) bad_argument("process_set_rank", "rank is null");
    *rank = ringlet::process_set_rank(id);
  });
}

ringlet_status ringlet_process_set_ranks(int id, int* ranks, int capacity, int* n) {
  return guarded([&] {
    if (n == nullptr) bad_argument("process_set_ranks", "n is null");
    *n = 0;
    if (capacity < 0) bad_argument("process_set_ranks", "capacity is " + std::to_string(capacity));
    if (capacity > 0 && ranks == nullptr) bad_argument("process_set_ranks", "ranks is null");
    const std::vector<int> members = ringlet::process_set_ranks(id);
    *n = static_cast<int>(members.size());
    if (ranks == nullptr && capacity == 0) return;
    if (capacity < *n) {
      bad_argument("process_set_ranks", "process set " + std::to_string(id) + " has " +
                                            std::to_string(*n) + " ranks but capacity is " +
                                            std::to_string(capacity));
    }
    std::copy(members.begin(), members.end(), ranks);
  });
}

}  // extern "C"
