/* Ringlet's C ABI. Every call returns RINGLET_OK or an error code; the
 * message of the last error on this thread is ringlet_last_error(). No C++
 * exception ever crosses this boundary. The codes are ringlet::ErrorCode's
 * values; new ones are appended, so a caller should treat an unknown code as
 * RINGLET_ERR_INTERNAL. */
#ifndef RINGLET_RINGLET_C_H_
#define RINGLET_RINGLET_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  RINGLET_OK = 0,
  RINGLET_ERR_INVALID_ARGUMENT = 1,
  RINGLET_ERR_NOT_INITIALIZED = 2,
  RINGLET_ERR_CONFIG = 3,
  RINGLET_ERR_PEER_LOST = 4,
  RINGLET_ERR_TIMEOUT = 5,
  RINGLET_ERR_INTERNAL = 6,
  /* The ranks disagree about a collective (dtype, shape, op, root, ...): the
   * same name failed this way on every rank, and the runtime goes on. */
  RINGLET_ERR_MISMATCH = 7,
  /* The runtime was shut down (by some rank, or by the stall check of
   * HOROVOD_STALL_SHUTDOWN_TIME_SECONDS) before the collective ran. */
  RINGLET_ERR_ABORTED = 8,
} ringlet_status;

/* "ok", "invalid argument", "mismatch across ranks", ...; "unknown status" for a value
 * this library does not know. Never null; static storage. Takes any int, so
 * that a code from a newer library (or any other int) can be asked about. */
const char* ringlet_status_string(int status);

/* Same values as ringlet::DataType and ringlet::ReduceOp. The calls take the
 * dtype and the op as plain ints, these names being their values: a C enum
 * holding a value outside its list (a caller's 42) is undefined behaviour in
 * C++, so every value crosses as an int and the library checks it; an
 * unknown one is RINGLET_ERR_INVALID_ARGUMENT, and the message names it
 * ("unknown dtype 42 (expected 0..9: ...)"). */
typedef enum {
  RINGLET_FLOAT32 = 0,
  RINGLET_FLOAT64 = 1,
  RINGLET_FLOAT16 = 2,
  RINGLET_BFLOAT16 = 3,
  RINGLET_INT8 = 4,
  RINGLET_UINT8 = 5,
  RINGLET_INT32 = 6,
  RINGLET_INT64 = 7,
  RINGLET_INT16 = 8,
  RINGLET_UINT16 = 9,
} ringlet_dtype;

/* RINGLET_AVG is the sum times postscale / n (n: the members), applied once;
 * integers are scaled in double and truncated toward zero, as Horovod
 * averages, which is not an exact division for every n (49 ranks averaging a
 * 1 each get 0; see ReduceOp in ringlet/types.h). The prescale scales each
 * input as it is read, the postscale the result. */
typedef enum {
  RINGLET_SUM = 0,
  RINGLET_PROD = 1,
  RINGLET_MIN = 2,
  RINGLET_MAX = 3,
  RINGLET_AVG = 4,
} ringlet_op;

/* The message of this thread's last failed call ("" before any). Successful
 * calls leave it unchanged; the pointer stays valid until the next failure on
 * this thread. */
const char* ringlet_last_error(void);

/* init: RINGLET_ERR_CONFIG names the bad variable; a second init without
 * shutdown is RINGLET_ERR_INVALID_ARGUMENT. shutdown when not initialized is
 * RINGLET_OK. */
ringlet_status ringlet_init(void);
/* ringlet_init() that also creates static process sets with ids 1, 2, ...:
 * ranks holds the sets one after another, set i having set_sizes[i] global
 * ranks. Every rank passes the same sets. */
ringlet_status ringlet_init_with_process_sets(const int* ranks, const int* set_sizes, int num_sets);
ringlet_status ringlet_shutdown(void);
int ringlet_is_initialized(void);

