// The C++ API: one process-wide communicator behind a mutex. Collectives hold
// the mutex for their whole run because a Communicator is driven by one
// thread at a time; concurrent callers queue instead of corrupting the ring.
#include "ringlet/ringlet.h"

#include <memory>
#include <mutex>
#include <string>

#include "core/bootstrap/launch_info.h"
#include "core/bootstrap/mpi_bootstrap.h"
#include "core/collectives/collectives.h"
#include "core/communicator.h"
#include "core/config.h"
#include "status_error.h"
#include "validate.h"

namespace ringlet {
namespace {

struct Session {
  std::mutex mu;
  std::unique_ptr<core::Communicator> comm;
};

Session& session() {
  static Session s;
  return s;
}

[[noreturn]] void not_initialized(std::string_view call) {
  throw api::StatusError(RINGLET_ERR_NOT_INITIALIZED,
                         "ringlet: " + std::string(call) + " called before init()");
}

// Runs `body` on the communicator under the lock; every failure leaves as a
// StatusError naming the call and this rank.
template <class Body>
auto with_comm(std::string_view call, Body&& body) {
  Session& s = session();
  std::lock_guard lock(s.mu);
  if (!s.comm) not_initialized(call);
  const int rank = s.comm->rank();
  try {
    return body(*s.comm);
  } catch (...) {
    api::rethrow_as_status(call, rank);
  }
}

core::LaunchInfo complete_launch(core::LaunchInfo launch) {
  if (!launch.rendezvous.empty() || launch.size <= 1) return launch;
  if (core::needs_mpi_bootstrap(launch)) {
    core::complete_launch_with_mpi(launch);
    return launch;
  }
  throw core::ConfigError("rank " + std::to_string(launch.rank) + " of " +
                          std::to_string(launch.size) + " (launcher: " + launch.launcher +
                          ") has no rendezvous store to meet the others at: set "
                          "RINGLET_RENDEZVOUS or launch with ringletrun");
}

}  // namespace

void init() {
  Session& s = session();
  std::lock_guard lock(s.mu);
  if (s.comm) {
    throw api::StatusError(RINGLET_ERR_INVALID_ARGUMENT,
                           "ringlet: init called twice on rank " + std::to_string(s.comm->rank()) +
                               "; call shutdown() first");
  }
  int rank = -1;
  try {
    core::Config config = core::load_config();
    core::LaunchInfo launch = core::detect_launch();
    rank = launch.rank;
    launch = complete_launch(std::move(launch));
    s.comm = core::Communicator::create(config, launch);
  } catch (...) {
    api::rethrow_as_status("init", rank);
  }
}

// Shutting down what is not running is a no-op, so that cleanup paths
// (atexit handlers, destructors) need not track whether init() succeeded.
void shutdown() {
  Session& s = session();
  std::lock_guard lock(s.mu);
  s.comm.reset();
}

bool is_initialized() {
  Session& s = session();
  std::lock_guard lock(s.mu);
  return s.comm != nullptr;
}

int rank() { return with_comm("rank", [](core::Communicator& c) { return c.world().rank; }); }
int size() { return with_comm("size", [](core::Communicator& c) { return c.world().size; }); }
int local_rank() {
  return with_comm("local_rank", [](core::Communicator& c) { return c.world().local_rank; });
}
int local_size() {
  return with_comm("local_size", [](core::Communicator& c) { return c.world().local_size; });
}
int cross_rank() {
  return with_comm("cross_rank", [](core::Communicator& c) { return c.world().cross_rank; });
}
int cross_size() {
  return with_comm("cross_size", [](core::Communicator& c) { return c.world().cross_size; });
}

void allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  with_comm("allreduce", [&](core::Communicator& c) {
    api::check_dtype(dtype);
    api::check_op(op);
    api::check_count(count, dtype, "count");
    api::check_buffer(send, count, "send");
    api::check_buffer(recv, count, "recv");
    core::allreduce(c, send, recv, count, dtype, op);
  });
}

void allgather(const void* send, void* recv, std::span<const size_t> recv_counts, DataType dtype) {
  with_comm("allgather", [&](core::Communicator& c) {
    api::check_dtype(dtype);
    size_t total = api::check_counts(recv_counts, c.size(), dtype_size(dtype), "recv_counts");
    api::check_buffer(send, recv_counts[c.rank()], "send");
    api::check_buffer(recv, total, "recv");
    core::allgather(c, send, recv, recv_counts, dtype);
  });
}

void broadcast(void* buffer, size_t count, DataType dtype, int root) {
  with_comm("broadcast", [&](core::Communicator& c) {
    api::check_dtype(dtype);
    api::check_root(root, c.size());
    api::check_count(count, dtype, "count");
    api::check_buffer(buffer, count, "buffer");
    core::broadcast(c, buffer, count, dtype, root);
  });
}

void reducescatter(const void* send, void* recv, std::span<const size_t> recv_counts,
                   DataType dtype, ReduceOp op) {
  with_comm("reducescatter", [&](core::Communicator& c) {
    api::check_dtype(dtype);
    api::check_op(op);
    size_t total = api::check_counts(recv_counts, c.size(), dtype_size(dtype), "recv_counts");
    api::check_buffer(send, total, "send");
    api::check_buffer(recv, recv_counts[c.rank()], "recv");
    core::reducescatter(c, send, recv, recv_counts, dtype, op);
  });
}

void alltoall(const void* send, std::span<const size_t> send_counts, void* recv,
              std::span<const size_t> recv_counts, DataType dtype) {
  with_comm("alltoall", [&](core::Communicator& c) {
    api::check_dtype(dtype);
    size_t sent = api::check_counts(send_counts, c.size(), dtype_size(dtype), "send_counts");
    size_t received = api::check_counts(recv_counts, c.size(), dtype_size(dtype), "recv_counts");
    api::check_buffer(send, sent, "send");
    api::check_buffer(recv, received, "recv");
    core::alltoall(c, send, send_counts, recv, recv_counts, dtype);
  });
}

void barrier() {
  with_comm("barrier", [](core::Communicator& c) { core::barrier(c); });
}

}  // namespace ringlet
