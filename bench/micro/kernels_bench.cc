// Micro-benchmarks of the CPU kernels: the reduction of one incoming slice
// into a local one (the ring's inner loop), the shared-memory single step
// (reduce_many over k peers), and copies with and without streaming stores.
//
// bytes_per_second counts memory traffic: every byte read plus every byte
// written (reduce: 2 reads + 1 write per element; reduce_many: k + 1; copy: 2),
// so the figures compare directly with the machine's memory bandwidth.
// Sizes are per buffer. Run e.g.
//   kernels_bench --benchmark_min_time=0.2 --benchmark_filter=Copy
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "ringlet/kernels/cpu.h"

namespace {

using ringlet::DataType;
using ringlet::ReduceOp;
namespace cpu = ringlet::kernels::cpu;

// Buffers are touched once before timing so page faults are not measured.
std::vector<unsigned char> make_buffer(size_t bytes, unsigned char fill) {
  return std::vector<unsigned char>(bytes, fill);
}

cpu::Store store_arg(int64_t v) { return v == 0 ? cpu::Store::kNormal : cpu::Store::kStream; }

// Args: bytes per buffer, store (0 normal, 1 stream), ISA (0 baseline, 1 best).
void reduce_sum(benchmark::State& state, DataType dtype) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const cpu::Store store = store_arg(state.range(1));
  cpu::set_isa(state.range(2) == 0 ? cpu::Isa::kBaseline : cpu::best_isa());
  const size_t count = bytes / ringlet::dtype_size(dtype);
  // 0x3c bytes are small finite values for every float format (no NaN paths).
  auto a = make_buffer(bytes, 0x3c), b = make_buffer(bytes, 0x3c), out = make_buffer(bytes, 0);
  for (auto _ : state) {
    cpu::reduce(dtype, ReduceOp::kSum, out.data(), a.data(), b.data(), count, store);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * bytes);
  state.SetLabel(std::string(cpu::to_string(cpu::active_isa())));
  cpu::set_isa(cpu::best_isa());
}

void BM_ReduceSumFloat32(benchmark::State& state) { reduce_sum(state, DataType::kFloat32); }
void BM_ReduceSumBFloat16(benchmark::State& state) { reduce_sum(state, DataType::kBFloat16); }
void BM_ReduceSumFloat16(benchmark::State& state) { reduce_sum(state, DataType::kFloat16); }

void reduce_args(benchmark::internal::Benchmark* b) {
  for (int64_t isa : {1, 0}) {
    for (int64_t store : {0, 1}) {
      for (int64_t bytes = 4 << 10; bytes <= 64 << 20; bytes *= 8) b->Args({bytes, store, isa});
      b->Args({64 << 20, store, isa});
    }
  }
}
BENCHMARK(BM_ReduceSumFloat32)->Apply(reduce_args)->ArgNames({"bytes", "stream", "isa"});
BENCHMARK(BM_ReduceSumBFloat16)->Apply(reduce_args)->ArgNames({"bytes", "stream", "isa"});
BENCHMARK(BM_ReduceSumFloat16)
    ->Args({256 << 10, 0, 1})
    ->Args({64 << 20, 0, 1})
    ->Args({256 << 10, 0, 0})
    ->ArgNames({"bytes", "stream", "isa"});

// Args: bytes per buffer, number of inputs, store.
void BM_ReduceManyFloat32(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t k = static_cast<size_t>(state.range(1));
  const cpu::Store store = store_arg(state.range(2));
  std::vector<std::vector<unsigned char>> inputs;
  std::vector<const void*> pointers;
  for (size_t j = 0; j < k; ++j) inputs.push_back(make_buffer(bytes, 0x3c));
  for (auto& in : inputs) pointers.push_back(in.data());
  auto out = make_buffer(bytes, 0);
  for (auto _ : state) {
    cpu::reduce_many(DataType::kFloat32, ReduceOp::kSum, out.data(), pointers, bytes / 4, store);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * (k + 1) * bytes);
}
BENCHMARK(BM_ReduceManyFloat32)
    ->ArgsProduct({{256 << 10, 16 << 20, 64 << 20}, {2, 4}, {0, 1}})
    ->ArgNames({"bytes", "inputs", "stream"});

// Args: bytes; kind 0 = memcpy, 1 = copy(kNormal), 2 = copy(kStream).
void BM_Copy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const int64_t kind = state.range(1);
  auto src = make_buffer(bytes, 1), dst = make_buffer(bytes, 0);
  for (auto _ : state) {
    if (kind == 0) {
      std::memcpy(dst.data(), src.data(), bytes);
    } else {
      cpu::copy(dst.data(), src.data(), bytes, kind == 1 ? cpu::Store::kNormal : cpu::Store::kStream);
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * bytes);
  state.SetLabel(kind == 0 ? "memcpy" : kind == 1 ? "normal" : "stream");
}
BENCHMARK(BM_Copy)
    ->ArgsProduct({{4 << 10, 256 << 10, 2 << 20, 16 << 20, 64 << 20}, {0, 1, 2}})
    ->ArgNames({"bytes", "kind"});

}  // namespace

BENCHMARK_MAIN();