/* -1 when not initialized. */
int ringlet_rank(void);
int ringlet_size(void);
int ringlet_local_rank(void);
int ringlet_local_size(void);
int ringlet_cross_rank(void);
int ringlet_cross_size(void);

ringlet_status ringlet_allreduce(const void* send, void* recv, size_t count, int dtype, int op);
/* recv_counts has size() entries. */
ringlet_status ringlet_allgather(const void* send, void* recv, const size_t* recv_counts,
                                 int dtype);
ringlet_status ringlet_broadcast(void* buffer, size_t count, int dtype, int root);
ringlet_status ringlet_reducescatter(const void* send, void* recv, const size_t* recv_counts,
                                     int dtype, int op);
ringlet_status ringlet_alltoall(const void* send, const size_t* send_counts, void* recv,
                                const size_t* recv_counts, int dtype);
ringlet_status ringlet_barrier(void);

/* The asynchronous API (see ringlet.h). A named allreduce of `count`
 * elements from send into recv (send == recv: in place); *handle receives the
 * handle. send and recv must stay valid until the handle completes. */
ringlet_status ringlet_allreduce_async(const char* name, const void* send, void* recv, size_t count,
                                       int dtype, int op, double prescale, double postscale,
                                       int64_t* handle);

/* The calls below take a tensor as a buffer and an N-d shape (ndim entries of
 * elements per dimension; ndim 0 is a scalar and shape may then be null), and
 * a process set (0: the world; see ringlet.h). The ranks must agree on the
 * shape, save where a collective says otherwise; a disagreement fails the
 * handle on every rank with RINGLET_ERR_MISMATCH and names both shapes, which
 * a flat count could not. */

/* ringlet_allreduce_async with a shape and a process set: the C form of
 * ringlet::allreduce_async. */
ringlet_status ringlet_allreduce_async_ex(const char* name, const void* send, void* recv,
                                          const int64_t* shape, int ndim, int dtype, int op,
                                          double prescale, double postscale, int process_set,
                                          int64_t* handle);
/* Members may differ in the first dimension (ndim >= 1); the concatenation
 * (ascending global rank) comes from ringlet_synchronize_result. */
ringlet_status ringlet_allgather_async(const char* name, const void* send, const int64_t* shape,
                                       int ndim, int dtype, int process_set, int64_t* handle);
/* In place: root's buffer is sent, the others' overwritten. root is a
 * global rank, a member of the set. */
ringlet_status ringlet_broadcast_async(const char* name, void* buffer, const int64_t* shape,
                                       int ndim, int dtype, int root, int process_set,
                                       int64_t* handle);
/* The i-th member receives rows [offset_i, offset_i + n_i) of the reduction,
 * n_i = d0/members (+1 for i < d0 % members), from
 * ringlet_synchronize_result. */
ringlet_status ringlet_reducescatter_async(const char* name, const void* send, const int64_t* shape,
                                           int ndim, int dtype, int op, double prescale,
                                           double postscale, int process_set, int64_t* handle);
/* splits[i] rows of dim 0 go to the i-th member of the set; nsplits is 0 (an
 * even split; splits may be null) or the number of members. The rows
 * received, and from whom, come from ringlet_synchronize_result. */
ringlet_status ringlet_alltoall_async(const char* name, const void* send, const int64_t* shape,
                                      int ndim, int dtype, const int64_t* splits, int nsplits,
                                      int process_set, int64_t* handle);
/* n allreduces that run together, fused atomically: member i is names[i],
 * sends[i] -> recvs[i] with shapes[i] of ndims[i] dimensions. They share
 * dtype, op and scales; handles receives n handles, one per member. Every
 * rank submits its groups in the same order. Nothing is submitted when the
 * call fails (handles are then all 0). */
ringlet_status ringlet_grouped_allreduce_async(int n, const char* const* names,
                                               const void* const* sends, void* const* recvs,
                                               const int64_t* const* shapes, const int* ndims,
                                               int dtype, int op, double prescale, double postscale,
                                               int process_set, int64_t* handles);
