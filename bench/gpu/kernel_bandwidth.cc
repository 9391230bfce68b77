// gpu_kernel_bandwidth: the CUDA kernels' memory bandwidth beside a
// device-to-device cudaMemcpy of the same size, timed with CUDA events in the
// same run, so that "at memory speed" is a ratio measured on the device at
// hand. Bandwidth counts bytes read plus bytes written (the copy moves 2x its
// size). Exit status: 0 measured, 77 no CUDA device (a skip, with the reason
// printed), 1 a CUDA error.
//
//   gpu_kernel_bandwidth [--mib 64,256] [--iters 20] [--target 0.85]
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ringlet/kernels/cuda.h"

namespace {

using ringlet::DataType;
using ringlet::ReduceOp;
namespace cuda = ringlet::kernels::cuda;

[[noreturn]] void fail(const char* what, cudaError_t err) {
  std::fprintf(stderr, "gpu_kernel_bandwidth: %s: %s\n", what, cudaGetErrorString(err));
  std::exit(1);
}
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail(what, err);
}

struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  template <class T = void>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// Milliseconds per call of `launch`, the mean over `iters` after two warm-ups.
double time_ms(cudaStream_t stream, int iters, const std::function<cudaError_t()>& launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 2; ++i) check(launch(), "warm-up launch");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) check(launch(), "launch");
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iters;
}

