// peer_allreduce: the block program of peer_protocol.h on the device. The
// flags are raised with system-scope release stores and read with
// system-scope acquire loads, so that the same code serves ranks that share
// one GPU (two processes' contexts on one device) and ranks on GPUs that
// reach each other's memory over NVLink or PCIe.
#include <cuda/atomic>

#include "device_types.cuh"
#include "fold.cuh"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::cuda {
namespace {

using detail::Element;
using detail::Fold;
using detail::ReduceToAll;
using peer::kMaxRanks;

using SystemFlag = ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system>;

__device__ __forceinline__ uint64_t global_nanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Arguments {
  PeerBuffers buffers;
  peer::Round round;
  uint64_t timeout_ns;
  uint64_t* failure;
};

// What one block of peer_allreduce_kernel works with (peer_protocol.h's
// platform): thread t < ranks speaks for peer t in the flag steps.
template <class Op, class S>
struct Block {
  using F = ReduceToAll<Op, S>;
  const Arguments& a;
  F f;                    // with this block's input and output tables
  const void** in;        // shared: every input, at the block's range
  void** out;             // shared: the outputs written, at the block's range
  volatile int* gave_up;  // shared: some wait of this block gave up
  uint64_t deadline;      // global nanoseconds

  __device__ bool speaks_for_a_peer() const {
    return threadIdx.x < a.round.ranks && static_cast<int>(threadIdx.x) != a.round.me;
  }

  __device__ void arrive(int block, uint64_t value) const {
    __syncthreads();  // every thread's writes of this block, before the flag
    if (speaks_for_a_peer()) {
      __threadfence_system();
      SystemFlag(a.buffers.flags[threadIdx.x][peer::flag_slot(block, a.round.me)])
          .store(value, ::cuda::memory_order_release);
    }
  }

  __device__ bool wait(int block, uint64_t value) const {
    if (speaks_for_a_peer()) {
      const int from = static_cast<int>(threadIdx.x);
      SystemFlag flag(a.buffers.flags[a.round.me][peer::flag_slot(block, from)]);
      unsigned spins = 0;
      while (flag.load(::cuda::memory_order_acquire) < value) {
        if (*gave_up != 0) break;
        if ((++spins & 31) == 0 && *reinterpret_cast<volatile uint64_t*>(a.failure) != 0) {
          // Another block gave up, or the host abandoned the round.
          *gave_up = 1;
          break;
        }
        if ((spins & 31) == 0 && global_nanoseconds() > deadline) {
          // The first failure the host reads names the peer; any will do.
          *reinterpret_cast<volatile uint64_t*>(a.failure) =
              peer::failure_code(from, a.round.round, static_cast<peer::Step>(value & 3));
          __threadfence_system();
          *gave_up = 1;
          break;
        }
        __nanosleep(spins < 256 ? 32 : 256);
      }
    }
    __syncthreads();
    return *gave_up == 0;
  }

  __device__ void work(peer::Range range) {
    const int ranks = a.round.ranks;
    const size_t skip = range.begin * sizeof(S);
    if (threadIdx.x < static_cast<unsigned>(ranks)) {
      const int r = static_cast<int>(threadIdx.x);
      in[r] = static_cast<const char*>(a.buffers.inputs[r]) + skip;
      if (a.round.two_shot) {
        out[r] = static_cast<char*>(a.buffers.outputs[r]) + skip;
      } else if (r == a.round.me) {
        out[0] = static_cast<char*>(a.buffers.outputs[r]) + skip;
      }
    }
    __syncthreads();
    detail::reduce_to_all(f, range.length, threadIdx.x, blockDim.x);
  }
};

template <class Op, class S>
__global__ void __launch_bounds__(peer::kThreads, 1)
    peer_allreduce_kernel(Arguments a, ReduceToAll<Op, S> f) {
  __shared__ const void* in[kMaxRanks];
  __shared__ void* out[kMaxRanks];
  __shared__ int gave_up;
  const uint64_t start = global_nanoseconds();
  if (threadIdx.x == 0) gave_up = 0;  // published by arrive()'s barrier
  f.fold.inputs = in;
  f.outputs = out;
  Block<Op, S> block{a, f, in, out, &gave_up, start + a.timeout_ns};
  peer::run_block(block, a.round, static_cast<int>(blockIdx.x));
}

}  // namespace

cudaError_t peer_allreduce(DataType dtype, ReduceOp op, const PeerBuffers& buffers,
                           const peer::Round& round, int contributors, double prescale,
                           double postscale, uint64_t timeout_ns, uint64_t* failure,
                           cudaStream_t stream) {
  if (round.ranks < 1 || round.ranks > kMaxRanks || round.me < 0 || round.me >= round.ranks ||
      round.blocks < 1 || round.blocks > peer::kMaxBlocks || contributors < 1 ||
      failure == nullptr) {
    return cudaErrorInvalidValue;
  }
  return detail::visit_dtype(dtype, [&](auto tag) {
    using S = typename decltype(tag)::Type;
    if (round.element_bytes != sizeof(S)) return cudaErrorInvalidValue;
    return detail::visit_op(op, [&](auto op_tag) {
      using C = typename Element<S>::Compute;
      using Op = typename decltype(op_tag)::template Fn<C>;
      using F = ReduceToAll<Op, S>;
      using Scale = typename F::Scale;
      const double factor = ops::result_scale(op, postscale, contributors);
      // The tables are filled per block, in shared memory.
      const F f{Fold<Op, S>{nullptr, round.ranks, prescale != 1.0, static_cast<Scale>(prescale)},
                nullptr, round.two_shot ? round.ranks : 1, factor != 1.0,
                static_cast<Scale>(factor)};
      peer_allreduce_kernel<Op, S><<<round.blocks, peer::kThreads, 0, stream>>>(
          Arguments{buffers, round, timeout_ns, failure}, f);
      return cudaGetLastError();
    });
  });
}

int peer_resident_blocks() {
  int device = 0, processors = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&processors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return processors;
}

}  // namespace ringlet::kernels::cuda
