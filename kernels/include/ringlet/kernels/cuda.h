// Element-wise work on device memory: the CUDA twin of cpu.h, with the same
// op semantics (the arithmetic comes from ops.h and half_bits.h, shared with
// the CPU kernels). Only code built with CUDA includes this header.
//
// Every launcher is asynchronous on `stream` and returns the launch status
// (cudaSuccess, cudaErrorInvalidValue for a bad dtype/op/count, or the error
// the launch reported); no exception leaves it. Pointers are device (or
// managed) memory aligned to their element size, as every CUDA access must
// be; counts are elements; count 0 launches nothing. `out` may alias an input
// exactly. Where all the pointers of a call reach a 16-byte boundary at the
// same element, the body moves 16 bytes per access between a scalar head and
// tail; otherwise the kernel goes element by element, correctly but slower.
// A launch never synchronizes the device. NaN results are NaN but, unlike on the CPU, their
// payload is whatever the device's conversion instructions produce.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ringlet/kernels/peer_protocol.h"
#include "ringlet/types.h"

namespace ringlet::kernels::cuda {

// out[i] = a[i] (op) b[i]; kAvg reduces as kSum (its 1/n is the result's
// scale, ops::result_scale).
cudaError_t reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b,
                   size_t count, cudaStream_t stream);

// out[i] = inputs[0][i] (op) ... (op) inputs[k-1][i], in input order, in one
// pass. `inputs` is a device array of k device pointers. fp16/bf16 accumulate
// in float and round once, as on the CPU.
cudaError_t reduce_many(DataType dtype, ReduceOp op, void* out, const void* const* inputs,
                        int num_inputs, size_t count, cudaStream_t stream);

// An allreduce's part between the ranks' own buffers, in one pass: every
// input scaled by `prescale` (as pack scales), reduced in input order (as
// reduce_many), then scaled once by ops::result_scale(op, postscale,
// contributors) (as scale), each step rounded to the dtype as those launchers
// round it, so that the result is theirs bit for bit; written to each of
// `num_outputs` outputs. `inputs` and `outputs` are device arrays of device
// pointers; an output may alias an input exactly.
cudaError_t reduce_many_to_all(DataType dtype, ReduceOp op, void* const* outputs, int num_outputs,
                               const void* const* inputs, int num_inputs, size_t count,
                               int contributors, double prescale, double postscale,
                               cudaStream_t stream);

// buf[i] *= factor (integers: in double, then toward zero, saturating; see
// ops.h). An average's result is the sum scaled by ops::result_scale.
cudaError_t scale(DataType dtype, void* buf, size_t count, double factor, cudaStream_t stream);

// One tensor of a fusion buffer: `count` elements at element `offset` of the
// fused buffer, copied from (pack) or to (unpack) `tensor`.
struct FusedSegment {
  void* tensor;
  size_t offset;
  size_t count;
};

// Batched: one launch copies every segment, scaling by `factor` on the way (1.0
// copies bits exactly). `segments` is a device array of `num_segments`
// descriptors sorted by offset and not overlapping; `fused_count` is the fused
// buffer's extent in elements (at least every offset + count). Offsets padded
// so that each slot starts on 16 bytes let the copy use 16-byte accesses
// wherever the tensor is aligned too; any other layout is copied correctly,
// element by element.
cudaError_t pack(DataType dtype, void* fused, const FusedSegment* segments, int num_segments,
                 size_t fused_count, double factor, cudaStream_t stream);
cudaError_t unpack(DataType dtype, const void* fused, const FusedSegment* segments,
                   int num_segments, size_t fused_count, double factor, cudaStream_t stream);

// One round of the allreduce whose kernels synchronise through flags in each
// other's memory (peer_protocol.h), as rank round.me launches it: `flags[r]`
// is rank r's flag area (kFlagBytes of zeros at first), `inputs[r]` its
// input and `outputs[r]` its output, all as this process reaches them (its
// own, or opened through CUDA IPC). One-shot reads every input and writes
// outputs[me]; two-shot reads its part of every input and writes it to every
// output. Each input is scaled by `prescale` and rounded (as pack does), the
// fold rounded once and scaled once by ops::result_scale(op, postscale,
// contributors), so the result is reduce_many_to_all's bit for bit. A wait
// that passes `timeout_ns` from the kernel's start writes
// peer::failure_code() to `*failure` (host memory mapped for the device) and
// leaves the kernel. Every rank must launch the same round.blocks.
struct PeerBuffers {
  uint64_t* flags[peer::kMaxRanks];
  const void* inputs[peer::kMaxRanks];
  void* outputs[peer::kMaxRanks];
};
cudaError_t peer_allreduce(DataType dtype, ReduceOp op, const PeerBuffers& buffers,
                           const peer::Round& round, int contributors, double prescale,
                           double postscale, uint64_t timeout_ns, uint64_t* failure,
                           cudaStream_t stream);
// The blocks of peer_allreduce that one rank may launch on the current
// device so that they are all resident at once (its multiprocessors: one
// block of peer::kThreads each); 0 where CUDA cannot tell.
int peer_resident_blocks();

// Conversions on raw 16-bit patterns, round to nearest even.
cudaError_t float_to_half(uint16_t* out, const float* in, size_t count, cudaStream_t stream);
cudaError_t half_to_float(float* out, const uint16_t* in, size_t count, cudaStream_t stream);
cudaError_t float_to_bfloat16(uint16_t* out, const float* in, size_t count, cudaStream_t stream);
cudaError_t bfloat16_to_float(float* out, const uint16_t* in, size_t count, cudaStream_t stream);

}  // namespace ringlet::kernels::cuda
