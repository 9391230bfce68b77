/* Ringlet's C ABI. Every call returns RINGLET_OK or an error code; the
 * message of the last error on this thread is ringlet_last_error(). No C++
 * exception ever crosses this boundary. */
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
} ringlet_status;

/* Same values as ringlet::DataType and ringlet::ReduceOp. */
typedef enum {
  RINGLET_FLOAT32 = 0,
  RINGLET_FLOAT64 = 1,
  RINGLET_FLOAT16 = 2,
  RINGLET_BFLOAT16 = 3,
  RINGLET_INT8 = 4,
  RINGLET_UINT8 = 5,
  RINGLET_INT32 = 6,
  RINGLET_INT64 = 7,
} ringlet_dtype;

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
ringlet_status ringlet_shutdown(void);
int ringlet_is_initialized(void);

/* -1 when not initialized. */
int ringlet_rank(void);
int ringlet_size(void);
int ringlet_local_rank(void);
int ringlet_local_size(void);
int ringlet_cross_rank(void);
int ringlet_cross_size(void);

ringlet_status ringlet_allreduce(const void* send, void* recv, size_t count, ringlet_dtype dtype,
                                 ringlet_op op);
/* recv_counts has size() entries. */
ringlet_status ringlet_allgather(const void* send, void* recv, const size_t* recv_counts,
                                 ringlet_dtype dtype);
ringlet_status ringlet_broadcast(void* buffer, size_t count, ringlet_dtype dtype, int root);
ringlet_status ringlet_reducescatter(const void* send, void* recv, const size_t* recv_counts,
                                     ringlet_dtype dtype, ringlet_op op);
ringlet_status ringlet_alltoall(const void* send, const size_t* send_counts, void* recv,
                                const size_t* recv_counts, ringlet_dtype dtype);
ringlet_status ringlet_barrier(void);

/* The asynchronous API (see ringlet.h). A named allreduce of `count`
 * elements from send into recv (send == recv: in place); *handle receives the
 * handle. send and recv must stay valid until the handle completes. */
ringlet_status ringlet_allreduce_async(const char* name, const void* send, void* recv, size_t count,
                                       ringlet_dtype dtype, ringlet_op op, double prescale,
                                       double postscale, int64_t* handle);
/* *done = 1 once the handle completed (done or failed), else 0. */
ringlet_status ringlet_poll(int64_t handle, int* done);
/* Waits up to timeout_seconds (>= 0) for the handle to complete;
 * RINGLET_ERR_TIMEOUT when it did not (the handle stays valid). */
ringlet_status ringlet_wait(int64_t handle, double timeout_seconds);
/* Waits for the handle and releases it; its failure (mismatch across ranks,
 * duplicate name, lost peer, shutdown) is the status and message. */
ringlet_status ringlet_synchronize(int64_t handle);
/* Horovod's join(); *last_rank (may be null) receives the last rank to join. */
ringlet_status ringlet_join(int* last_rank);
/* Rank 0 writes a Chrome-trace timeline to file; mark_cycles != 0 marks cycles. */
ringlet_status ringlet_start_timeline(const char* file, int mark_cycles);
ringlet_status ringlet_stop_timeline(void);

#ifdef __cplusplus
}
#endif

#endif /* RINGLET_RINGLET_C_H_ */
