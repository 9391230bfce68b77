// The C++ API: one process-wide communicator built at init(), and the
// runtime (core::Runtime) that takes it over at the first named asynchronous
// call (or at init when HOROVOD_TIMELINE asks for a timeline).
//
// Until then a synchronous call runs the collective directly on the caller's
// thread, as MPI does: no negotiation and no hand-off to a background thread,
// which would cost a thread wake-up twice per call (0.7 us against ~120 us for
// 4 KiB at two ranks). Once the runtime runs, its background thread owns the
// communicator and a synchronous call is synchronize(enqueue(...)) under a
// name of its own ("ringlet.sync.<kind>.<seq>"). Every rank makes the same
// calls in the same order, so all switch at the same call and the sequence
// numbers agree.
#include "ringlet/ringlet.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "core/bootstrap/launch_info.h"
#include "core/collectives/collectives.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/mpi/mpi_bootstrap.h"
#include "core/runtime/runtime.h"
#include "core/timeline/timeline.h"
#include "status_error.h"
#include "validate.h"

namespace ringlet {
namespace {

using core::runtime::Runtime;

struct Session {
  std::mutex mu;
  std::unique_ptr<core::Communicator> comm;  // until the runtime takes it over
  std::shared_ptr<Runtime> rt;
  core::World world;
  std::atomic<uint64_t> sync_sequence{0};
  // Rank 0's timeline asked for before the runtime ran: open, waiting for it.
  std::shared_ptr<core::timeline::Timeline> pending_timeline;
  bool starting = false;  // an init() is meeting the other ranks
  // shutdown() was called while it did: that init() gives up (read by its
  // interrupt, on its thread, without the lock).
  std::atomic<bool> cancel_start{false};
};

Session& session() {
  static Session s;
  return s;
}

[[noreturn]] void not_initialized(std::string_view call) {
  throw Error(ErrorCode::kNotInitialized,
              "ringlet: " + std::string(call) + " called before init()");
}

bool initialized(const Session& s) { return s.comm || s.rt; }

// Runs `body` on the runtime, starting it on the first call; every failure
// leaves as an Error naming the call and this rank. The session lock is
// held only to take a reference, so that calls of several threads (a poll
// while another waits) do not queue behind each other; shutdown() meanwhile
// fails what they wait for. Calls that only look up handles pass
// start = false: a handle cannot exist before the runtime does, and starting
// it on one rank alone would leave the others behind.
template <class Body>
auto with_runtime(std::string_view call, Body&& body, bool start = true) {
  std::shared_ptr<Runtime> rt;
  {
    Session& s = session();
    std::lock_guard lock(s.mu);
    if (!initialized(s)) not_initialized(call);
    if (!s.rt && !start) {
      throw Error(ErrorCode::kInvalidArgument,
                  "ringlet: " + std::string(call) + " on rank " + std::to_string(s.world.rank) +
                      ": no asynchronous call was made, so there is no such handle");
    }
    if (!s.rt) {
      try {
        s.rt = std::make_shared<Runtime>(std::move(s.comm));
        s.rt->start_timeline(std::move(s.pending_timeline));
      } catch (...) {
        api::rethrow_as_error(call, s.world.rank);
      }
    }
    rt = s.rt;
  }
  try {
    return body(*rt);
  } catch (...) {
    api::rethrow_as_error(call, rt->rank());
  }
}

// A synchronous collective: `check` validates the arguments against the
// world, once, whichever path then runs them; `direct` runs on the
// communicator while no runtime runs (under the session lock: the
// communicator is single-threaded), `through_runtime` once it does. A
// refusal fails before the path is chosen, so it reads the same on both.
template <class Check, class Direct, class ThroughRuntime>
void synchronous(std::string_view call, Check&& check, Direct&& direct,
                 ThroughRuntime&& through_runtime) {
  {
    Session& s = session();
    std::unique_lock lock(s.mu);
    if (!initialized(s)) not_initialized(call);
    try {
      check(std::as_const(s.world));
    } catch (...) {
      api::rethrow_as_error(call, s.world.rank);
    }
    if (s.comm) {
      try {
        direct(*s.comm);
      } catch (...) {
        api::rethrow_as_error(call, s.world.rank);
      }
      return;
    }
  }
  with_runtime(call, std::forward<ThroughRuntime>(through_runtime));
}

template <class Query>
int world_query(std::string_view call, Query&& q) {
  Session& s = session();
  std::lock_guard lock(s.mu);
  if (!initialized(s)) not_initialized(call);
  return q(s.world);
}

std::string sync_name(std::string_view kind) {
  std::string name = "ringlet.sync.";
  name += kind;
  name += '.';
  name += std::to_string(session().sync_sequence.fetch_add(1, std::memory_order_relaxed));
  return name;
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

int64_t elements_of(const Tensor& t, const char* what) {
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0) {
      throw common::caller_error(std::string(what) + " has a negative dimension in shape " +
                                 core::runtime::shape_string(t.shape));
    }
    n *= d;
  }
  return n;
}

core::runtime::Device device_of(const Tensor& t) {
  core::runtime::Device d;
  d.id = t.device;
  d.cuda_stream = t.stream;
  return d;
}

Result to_public(core::runtime::Result&& r) {
  Result out;
  out.data = std::move(r.data);
  out.device_data = std::move(r.device_data);
  out.device_bytes = r.device_bytes;
  out.device = r.device;
  out.shape = std::move(r.shape);
  out.received_splits = std::move(r.received_splits);
  return out;
}

}  // namespace

