// Where an op of the library runs: on the CPU, or on a GPU with TensorFlow's
// compute stream, which produced its inputs and will consume its outputs.
// The collectives' views carry that stream (ringlet::Tensor::stream): the
// core records its ready event there at submission, so that the device
// collective starts after the work queued before the op, and writes the
// op's outputs only once TensorFlow is done with their memory's last use.
#pragma once

#include <ringlet/ringlet.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace ringlet::tensorflow_ops {

struct OpDevice {
  int ordinal = -1;        // CUDA ordinal of the op's GPU in this process; -1: the CPU
  void* stream = nullptr;  // TensorFlow's compute stream there (a cudaStream_t)
};

// The op's device: a GPU kernel's CUDA ordinal is TensorFlow's platform
// device id (what CUDA numbers it here, whatever TensorFlow's own /GPU:N is
// after tf.config.set_visible_devices), never the N of its device name.
OpDevice op_device(tensorflow::OpKernelContext* ctx);

// Where one tensor of the op lives: a GPU kernel's host-memory arguments
// (TensorFlow keeps int32 there, and alltoall's splits) are host tensors.
OpDevice placed(const OpDevice& op, tensorflow::MemoryType memory);

// Sets the view's device and producer stream.
void place(ringlet::Tensor& view, const OpDevice& where);

// Copies `bytes` from src to dst, both in `where`'s memory: on the host at
// once; on a GPU queued on TensorFlow's stream.
// `who` names the op's collective and rank, for errors ("ringlet: broadcast
// of 'w' on rank 1").
absl::Status copy_within(const OpDevice& where, void* dst, const void* src, size_t bytes,
                         const std::string& who);

// Copies a collective's output (Result::data, or the device memory
// Result::device_data that Ringlet allocated) into an op's output in
// `where`'s memory. A device copy is queued on TensorFlow's stream, so that
// the output is ready in that stream's order; the legacy default stream
// then waits for it, so that Ringlet's pool, which takes the memory back in
// that stream's order when the result goes, reuses it only after the copy.
// Runs on the runtime's thread: it calls CUDA, never Ringlet.
absl::Status copy_result(const OpDevice& where, void* dst, const ringlet::Result& result,
                         const std::string& who);

}  // namespace ringlet::tensorflow_ops
