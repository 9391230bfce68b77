// Buffers, inputs and expected outputs of one benchmarked op.
//
// Inputs are small integers that depend on the rank and the index, so that
// every dtype (int8 and bfloat16 included) holds them and their reductions
// exactly: a wrong element is a real error, not rounding. Outputs start as a
// sentinel, so that an element the collective never wrote is counted wrong.
#pragma once

#include <cstddef>

#include "options.h"
#include "ringlet/types.h"

namespace ringlet::bench {

// nccl-tests' conventions for the size and count columns (see --help).
struct Layout {
  size_t bytes = 0;       // the size column
  size_t count = 0;       // the count column: elements of the buffer, or of one rank's block
  size_t send_elems = 0;  // out-of-place input
  size_t recv_elems = 0;  // out-of-place output
  // In place the op runs within one buffer of this many elements.
  size_t inplace_elems() const { return send_elems > recv_elems ? send_elems : recv_elems; }
};

// count == 0 when `bytes` is too small for one element per rank.
Layout layout_for(Collective c, size_t bytes, DataType dtype, int nranks);

struct Case {
  Collective collective;
  DataType dtype;
  ReduceOp op;
  int root;
  int rank;
  int nranks;
  Layout layout;
  bool in_place;
};

// Where the op reads and writes, given the two allocations: out of place
// send_buf -> recv_buf; in place everything lives in recv_buf (allgather's
// input is this rank's block of it; reducescatter's output is its start).
struct OpBuffers {
  const void* send;
  void* recv;
  int device = -1;  // --device cuda: the CUDA device both live on
};
OpBuffers op_buffers(const Case& c, void* send_buf, void* recv_buf);

// Writes this rank's inputs and the sentinel into the outputs.
void prepare(const Case& c, void* send_buf, void* recv_buf);

// This rank's output against the expected result, computed here from the
// inputs' formula (never through a collective): how many elements were
// checked and how many differ.
struct CheckCount {
  size_t checked = 0;
  size_t wrong = 0;
};
CheckCount check_output(const Case& c, const void* recv_buf);

// Elements of this rank's output that differ from the expected result.
inline size_t count_wrong(const Case& c, const void* recv_buf) { return check_output(c, recv_buf).wrong; }

// The sum's scaling by 1/n for --backend mpi's avg (MPI has no average op):
// integers truncated toward zero, as Ringlet (and Horovod) define avg.
void divide_by(DataType dtype, void* buf, size_t count, int n);

}  // namespace ringlet::bench