namespace {

[[noreturn]] void cancelled_by_shutdown(int rank, const std::string& detail) {
  throw Error(ErrorCode::kAborted,
              "ringlet: init" + (rank >= 0 ? " on rank " + std::to_string(rank) : std::string()) +
                  ": shutdown() was called while init was meeting the other ranks" +
                  (detail.empty() ? std::string() : " (" + detail + ")"));
}

// The session lock is not held while the ranks meet: `interrupted` may wait
// for a binding's own lock (Python's GIL), which another thread may hold
// while it asks is_initialized(). A second init meanwhile is refused, and a
// shutdown() meanwhile (another thread's, or a signal handler's run inside
// `interrupted`) ends this one as an interrupt does.
void start(const std::vector<std::vector<int>>& process_sets, bool runtime_from_start,
           std::function<bool()> interrupted = {}) {
  Session& s = session();
  {
    std::lock_guard lock(s.mu);
    if (initialized(s)) {
      throw Error(ErrorCode::kInvalidArgument, "ringlet: init called twice on rank " +
                                                   std::to_string(s.world.rank) +
                                                   "; call shutdown() first");
    }
    if (s.starting) {
      throw Error(ErrorCode::kInvalidArgument,
                  "ringlet: init called while another thread's init is meeting the other ranks");
    }
    s.starting = true;
    s.cancel_start = false;
  }
  auto cancelled = [&s] { return s.cancel_start.load(); };
  auto give_up = [&cancelled, interrupted = std::move(interrupted)] {
    if (cancelled()) return true;
    return (interrupted && interrupted()) || cancelled();
  };
  int rank = -1;
  std::unique_ptr<core::Communicator> comm;
  std::shared_ptr<Runtime> rt;
  try {
    core::Config config = core::load_config();
    core::LaunchInfo launch = core::detect_launch();
    rank = launch.rank;
    launch = complete_launch(std::move(launch));
    comm = core::Communicator::create(config, launch, give_up);
    const core::World world = comm->world();
    if (!config.timeline.empty() || !process_sets.empty() || runtime_from_start) {
      rt = std::make_shared<Runtime>(std::move(comm), process_sets);
    }
    std::lock_guard lock(s.mu);
    s.starting = false;
    if (!s.cancel_start) {
      s.world = world;
      s.sync_sequence.store(0, std::memory_order_relaxed);
      s.comm = std::move(comm);
      s.rt = std::move(rt);
      return;
    }
  } catch (...) {
    {
      std::lock_guard lock(s.mu);
      s.starting = false;
    }
    if (!cancelled()) api::rethrow_as_error("init", rank);
    try {
      throw;
    } catch (const common::Failure& f) {
      cancelled_by_shutdown(rank, f.body());
    } catch (const std::exception& e) {
      cancelled_by_shutdown(rank, e.what());
    } catch (...) {
      cancelled_by_shutdown(rank, "");
    }
  }
  // Met the others, but shutdown() came first: leave as shutdown() would
  // have (the runtime's shutdown tells the other ranks).
  if (rt) {
    try {
      rt->shutdown();
    } catch (...) {
    }
  }
  rt.reset();
  comm.reset();
  cancelled_by_shutdown(rank, "");
}

}  // namespace

