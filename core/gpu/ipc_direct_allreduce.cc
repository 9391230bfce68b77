// The event-ordered allreduce between the ranks' own buffers, for a tensor
// every rank can share (core/gpu/cuda_ipc_tensors.h): in one round every
// rank publishes where its input and output lie, then rank i reduces part i
// of every rank's input straight into every rank's output
// (reduce_many_to_all, with the prescale and the result's scale). Each input
// is read once and each output written once, the least device memory
// traffic an allreduce can have, against the window's pack, reduce and
// unpack.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/gpu/ipc_window_algorithms.h"
#include "core/gpu/round_plan.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::core::gpu {

bool direct_allreduce(Rounds& rounds, PeerTensors& peers, DeviceQueue& q, const DeviceSegment& t,
                      DataType dtype, ReduceOp op, double prescale, double postscale,
                      uint64_t& last) {
  const int n = rounds.size();
  const int me = rounds.me();
  const uint64_t g = last = rounds.begin();
  const SharedTensor input = share(t.input);
  const TensorNotes mine{input, t.output == t.input ? input : share(t.output)};
  std::memcpy(rounds.notes(me, g), &mine, sizeof mine);
  // Staged here means: these notes are written, and (through the event)
  // the input is ready and the output free to write on this device.
  rounds.publish(&SegmentControl::staged, g);
  rounds.wait_all(&SegmentControl::staged, g);
  bool shareable = false;
  const std::vector<TensorNotes> all = notes_of_all(rounds, g, mine, shareable);
  if (!shareable) {  // every rank read the same notes, so all stage it
    rounds.end(g);
    return false;
  }
  const size_t es = dtype_size(dtype);
  const TensorPart part = tensor_part(t.count, es, n, me);
  // The table: this rank's part of every rank's input, then of every
  // rank's output, as this process reaches them.
  q.segment_table.clear();
  q.pointer_table.clear();
  for (const bool output : {false, true}) {
    for (int lr = 0; lr < n; ++lr) {
      const void* base = output ? t.output : t.input;
      if (lr != me) {
        base = peers.open(rounds.global_of(lr), output ? all[lr].output : all[lr].input, q);
      }
      q.pointer_table.push_back(byte_at(base, part.begin * es));
    }
  }
  q.upload_tables();
  // Reduced counts two steps here. 1: this rank opened every peer's
  // allocations. No rank writes into another's tensors before every rank
  // did, so a rank that fails to open one throws with its own tensors
  // untouched by its peers (who fail at the deadline, having written
  // nothing either).
  rounds.publish(&SegmentControl::reduced, g, 1);
  rounds.wait_all(&SegmentControl::reduced, g, 1);
  q.check(kernels::cuda::reduce_many_to_all(dtype, op, q.output_pointer(n), n, q.pointer(0), n,
                                            part.length, n, prescale, postscale, q.stream.get()),
          "the reduce kernel (CUDA IPC direct allreduce)");
  // 2: this rank's part is written in every output. Every part of this
  // rank's output is written once every peer got there.
  rounds.publish(&SegmentControl::reduced, g, 2);
  rounds.wait_all(&SegmentControl::reduced, g, 2);
  rounds.end(g);
  return true;
}

}  // namespace ringlet::core::gpu