std::vector<size_t> parse_sizes(const char* text) {
  std::vector<size_t> mib;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(p, &end, 10);
    if (end == p || v == 0) {
      std::fprintf(stderr, "gpu_kernel_bandwidth: --mib takes sizes like 64,256, not '%s'\n", text);
      std::exit(2);
    }
    mib.push_back(v);
    p = *end == ',' ? end + 1 : end;
  }
  return mib;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes_mib = {64, 256};
  int iters = 20;
  double target = 0.85;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      sizes_mib = parse_sizes(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
      if (iters < 1) {
        std::fprintf(stderr, "gpu_kernel_bandwidth: --iters takes a count of 1 or more\n");
        return 2;
      }
    } else if (a == "--target" && i + 1 < argc) {
      target = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: gpu_kernel_bandwidth [--mib 64,256] [--iters N] [--target F]\n");
      return 2;
    }
  }
  int devices = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount reported 0");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# device 0: %s, %d multiprocessors\n", prop.name, prop.multiProcessorCount);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  int below = 0;
  std::printf("%-28s %10s %12s %10s %8s\n", "kernel", "MiB", "time_us", "GB/s", "of_copy");
  for (size_t mib : sizes_mib) {
    const size_t bytes = mib << 20;
    const size_t floats = bytes / 4;
    Device a(bytes), b(bytes), c(bytes), d(bytes), e(bytes);
    check(cudaMemset(a.p, 0, bytes), "cudaMemset");
    check(cudaMemset(b.p, 0, bytes), "cudaMemset");
    check(cudaMemset(c.p, 0, bytes), "cudaMemset");
    check(cudaMemset(d.p, 0, bytes), "cudaMemset");

    // A fusion buffer of 64 equal tensors in slots of c, their own memory in a.
    constexpr int kTensors = 64;
    std::vector<cuda::FusedSegment> segs;
    for (int t = 0; t < kTensors; ++t) {
      const size_t n = floats / kTensors;
      segs.push_back({a.as<float>() + t * n, t * n, n});
    }
    Device table(segs.size() * sizeof(cuda::FusedSegment));
    check(cudaMemcpy(table.p, segs.data(), segs.size() * sizeof segs[0], cudaMemcpyHostToDevice),
          "cudaMemcpy");
    const auto* seg_table = table.as<const cuda::FusedSegment>();
    const void* inputs_host[4] = {a.p, b.p, c.p, d.p};
    Device inputs(sizeof inputs_host);
    check(cudaMemcpy(inputs.p, inputs_host, sizeof inputs_host, cudaMemcpyHostToDevice),
          "cudaMemcpy");
    // Two ranks' allreduce between their own buffers: inputs a, b; outputs c, d.
    void* outputs_host[2] = {c.p, d.p};
    Device outputs(sizeof outputs_host);
    check(cudaMemcpy(outputs.p, outputs_host, sizeof outputs_host, cudaMemcpyHostToDevice),
          "cudaMemcpy");

    struct Row {
      const char* name;
      double moved;  // bytes read + written per call
      std::function<cudaError_t()> launch;
    };
    const size_t elems = floats;
    const std::vector<Row> rows = {
        {"cudaMemcpy device-to-device", 2.0 * bytes,
         [&] { return cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, stream); }},
        {"pack 64 tensors (x1)", 2.0 * bytes,
         [&] {
           return cuda::pack(DataType::kFloat32, c.p, seg_table, kTensors, elems, 1.0, stream);
         }},
        {"pack 64 tensors (x0.5)", 2.0 * bytes,
         [&] {
           return cuda::pack(DataType::kFloat32, c.p, seg_table, kTensors, elems, 0.5, stream);
         }},
        {"unpack 64 tensors (x1)", 2.0 * bytes,
         [&] {
           return cuda::unpack(DataType::kFloat32, c.p, seg_table, kTensors, elems, 1.0, stream);
         }},
        {"reduce sum fp32 in place", 3.0 * bytes,
         [&] {
           return cuda::reduce(DataType::kFloat32, ReduceOp::kSum, b.p, b.p, a.p, elems, stream);
         }},
        {"reduce sum bf16 in place", 3.0 * bytes,
         [&] {
           return cuda::reduce(DataType::kBFloat16, ReduceOp::kSum, b.p, b.p, a.p, elems * 2,
                               stream);
         }},
        {"reduce max fp16 in place", 3.0 * bytes,
         [&] {
           return cuda::reduce(DataType::kFloat16, ReduceOp::kMax, b.p, b.p, a.p, elems * 2,
                               stream);
         }},
        {"reduce_many 4 inputs fp32", 5.0 * bytes,
         [&] {
           return cuda::reduce_many(DataType::kFloat32, ReduceOp::kSum, e.p,
                                    inputs.as<const void* const>(), 4, elems, stream);
         }},
        {"reduce_many_to_all 2 to 2", 4.0 * bytes,
         [&] {
           return cuda::reduce_many_to_all(DataType::kFloat32, ReduceOp::kAvg,
                                           outputs.as<void* const>(), 2,
                                           inputs.as<const void* const>(), 2, elems, 2, 1.0, 1.0,
                                           stream);
         }},
        {"scale fp32", 2.0 * bytes,
         [&] { return cuda::scale(DataType::kFloat32, b.p, elems, 0.5, stream); }},
        {"scale int32", 2.0 * bytes,
         [&] { return cuda::scale(DataType::kInt32, b.p, elems, 1.0 / 3, stream); }},
        {"float_to_half", 1.5 * bytes,
         [&] { return cuda::float_to_half(d.as<uint16_t>(), a.as<float>(), elems, stream); }},
        {"bfloat16_to_float", 3.0 * bytes,
         [&] { return cuda::bfloat16_to_float(e.as<float>(), d.as<uint16_t>(), elems, stream); }},
    };
    double copy_gbps = 0;
    for (const Row& row : rows) {
      const double ms = time_ms(stream, iters, row.launch);
      const double gbps = row.moved / (ms * 1e-3) / 1e9;
      if (copy_gbps == 0) copy_gbps = gbps;
      const double ratio = gbps / copy_gbps;
      const bool low = ratio < target;
      below += low ? 1 : 0;
      std::printf("%-28s %10zu %12.1f %10.1f %7.0f%%%s\n", row.name, mib, ms * 1e3, gbps,
                  ratio * 100, low ? "  below target" : "");
    }
  }
  std::printf("# %d row(s) below %.0f%% of the copy's bandwidth\n", below, target * 100);
  cudaStreamDestroy(stream);
  return 0;
}