void init() { start({}, false); }

void init(const std::vector<std::vector<int>>& process_sets) { start(process_sets, false); }

void init_with_runtime(const std::vector<std::vector<int>>& process_sets) {
  start(process_sets, true);
}

void init_with_runtime(const std::vector<std::vector<int>>& process_sets,
                       std::function<bool()> interrupted) {
  start(process_sets, true, std::move(interrupted));
}

// Shutting down what is not running is a no-op, so that cleanup paths
// (atexit handlers, destructors) need not track whether init() succeeded;
// shutting down while an init() meets the other ranks ends that init().
void shutdown() {
  std::shared_ptr<Runtime> rt;
  std::unique_ptr<core::Communicator> comm;
  {
    Session& s = session();
    std::lock_guard lock(s.mu);
    if (s.starting) s.cancel_start = true;
    rt = std::move(s.rt);
    comm = std::move(s.comm);
    s.rt.reset();
    s.pending_timeline.reset();
  }
  if (comm) {
    // Peers may still be reading this rank's shared memory for the last
    // collective: leave together, as the runtime's shutdown does. A peer that
    // is already gone leaves nothing to wait for.
    if (!comm->failed()) {
      try {
        core::barrier(*comm);
      } catch (...) {
      }
    }
    return;
  }
  if (!rt) return;
  try {
    rt->shutdown();  // fails pending handles and releases the communicator
  } catch (...) {
    api::rethrow_as_error("shutdown", rt->rank());
  }
}

bool is_initialized() {
  Session& s = session();
  std::lock_guard lock(s.mu);
  return initialized(s);
}

int rank() {
  return world_query("rank", [](const core::World& w) { return w.rank; });
}
int size() {
  return world_query("size", [](const core::World& w) { return w.size; });
}
int local_rank() {
  return world_query("local_rank", [](const core::World& w) { return w.local_rank; });
}
int local_size() {
  return world_query("local_size", [](const core::World& w) { return w.local_size; });
}
int cross_rank() {
  return world_query("cross_rank", [](const core::World& w) { return w.cross_rank; });
}
int cross_size() {
  return world_query("cross_size", [](const core::World& w) { return w.cross_size; });
}

// ------------------------------------------------------------ synchronous

void allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  synchronous(
      "allreduce",
      [&](const core::World&) {
        api::check_dtype(dtype);
        api::check_op(op);
        api::check_count(count, dtype, "count");
        api::check_buffer(send, count, "send");
        api::check_buffer(recv, count, "recv");
      },
      [&](core::Communicator& c) { core::allreduce(c, send, recv, count, dtype, op); },
      [&](Runtime& rt) {
        rt.synchronize(rt.enqueue_allreduce(sync_name("allreduce"), send, recv,
                                            {static_cast<int64_t>(count)}, dtype, op));
      });
}

void allgather(const void* send, void* recv, std::span<const size_t> recv_counts, DataType dtype) {
  size_t total = 0;
  synchronous(
      "allgather",
      [&](const core::World& w) {
        api::check_dtype(dtype);
        total = api::check_counts(recv_counts, w.size, dtype_size(dtype), "recv_counts");
        api::check_buffer(send, recv_counts[w.rank], "send");
        api::check_buffer(recv, total, "recv");
      },
      [&](core::Communicator& c) { core::allgather(c, send, recv, recv_counts, dtype); },
      [&](Runtime& rt) {
        const size_t mine = recv_counts[rt.rank()];
        core::runtime::Result r = rt.synchronize(rt.enqueue_allgather(
            sync_name("allgather"), send, {static_cast<int64_t>(mine)}, dtype));
        if (r.data.size() != total * dtype_size(dtype)) {
          throw common::caller_error(
              "the ranks contributed " + std::to_string(r.data.size() / dtype_size(dtype)) +
              " elements in all but recv_counts sums to " + std::to_string(total));
        }
        if (total) std::memcpy(recv, r.data.data(), r.data.size());
      });
}

