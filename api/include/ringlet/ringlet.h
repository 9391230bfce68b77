// Ringlet's public C++ API: process-wide init/shutdown, the job's shape, and
// synchronous collectives on host buffers. Errors are ringlet::Error, whose
// message names the rank, the peer or tensor, and the cause.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

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

// What this build contains, one "name: yes|no" line per feature.
std::string build_info();

}  // namespace ringlet
