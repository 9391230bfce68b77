// Ringlet's public C++ API: process-wide init/shutdown, the job's shape, and
// synchronous collectives on host buffers. Errors are ringlet::Error, whose
// message names the rank, the peer or tensor, and the cause.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringlet/types.h"

namespace ringlet {

class Error : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads the launcher's variables and the configuration, meets the other
// ranks and connects. Calling init() twice without shutdown() is an error;
// init() after shutdown() starts afresh. Under mpirun or srun without
// RINGLET_RENDEZVOUS, init() meets the other ranks through MPI (initializing
// it if nobody has; MPI initialized by Ringlet is finalized at process exit,
// since it cannot be initialized twice). shutdown() when not initialized does
// nothing.
void init();
void shutdown();
bool is_initialized();

// The job's shape; each throws Error when called before init().
int rank();
int size();
int local_rank();
int local_size();
int cross_rank();
int cross_size();

// Counts are elements of `dtype`. send == recv is in place.
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
// make synchronize() throw Error with a message naming the tensor and ranks.
// Buffers must stay valid until the handle completes.

// A view of a tensor: the caller owns the memory.
struct Tensor {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;  // elements per dimension; empty: a scalar
  int device = -1;             // -1: host memory; >= 0: CUDA ordinal
};

// What synchronize() hands back. `data` holds the output of the collectives
// whose size is known only after negotiation (allgather, alltoall,
// reducescatter); the others wrote the caller's buffer and leave it empty.
// `shape` is the output's shape; `received_splits` is alltoall's rows
// received from each rank.
struct Result {
  std::vector<std::byte> data;
  std::vector<int64_t> shape;
  std::vector<int64_t> received_splits;
};

// out may be in (in place). Horovod's default op is Average.
int64_t allreduce_async(const std::string& name, Tensor in, Tensor out, ReduceOp op = ReduceOp::kAvg,
                        double prescale = 1.0, double postscale = 1.0);
// Ranks may differ in the first dimension; the output is in Result.
int64_t allgather_async(const std::string& name, Tensor in);
// In place: root's data is sent, the others' overwritten.
int64_t broadcast_async(const std::string& name, Tensor inout, int root);
// Rank r receives rows [offset_r, offset_r + n_r) of the reduction, with
// n_r = d0/size (+1 for r < d0 % size); the output is in Result.
int64_t reducescatter_async(const std::string& name, Tensor in, ReduceOp op = ReduceOp::kAvg,
                            double prescale = 1.0, double postscale = 1.0);
// splits[j] rows of dim 0 go to rank j (empty: an even split); the output is
// in Result.
int64_t alltoall_async(const std::string& name, Tensor in, std::vector<int64_t> splits = {});
// Allreduces that run together, fused atomically; one handle per member.
// Members share dtype and op; every rank calls it in the same order.
std::vector<int64_t> grouped_allreduce_async(const std::vector<std::string>& names, const std::vector<Tensor>& ins,
                                             const std::vector<Tensor>& outs, ReduceOp op = ReduceOp::kAvg,
                                             double prescale = 1.0, double postscale = 1.0);
// True once the handle completed (done or failed). Unknown handle: Error.
bool poll(int64_t handle);
// Waits up to `timeout` for the handle to complete; throws Error on timeout
// (the handle stays valid).
void wait(int64_t handle, std::chrono::milliseconds timeout);
// Waits for the handle, releases it, and returns its result or throws Error.
Result synchronize(int64_t handle);
// Horovod's join(): this rank has run out of data; the others' allreduces
// proceed with it contributing zeros. Returns the last rank to join.
int join();
// Rank 0 writes a Chrome-trace timeline to `file`; other ranks ignore it.
void start_timeline(const std::string& file, bool mark_cycles = false);
void stop_timeline();

// What this build contains, one "name: yes|no" line per feature.
std::string build_info();

}  // namespace ringlet