void broadcast(void* buffer, size_t count, DataType dtype, int root) {
  synchronous(
      "broadcast",
      [&](const core::World& w) {
        api::check_dtype(dtype);
        api::check_root(root, w.size);
        api::check_count(count, dtype, "count");
        api::check_buffer(buffer, count, "buffer");
      },
      [&](core::Communicator& c) { core::broadcast(c, buffer, count, dtype, root); },
      [&](Runtime& rt) {
        rt.synchronize(rt.enqueue_broadcast(sync_name("broadcast"), buffer,
                                            {static_cast<int64_t>(count)}, dtype, root));
      });
}

void reducescatter(const void* send, void* recv, std::span<const size_t> recv_counts,
                   DataType dtype, ReduceOp op) {
  size_t total = 0;
  synchronous(
      "reducescatter",
      [&](const core::World& w) {
        api::check_dtype(dtype);
        api::check_op(op);
        total = api::check_counts(recv_counts, w.size, dtype_size(dtype), "recv_counts");
        api::check_buffer(send, total, "send");
        api::check_buffer(recv, recv_counts[w.rank], "recv");
      },
      [&](core::Communicator& c) { core::reducescatter(c, send, recv, recv_counts, dtype, op); },
      [&](Runtime& rt) {
        const int n = rt.size();
        const size_t mine = recv_counts[rt.rank()];
        const size_t es = dtype_size(dtype);
        // The runtime splits as Horovod does (total/size, one more for the first
        // total%size ranks). Other splits reduce the whole and keep this rank's
        // part; recv_counts agree on every rank, so every rank takes the same path.
        bool horovod_split = true;
        for (int r = 0; r < n; ++r) {
          horovod_split &=
              recv_counts[r] == total / n + (static_cast<size_t>(r) < total % n ? 1 : 0);
        }
        if (horovod_split) {
          core::runtime::Result res = rt.synchronize(rt.enqueue_reducescatter(
              sync_name("reducescatter"), send, {static_cast<int64_t>(total)}, dtype, op));
          if (res.data.size() != mine * es) {
            throw common::Failure(common::FailureKind::kInternal,
                                  "reducescatter returned " + std::to_string(res.data.size() / es) +
                                      " elements, expected " + std::to_string(mine));
          }
          if (mine) std::memcpy(recv, res.data.data(), mine * es);
          return;
        }
        std::vector<std::byte> whole(total * es);
        rt.synchronize(rt.enqueue_allreduce(sync_name("reducescatter"), send, whole.data(),
                                            {static_cast<int64_t>(total)}, dtype, op));
        size_t offset = 0;
        for (int r = 0; r < rt.rank(); ++r) offset += recv_counts[r];
        if (mine) std::memcpy(recv, whole.data() + offset * es, mine * es);
      });
}

void alltoall(const void* send, std::span<const size_t> send_counts, void* recv,
              std::span<const size_t> recv_counts, DataType dtype) {
  size_t sent = 0;
  size_t received = 0;
  synchronous(
      "alltoall",
      [&](const core::World& w) {
        api::check_dtype(dtype);
        sent = api::check_counts(send_counts, w.size, dtype_size(dtype), "send_counts");
        received = api::check_counts(recv_counts, w.size, dtype_size(dtype), "recv_counts");
        api::check_buffer(send, sent, "send");
        api::check_buffer(recv, received, "recv");
      },
      [&](core::Communicator& c) {
        core::alltoall(c, send, send_counts, recv, recv_counts, dtype);
      },
      [&](Runtime& rt) {
        std::vector<int64_t> splits(send_counts.begin(), send_counts.end());
        core::runtime::Result r = rt.synchronize(rt.enqueue_alltoall(
            sync_name("alltoall"), send, {static_cast<int64_t>(sent)}, dtype, std::move(splits)));
        for (int j = 0; j < rt.size(); ++j) {
          const int64_t got =
              j < static_cast<int>(r.received_splits.size()) ? r.received_splits[j] : -1;
          if (got != static_cast<int64_t>(recv_counts[j])) {
            throw common::caller_error(
                "recv_counts[" + std::to_string(j) + "] is " + std::to_string(recv_counts[j]) +
                " but rank " + std::to_string(j) + " sent " + std::to_string(got) + " elements");
          }
        }
        if (received) std::memcpy(recv, r.data.data(), received * dtype_size(dtype));
      });
}

