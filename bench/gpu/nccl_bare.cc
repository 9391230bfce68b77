// gpu_nccl_bare: ncclAllReduce alone, one rank on one device, float sum, so
// that the runtime's own cost is the difference between this and
// `ringlet-bench allreduce --device cuda --backend nccl` at one rank, on the
// same device in the same run (tests/gpu/device-check.sh prints both). Each
// timed op is the launch and a cudaStreamSynchronize, measured on the host
// as ringlet-bench measures a call and its wait; percentiles as there
// (bench/ringlet_bench/percentile.h). Out of place, then in place.
// Exit status: 0 measured, 77 no CUDA device (a skip, with the reason
// printed), 1 a CUDA or NCCL error, 2 usage.
//
//   gpu_nccl_bare [-b 1K] [-e 256M] [-f 4] [-n 100] [-w 10]
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../ringlet_bench/percentile.h"

namespace {

using Clock = std::chrono::steady_clock;

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "gpu_nccl_bare: %s: %s\n", what, cudaGetErrorString(err));
  std::exit(1);
}
void check(ncclResult_t res, const char* what) {
  if (res == ncclSuccess) return;
  std::fprintf(stderr, "gpu_nccl_bare: %s: %s\n", what, ncclGetErrorString(res));
  std::exit(1);
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gpu_nccl_bare: %s\nusage: gpu_nccl_bare [-b 1K] [-e 256M] [-f 4] [-n ITERS] "
               "[-w WARMUP]\n",
               why.c_str());
  std::exit(2);
}

// "64", "1K", "256M", "1G" (powers of 1024, as ringlet-bench reads them).
size_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) usage("not a size: '" + text + "'");
  const std::string suffix(end);
  const int shift = suffix.empty()  ? 0
                    : suffix == "K" ? 10
                    : suffix == "M" ? 20
                    : suffix == "G" ? 30
                                    : -1;
  if (shift < 0) usage("not a size: '" + text + "'");
  return static_cast<size_t>(v) << shift;
}

int parse_count(const std::string& text, int least) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || v < least) usage("not a count: '" + text + "'");
  return static_cast<int>(v);
}

// Microseconds of each of `iters` timed allreduces after `warmup` untimed.
std::vector<double> time_allreduce(ncclComm_t comm, cudaStream_t stream, const float* send,
                                   float* recv, size_t count, int warmup, int iters) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < warmup + iters; ++i) {
    const auto start = Clock::now();
    check(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream), "ncclAllReduce");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const double t = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= warmup) us.push_back(t);
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  size_t min_bytes = 1024, max_bytes = size_t{256} << 20;
  int factor = 4, iters = 100, warmup = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("'" + a + "' takes a value");
    const std::string v = argv[++i];
    if (a == "-b") {
      min_bytes = parse_bytes(v);
    } else if (a == "-e") {
      max_bytes = parse_bytes(v);
    } else if (a == "-f") {
      factor = parse_count(v, 2);
    } else if (a == "-n") {
      iters = parse_count(v, 1);
    } else if (a == "-w") {
      warmup = parse_count(v, 0);
    } else {
      usage("unknown flag '" + a + "'");
    }
  }
  if (min_bytes < sizeof(float) || min_bytes > max_bytes)
    usage("-b must be at least 4 and at most -e");
  int devices = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount reported 0");
    return 77;
  }
  int version = 0;
  check(ncclGetVersion(&version), "ncclGetVersion");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  check(cudaSetDevice(0), "cudaSetDevice");
  ncclComm_t comm = nullptr;
  const int device = 0;
  check(ncclCommInitAll(&comm, 1, &device), "ncclCommInitAll");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  void* send = nullptr;
  void* recv = nullptr;
  check(cudaMalloc(&send, max_bytes), "cudaMalloc");
  check(cudaMalloc(&recv, max_bytes), "cudaMalloc");
  check(cudaMemset(send, 0, max_bytes), "cudaMemset");
  check(cudaMemset(recv, 0, max_bytes), "cudaMemset");

  std::printf("# gpu_nccl_bare: ncclAllReduce, 1 rank, float sum, NCCL %d, device 0: %s\n", version,
              prop.name);
  std::printf(
      "# time: launch + cudaStreamSynchronize on the host, %d iterations after %d warm-up\n", iters,
      warmup);
  std::printf("%12s %10s %10s %10s %10s\n", "bytes", "p50_us", "p99_us", "ip_p50_us", "ip_p99_us");
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= static_cast<size_t>(factor)) {
    const size_t count = bytes / sizeof(float);
    auto* in = static_cast<const float*>(send);
    const std::vector<double> oop =
        time_allreduce(comm, stream, in, static_cast<float*>(recv), count, warmup, iters);
    const std::vector<double> ip = time_allreduce(comm, stream, static_cast<float*>(recv),
                                                  static_cast<float*>(recv), count, warmup, iters);
    using ringlet::bench::percentile;
    std::printf("%12zu %10.2f %10.2f %10.2f %10.2f\n", bytes, percentile(oop, 50),
                percentile(oop, 99), percentile(ip, 50), percentile(ip, 99));
    std::fflush(stdout);
  }
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(stream);
  ncclCommDestroy(comm);
  return 0;
}