/* *done = 1 once the handle completed (done or failed), else 0. */
ringlet_status ringlet_poll(int64_t handle, int* done);
/* Waits up to timeout_seconds (>= 0) for the handle to complete (done or
 * failed); RINGLET_ERR_TIMEOUT when it did not (the handle stays valid), and
 * RINGLET_ERR_ABORTED when the runtime stopped without completing it. */
ringlet_status ringlet_wait(int64_t handle, double timeout_seconds);
/* Waits for the handle and releases it; its failure is the status and
 * message: RINGLET_ERR_MISMATCH (the ranks disagree), _PEER_LOST, _TIMEOUT,
 * _ABORTED (shut down before it ran everywhere). A name already in flight
 * is refused at submission, as RINGLET_ERR_INVALID_ARGUMENT. */
ringlet_status ringlet_synchronize(int64_t handle);

/* What a completed handle hands back where the output's size is known only
 * after negotiation (allgather, reducescatter, alltoall): an opaque result
 * that the caller frees with ringlet_result_free. */
typedef struct ringlet_result ringlet_result;
/* ringlet_synchronize that keeps the output: on RINGLET_OK *out is a new
 * result (for allreduce and broadcast, which wrote the caller's buffer, one
 * with no data); on failure *out is null. */
ringlet_status ringlet_synchronize_result(int64_t handle, ringlet_result** out);
/* The accessors read a result the caller still owns; a null result reads as
 * empty (null, 0). Pointers stay valid until ringlet_result_free. */
const void* ringlet_result_data(const ringlet_result* result);
size_t ringlet_result_bytes(const ringlet_result* result);
int ringlet_result_ndim(const ringlet_result* result);
const int64_t* ringlet_result_shape(const ringlet_result* result);
/* alltoall: rows received from each member of the set; *n (may be null)
 * receives their number, 0 for the other collectives. */
const int64_t* ringlet_result_received_splits(const ringlet_result* result, int* n);
/* Null is allowed. */
void ringlet_result_free(ringlet_result* result);
/* Horovod's join(); *last_rank (may be null) receives the last rank to join. */
ringlet_status ringlet_join(int* last_rank);
/* Rank 0 writes a Chrome-trace timeline to file; mark_cycles != 0 marks cycles. */
ringlet_status ringlet_start_timeline(const char* file, int mark_cycles);
ringlet_status ringlet_stop_timeline(void);

/* Process sets (see ringlet.h). Adding and removing are collective over the
 * whole world: every rank calls them in the same order with the same
 * arguments; ranks that disagree get RINGLET_ERR_MISMATCH. *id receives the
 * new set's id (-1 when the call fails). A set with a rank outside the
 * world, an unknown id, or the world (0) to remove are
 * RINGLET_ERR_INVALID_ARGUMENT. */
ringlet_status ringlet_add_process_set(const int* ranks, int n, int* id);
ringlet_status ringlet_remove_process_set(int id);
/* Returns once every member of the set has reached it; only members call it. */
ringlet_status ringlet_process_set_barrier(int id);
/* *size: the number of members; *rank: this rank's index among them, -1 when
 * not a member. An unknown id is RINGLET_ERR_INVALID_ARGUMENT. */
ringlet_status ringlet_process_set_size(int id, int* size);
ringlet_status ringlet_process_set_rank(int id, int* rank);
/* Writes the set's global ranks, ascending, into ranks (capacity entries)
 * and their number into *n. Call with ranks null and capacity 0 to learn
 * the number; a capacity too small is RINGLET_ERR_INVALID_ARGUMENT (with *n
 * set). */
ringlet_status ringlet_process_set_ranks(int id, int* ranks, int capacity, int* n);

#ifdef __cplusplus
}
#endif

#endif /* RINGLET_RINGLET_C_H_ */