void barrier() {
  synchronous(
      "barrier", [](const core::World&) {}, [](core::Communicator& c) { core::barrier(c); },
      [](Runtime& rt) { rt.barrier(); });
}

void barrier(int process_set) {
  if (process_set == 0) return barrier();
  with_runtime("barrier", [&](Runtime& rt) { rt.barrier(process_set); });
}

// ----------------------------------------------------------- asynchronous

int64_t allreduce_async(const std::string& name, Tensor in, Tensor out, ReduceOp op,
                        double prescale, double postscale, int process_set) {
  return with_runtime("allreduce_async", [&](Runtime& rt) {
    api::check_dtype(in.dtype);
    api::check_op(op);
    if (out.dtype != in.dtype) {
      throw common::caller_error("'" + name + "': output dtype " +
                                 std::string(to_string(out.dtype)) + " differs from input dtype " +
                                 std::string(to_string(in.dtype)));
    }
    const int64_t n_in = elements_of(in, "input");
    const int64_t n_out = elements_of(out, "output");
    if (n_in != n_out) {
      throw common::caller_error("'" + name + "': output holds " + std::to_string(n_out) +
                                 " elements but input holds " + std::to_string(n_in));
    }
    if (out.device != in.device)
      throw common::caller_error("'" + name + "': input and output on different devices");
    return rt.enqueue_allreduce(name, in.data, out.data, in.shape, in.dtype, op, prescale,
                                postscale, device_of(in), process_set);
  });
}

int64_t allgather_async(const std::string& name, Tensor in, int process_set) {
  return with_runtime("allgather_async", [&](Runtime& rt) {
    api::check_dtype(in.dtype);
    return rt.enqueue_allgather(name, in.data, in.shape, in.dtype, device_of(in), process_set);
  });
}

int64_t broadcast_async(const std::string& name, Tensor inout, int root, int process_set) {
  return with_runtime("broadcast_async", [&](Runtime& rt) {
    api::check_dtype(inout.dtype);
    return rt.enqueue_broadcast(name, inout.data, inout.shape, inout.dtype, root, device_of(inout),
                                process_set);
  });
}

int64_t reducescatter_async(const std::string& name, Tensor in, ReduceOp op, double prescale,
                            double postscale, int process_set) {
  return with_runtime("reducescatter_async", [&](Runtime& rt) {
    api::check_dtype(in.dtype);
    api::check_op(op);
    return rt.enqueue_reducescatter(name, in.data, in.shape, in.dtype, op, prescale, postscale,
                                    device_of(in), process_set);
  });
}

int64_t alltoall_async(const std::string& name, Tensor in, std::vector<int64_t> splits,
                       int process_set) {
  return with_runtime("alltoall_async", [&](Runtime& rt) {
    api::check_dtype(in.dtype);
    return rt.enqueue_alltoall(name, in.data, in.shape, in.dtype, std::move(splits), device_of(in),
                               process_set);
  });
}

int64_t send_async(const std::string& name, Tensor in, int to, int process_set) {
  return with_runtime("send_async", [&](Runtime& rt) {
    api::check_dtype(in.dtype);
    return rt.enqueue_send(name, in.data, in.shape, in.dtype, to, device_of(in), process_set);
  });
}

int64_t recv_async(const std::string& name, Tensor out, int from, int process_set) {
  return with_runtime("recv_async", [&](Runtime& rt) {
    api::check_dtype(out.dtype);
    return rt.enqueue_recv(name, out.data, out.shape, out.dtype, from, device_of(out), process_set);
  });
}

