// Ringlet's public C++ API: process-wide init/shutdown, the job's shape, and
// synchronous collectives on host buffers. Errors are ringlet::Error, whose
// message names the rank, the peer or tensor, and the cause, and whose code()
// says what the caller can do about it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringlet/types.h"

namespace ringlet {

// What went wrong, in terms of what the caller can do about it. The values
// are ringlet_status's (ringlet_c.h), so that bindings pass them through.
enum class ErrorCode : int32_t {
  kInvalidArgument = 1,  // this rank's call was wrong: fix the call
  kNotInitialized = 2,   // called before init() or after shutdown()
  kConfig = 3,           // a bad environment variable or launch; the message names it
  kPeerLost = 4,         // a rank died or closed its links: the job cannot go on
  kTimeout = 5,          // a rank did not answer in time (or wait() ran out)
  kInternal = 6,         // anything else
  kMismatch = 7,         // the ranks disagree about a collective (dtype, shape, op, root, ...)
  kAborted = 8,          // shut down (by a rank, or by the stall check) before the collective
                         // ran; or init() given up at its caller's word (interrupted)
};

// "invalid argument", "mismatch across ranks", ...: the same text as
// ringlet_status_string(), so that C and C++ logs read alike.
const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Reads the launcher's variables and the configuration, meets the other
// ranks and connects. Calling init() twice without shutdown() is an error;
// init() after shutdown() starts afresh. Under mpirun or srun without
// RINGLET_RENDEZVOUS, init() meets the other ranks through MPI (initializing
// it if nobody has; MPI initialized by Ringlet is finalized at process exit,
// since it cannot be initialized twice). shutdown() when not initialized does
// nothing.
void init();
// init() that also creates static process sets (see below) before the first
// collective, with ids 1, 2, ... in the order given. Every rank passes the
// same list. Static sets need the runtime from the start, so synchronous
// calls go through it from the first one.
void init(const std::vector<std::vector<int>>& process_sets);
// init() whose runtime starts with the job, so that every collective, the
// synchronous ones included, goes through negotiation from the first call.
// For callers whose ranks may not make the same first calls in the same
// order (the Python bindings: one rank may start an asynchronous collective
// while another enters a barrier).
void init_with_runtime(const std::vector<std::vector<int>>& process_sets = {});
// init_with_runtime() that asks `interrupted`, on this thread, every 50 ms
// while the rendezvous waits for ranks that have not arrived yet; when it
// returns true, init gives up, starts nothing and throws Error kAborted. For
// bindings that must serve their signals during a long rendezvous. An init
// interrupted before this rank reached rank 0's store may be called again.
// One interrupted after it joined the rendezvous (the other ranks count it
// in) ends this job's rendezvous for this process: its error says the job
// must be started again, and a later init() of the same job (the same
// RINGLET_RENDEZVOUS and RINGLET_SECRET) throws kAborted at once.
void init_with_runtime(const std::vector<std::vector<int>>& process_sets,
                       std::function<bool()> interrupted);
// shutdown() while an init() meets the other ranks (from another thread, or
// from init_with_runtime's `interrupted`) makes that init() give up with
// Error kAborted saying so.
void shutdown();
bool is_initialized();

// The job's shape; each throws Error when called before init().
int rank();
int size();
int local_rank();
int local_size();
int cross_rank();
int cross_size();

// Counts are elements of `dtype`. send == recv is in place. kAvg is the sum
// times 1/size, applied once; integers are truncated toward zero in double,
// as Horovod averages (so 49 ranks averaging a 1 each get 0: see ReduceOp in
// ringlet/types.h).
void allreduce(const void* send, void* recv, size_t count, DataType dtype,
               ReduceOp op = ReduceOp::kSum);
// Rank r contributes recv_counts[r] elements (send holds this rank's).
void allgather(const void* send, void* recv, std::span<const size_t> recv_counts, DataType dtype);
void broadcast(void* buffer, size_t count, DataType dtype, int root);
void reducescatter(const void* send, void* recv, std::span<const size_t> recv_counts,
                   DataType dtype, ReduceOp op = ReduceOp::kSum);
void alltoall(const void* send, std::span<const size_t> send_counts, void* recv,
              std::span<const size_t> recv_counts, DataType dtype);
void barrier();

// ---------------------------------------------------------------------------
// The asynchronous API, in Horovod's shape. Every collective has a name; the
// same name on every rank is the same collective, and ranks may submit names
// in any order. Each call returns a handle at once (it never waits for other
// ranks); poll(), wait() and synchronize() follow it. Errors found across
// ranks (mismatched dtype or shape, a duplicate name in flight, a lost peer)
// make synchronize() throw Error with a message naming the tensor and ranks,
// and code() kMismatch, kInvalidArgument, kPeerLost, kTimeout or kAborted (the
// runtime was shut down, by some rank or the stall check, before the
// collective ran on every rank). Buffers must stay valid until the handle
// completes.
//
// `process_set` runs the collective among the members of a process set (0,
// the default, is the world); only members may submit on it, and they must
// all submit it. Within a set, broadcast's root is a global rank (a member),
// alltoall's splits have one entry per member, reducescatter splits over
// the members, and allgather concatenates the members in ascending global
// rank order.

// A view of a tensor: the caller owns the memory.
struct Tensor {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;  // elements per dimension; empty: a scalar
  int device = -1;             // -1: host memory; >= 0: CUDA ordinal
  void* stream = nullptr;      // the cudaStream_t that produced a device tensor
};

// What synchronize() hands back. `data` holds the output of the collectives
// whose size is known only after negotiation (allgather, alltoall,
// reducescatter) of host tensors; the others wrote the caller's buffer and
// leave it empty. Of device tensors, that output is `device_data` instead:
// `device_bytes` of memory on CUDA device `device` (-1: none) that Ringlet
// allocated, ready on every stream once the handle completed, and handed
// back to Ringlet's pool of the device when the last copy of the pointer
// goes: then, in the order of the device's legacy default stream, after
// the reads queued before on it or on any blocking stream; a read queued on
// a non-blocking stream must end before the last copy goes (PyTorch's rule
// for its own tensors read on another stream). `shape` is the output's
// shape; `received_splits` is alltoall's rows received from each rank.
struct Result {
  std::vector<std::byte> data;
  std::vector<int64_t> shape;
  std::vector<int64_t> received_splits;
  std::shared_ptr<void> device_data{};
  size_t device_bytes = 0;
  int device = -1;
};

// out may be in (in place). Horovod's default op is Average. The result is
// postscale * op(prescale * inputs): each rank's input is scaled by prescale
// as it is read, and the reduction's result by one factor, postscale (for
// kAvg, postscale / n with n the set's size), in the dtype's compute type;
// integers are scaled in double and truncated toward zero (Horovod's rule,
// not an exact division: see ReduceOp in ringlet/types.h). The same holds
// for reducescatter_async and grouped_allreduce_async.
int64_t allreduce_async(const std::string& name, Tensor in, Tensor out,
                        ReduceOp op = ReduceOp::kAvg, double prescale = 1.0, double postscale = 1.0,
                        int process_set = 0);
// Ranks may differ in the first dimension; the output is in Result.
int64_t allgather_async(const std::string& name, Tensor in, int process_set = 0);
// In place: root's data is sent, the others' overwritten. root is a global
// rank, a member of the set.
int64_t broadcast_async(const std::string& name, Tensor inout, int root, int process_set = 0);
// The i-th member receives rows [offset_i, offset_i + n_i) of the reduction,
// with n_i = d0/members (+1 for i < d0 % members); the output is in Result.
int64_t reducescatter_async(const std::string& name, Tensor in, ReduceOp op = ReduceOp::kAvg,
                            double prescale = 1.0, double postscale = 1.0, int process_set = 0);
// splits[i] rows of dim 0 go to the i-th member (empty: an even split); the
// output is in Result.
int64_t alltoall_async(const std::string& name, Tensor in, std::vector<int64_t> splits = {},
                       int process_set = 0);
// Point to point (beyond Horovod's API; torch.distributed's send and recv
// run on it): `in` goes to rank `to`, whose recv_async of the same name
// receives it into `out`, which holds as many elements of the same dtype.
// Ranks are global, members of the set. A transfer runs once both ranks
// submitted it, between the collectives they run around it, and the set's
// other members take no part; the n-th transfer between two ranks must have
// one name on both. Host tensors only.
int64_t send_async(const std::string& name, Tensor in, int to, int process_set = 0);
int64_t recv_async(const std::string& name, Tensor out, int from, int process_set = 0);
// Allreduces that run together, fused atomically; one handle per member.
// Members share dtype and op; every rank calls it in the same order.
std::vector<int64_t> grouped_allreduce_async(const std::vector<std::string>& names,
                                             const std::vector<Tensor>& ins,
                                             const std::vector<Tensor>& outs,
                                             ReduceOp op = ReduceOp::kAvg, double prescale = 1.0,
                                             double postscale = 1.0, int process_set = 0);
// True once the handle completed (done or failed). Unknown handle: Error.
bool poll(int64_t handle);
// Waits up to `timeout` for the handle to complete (done or failed); throws
// Error kTimeout when it did not (the handle stays valid), and the failure
// synchronize() would throw (kAborted) when the runtime stopped without
// completing it.
void wait(int64_t handle, std::chrono::milliseconds timeout);
// Waits up to `timeout`; true once synchronize() would return at once (the
// handle completed, or the runtime stopped without completing it, and
// synchronize() throws), false when the time ran out. The handle stays valid
// either way: for callers that wait in slices and do other work between them
// (a binding serving its signals).
bool wait_for(int64_t handle, std::chrono::milliseconds timeout);
// Ends this thread's burst of submissions: the runtime stops holding back
// what was submitted for more to fuse with it (after each submission it
// otherwise waits a few microseconds for the next). synchronize(), wait() and
// wait_for() do it themselves; a caller that waits another way (for
// synchronize_then's callback) calls it before it waits.
void flush();
// Waits for the handle, releases it, and returns its result or throws Error.
Result synchronize(int64_t handle);
// synchronize() that asks `interrupted`, on this thread, every 50 ms while
// the handle is pending; when it returns true, throws Error kAborted and
// leaves the handle pending (synchronize it again later). For bindings that
// must serve their signals while they wait: `interrupted` may even call
// shutdown(), after which this throws the handle's kAborted failure.
Result synchronize(int64_t handle, const std::function<bool()>& interrupted);
// synchronize() without a waiting thread, for frameworks whose ops finish by
// callback (TensorFlow's asynchronous kernels): `done` receives the handle's
// result, or the Error synchronize() would throw, once the handle completes:
// on the runtime's thread, or at once on this one if it has already. The
// handle is released. `done` must be brief, must not throw and must not call
// back into ringlet (it may run while another thread shuts ringlet down).
void synchronize_then(int64_t handle, std::function<void(Result, std::exception_ptr)> done);
// Horovod's join(): this rank has run out of data; the others' allreduces
// proceed with it contributing zeros. Returns the last rank to join.
int join();
// join() and barrier() as handles, completed by synchronize() (for callers
// that wait with wait_for()). join's Result.data holds the last rank to join
// as an int32.
int64_t join_async();
int64_t barrier_async(int process_set = 0);
// Rank 0 writes a Chrome-trace timeline to `file`; other ranks ignore it.
void start_timeline(const std::string& file, bool mark_cycles = false);
void stop_timeline();

// ---------------------------------------------------------------------------
// Process sets, as in Horovod: subsets of the world's ranks that run
// collectives among themselves, concurrently with other sets. Ranks are
// global ranks; set 0 is the world. Adding and removing are collective over
// the whole world (every rank calls them in the same order with the same
// arguments, members or not) and return once every rank has; ranks that
// disagree get kMismatch. Removing a set fails what is pending on it.
int add_process_set(const std::vector<int>& ranks);
// Returns once every member of the set has reached it; only members call it.
void barrier(int process_set);
void remove_process_set(int id);
// The set's global ranks, ascending. An unknown id is kInvalidArgument.
std::vector<int> process_set_ranks(int id);
// This rank's index among the set's members (-1 when not a member), and the
// number of members.
int process_set_rank(int id);
int process_set_size(int id);

// What this build contains, one "name: yes|no" line per feature.
std::string build_info();

}  // namespace ringlet