std::vector<int64_t> grouped_allreduce_async(const std::vector<std::string>& names,
                                             const std::vector<Tensor>& ins,
                                             const std::vector<Tensor>& outs, ReduceOp op,
                                             double prescale, double postscale, int process_set) {
  return with_runtime("grouped_allreduce_async", [&](Runtime& rt) {
    if (names.size() != ins.size() || names.size() != outs.size()) {
      throw common::caller_error("names, ins and outs have " + std::to_string(names.size()) + ", " +
                                 std::to_string(ins.size()) + " and " +
                                 std::to_string(outs.size()) + " entries; they must match");
    }
    if (names.empty()) throw common::caller_error("an empty group");
    api::check_op(op);
    std::vector<Runtime::GroupMember> members;
    members.reserve(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      api::check_dtype(ins[i].dtype);
      if (ins[i].dtype != ins[0].dtype || outs[i].dtype != ins[0].dtype) {
        throw common::caller_error("'" + names[i] + "': the members of a group share one dtype");
      }
      if (ins[i].device != ins[0].device || outs[i].device != ins[0].device) {
        throw common::caller_error("'" + names[i] + "': the members of a group share one device");
      }
      if (elements_of(ins[i], "input") != elements_of(outs[i], "output")) {
        throw common::caller_error("'" + names[i] +
                                   "': output and input hold different element counts");
      }
      members.push_back({names[i], ins[i].data, outs[i].data, ins[i].shape});
    }
    return rt.enqueue_grouped_allreduce(std::move(members), ins[0].dtype, op, prescale, postscale,
                                        device_of(ins[0]), process_set);
  });
}

bool poll(int64_t handle) {
  return with_runtime(
      "poll", [&](Runtime& rt) { return rt.poll(handle); }, /*start=*/false);
}

namespace {

// `timeout` as a runtime wait takes it: not negative, and capped so that
// now() + timeout cannot overflow the clock (about three years is forever here).
std::chrono::milliseconds checked_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0)
    throw common::caller_error("negative timeout " + std::to_string(timeout.count()) + " ms");
  return std::min(timeout, std::chrono::milliseconds(100'000'000'000));
}

}  // namespace

// A handle the runtime stopped without completing is not "complete": wait()
// throws the failure synchronize() would, and wait_for() says it would not
// block, leaving that failure to synchronize().
void wait(int64_t handle, std::chrono::milliseconds timeout) {
  with_runtime(
      "wait",
      [&](Runtime& rt) {
        switch (rt.wait(handle, checked_timeout(timeout))) {
          case core::runtime::HandleTable::Waited::kCompleted:
            return;
          case core::runtime::HandleTable::Waited::kAbandoned:
            throw rt.abandoned(handle);
          case core::runtime::HandleTable::Waited::kTimedOut:
            break;
        }
        throw Error(ErrorCode::kTimeout, "ringlet: wait on rank " + std::to_string(rt.rank()) +
                                             ": handle " + std::to_string(handle) +
                                             " did not complete within " +
                                             std::to_string(timeout.count()) + " ms");
      },
      /*start=*/false);
}

bool wait_for(int64_t handle, std::chrono::milliseconds timeout) {
  return with_runtime(
      "wait_for",
      [&](Runtime& rt) {
        return rt.wait(handle, checked_timeout(timeout)) !=
               core::runtime::HandleTable::Waited::kTimedOut;
      },
      /*start=*/false);
}

void flush() {
  with_runtime(
      "flush", [](Runtime& rt) { rt.flush(); }, /*start=*/false);
}

Result synchronize(int64_t handle) {
  return with_runtime(
      "synchronize", [&](Runtime& rt) { return to_public(rt.synchronize(handle)); },
      /*start=*/false);
}

Result synchronize(int64_t handle, const std::function<bool()>& interrupted) {
  return with_runtime(
      "synchronize", [&](Runtime& rt) { return to_public(rt.synchronize(handle, interrupted)); },
      /*start=*/false);
}

void synchronize_then(int64_t handle, std::function<void(Result, std::exception_ptr)> done) {
  if (!done) throw Error(ErrorCode::kInvalidArgument, "ringlet: synchronize_then: no callback");
  with_runtime(
      "synchronize_then",
      [&](Runtime& rt) {
        const int rank = rt.rank();
        rt.synchronize_then(
            handle, [done = std::move(done), rank](core::runtime::HandleTable::Outcome outcome) {
              if (outcome.failure) {
                done(Result{},
                     std::make_exception_ptr(api::error_of(*outcome.failure, "synchronize", rank)));
              } else {
                done(to_public(std::move(outcome.result)), nullptr);
              }
            });
      },
      /*start=*/false);
}

int join() {
  return with_runtime("join", [](Runtime& rt) { return rt.join(); });
}

int64_t join_async() {
  return with_runtime("join_async", [](Runtime& rt) { return rt.enqueue_join(); });
}

int64_t barrier_async(int process_set) {
  return with_runtime("barrier_async",
                      [&](Runtime& rt) { return rt.enqueue_barrier(process_set); });
}

// The timeline records the runtime's work; before the runtime runs there is
// none, and starting it here on the ranks that call (often rank 0 alone)
// would leave the others behind. So rank 0, the one that writes, opens the
// file now (a path it cannot write fails this call) and the timeline waits
// for the runtime.
void start_timeline(const std::string& file, bool mark_cycles) {
  if (file.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "ringlet: the timeline file name is empty");
  }
  {
    Session& s = session();
    std::lock_guard lock(s.mu);
    if (!initialized(s)) not_initialized("start_timeline");
    if (!s.rt) {
      if (s.world.rank != 0) return;
      try {
        s.pending_timeline = Runtime::open_timeline(file, mark_cycles, s.comm->config().timeout);
      } catch (...) {
        api::rethrow_as_error("start_timeline", s.world.rank);
      }
      return;
    }
  }
  with_runtime("start_timeline", [&](Runtime& rt) { rt.start_timeline(file, mark_cycles); });
}

void stop_timeline() {
  {
    Session& s = session();
    std::lock_guard lock(s.mu);
    if (!initialized(s)) not_initialized("stop_timeline");
    s.pending_timeline.reset();
    if (!s.rt) return;
  }
  with_runtime("stop_timeline", [](Runtime& rt) { rt.stop_timeline(); });
}

// ------------------------------------------------------------ process sets

// Adding and removing are collective over the world, so every rank starts
// the runtime at the same call, as with a named collective.
int add_process_set(const std::vector<int>& ranks) {
  return with_runtime("add_process_set",
                      [&](Runtime& rt) { return static_cast<int>(rt.add_process_set(ranks)); });
}

void remove_process_set(int id) {
  with_runtime("remove_process_set", [&](Runtime& rt) { rt.remove_process_set(id); });
}

// A query must not start the runtime: ranks ask on their own, and a runtime
// started by one rank alone would leave the others behind. Before it runs
// only the world exists (static sets start it at init()).
std::vector<int> process_set_ranks(int id) {
  std::shared_ptr<Runtime> rt;
  int world_size = 0;
  int rank = -1;
  {
    Session& s = session();
    std::lock_guard lock(s.mu);
    if (!initialized(s)) not_initialized("process_set_ranks");
    rt = s.rt;
    world_size = s.world.size;
    rank = s.world.rank;
  }
  try {
    if (rt) return rt->process_set_ranks(id);
    if (id != 0) {
      throw common::caller_error("there is no process set " + std::to_string(id) +
                                 " (none was added; 0 is the world)");
    }
    std::vector<int> all(world_size);
    for (int r = 0; r < world_size; ++r) all[r] = r;
    return all;
  } catch (...) {
    api::rethrow_as_error("process_set_ranks", rank);
  }
}

int process_set_rank(int id) {
  const std::vector<int> ranks = process_set_ranks(id);
  const int me = rank();
  const auto it = std::find(ranks.begin(), ranks.end(), me);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

int process_set_size(int id) { return static_cast<int>(process_set_ranks(id).size()); }

}  // namespace ringlet
