// One rank of the CUDA stand-in tests (standin_check.py): a program as users
// write them, on the public C++ API, whose GPU is cuda:(rank + 1), run by
// ringletrun with the recording stand-in for CUDA and NCCL preloaded
// (tests/gpu/cuda_standin), so that the device path's control flow runs on
// a machine without a GPU. What it checks is mostly in the stand-in's
// report, read by the driver: which devices got a context, where NCCL ran,
// which handles were opened and closed.
//
//   standin_rank collectives [--check-values]
//     The main thread makes cuda:(rank + 1) current and allocates the
//     tensors there; every device collective (allreduce of one tensor and of
//     a fused group, broadcast, allgather of blocks that differ and of equal
//     ones, reducescatter, alltoall) runs
//     once from the main thread and once from a thread that never chose a
//     device (sitting on device 0 without a context, as a framework's worker
//     thread may), whose results are let go on another such thread. Then a
//     process set of this rank alone runs an allreduce and is removed: its
//     NCCL communicator must go with it (HOROVOD_GPU_OPERATIONS=NCCL).
//     Results are not checked by default: the stand-in's kernels and NCCL
//     calls do nothing, so what they would compute is meaningless here.
//     --check-values checks the collectives that only move bytes
//     (broadcast, allgather, alltoall), for runs where those go through host
//     memory (RING between hosts: copies and the host's own collectives, all
//     real); an allreduce packs with a kernel even there.
//   standin_rank lost-peer
//     Under RINGLET_STANDIN_NCCL_HANG=1 (a NCCL collective never ends), both
//     ranks start an allreduce; rank 1 kills itself once it has waited a
//     second, and rank 0 reports how long its allreduce took to fail and
//     with what: "STANDIN-RESULT seconds=S code=C shutdown_seconds=T".
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/ringlet.h"

namespace {

using Clock = std::chrono::steady_clock;

void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(e));
  }
}

// Float tensors on the current device (the main thread's), filled from the host.
struct DeviceFloats {
  DeviceFloats(const std::vector<float>& host, std::vector<int64_t> shape)
      : n(host.size()), shape(std::move(shape)) {
    cuda(cudaMalloc(&p, n * sizeof(float) + 16), "cudaMalloc");
    cuda(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice),
         "cudaMemcpy to the device");
  }
  ~DeviceFloats() { (void)cudaFree(p); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  ringlet::Tensor tensor(int device) const {
    return {p, ringlet::DataType::kFloat32, shape, device};
  }
  std::vector<float> read() const { return read_floats(p, n); }
  static std::vector<float> read_floats(const void* at, size_t count) {
    std::vector<float> h(count);
    cuda(cudaMemcpy(h.data(), at, count * sizeof(float), cudaMemcpyDeviceToHost),
         "cudaMemcpy to the host");
    return h;
  }
  void* p = nullptr;
  size_t n;
  std::vector<int64_t> shape;
};

std::vector<float> fill(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

constexpr int64_t kWidth = 4;  // floats per row of the row-shaped tensors
constexpr int64_t kElements = 1024;
constexpr int64_t kBroadcastElements = 777;

// allgather: rank r gives (r + 1) rows of r * 1000 + i.
int64_t gather_rows(int r) { return r + 1; }
// alltoall: rank r sends j + 1 rows to rank j, valued r * 100 + j * 10 + i.
float alltoall_value(int from, int to, int64_t i) {
  return static_cast<float>(from * 100 + to * 10) + static_cast<float>(i);
}

// One round of every collective: the inputs (allocated on the main thread's
// device) and, once submitted, the results.
struct Round {
  Round(int rank, int size, int device) : rank(rank), size(size), device(device) {
    sum_in = std::make_unique<DeviceFloats>(fill(kElements, static_cast<float>(rank + 1)),
                                            std::vector<int64_t>{kElements});
    sum_out = std::make_unique<DeviceFloats>(std::vector<float>(kElements, -1.0f),
                                             std::vector<int64_t>{kElements});
    for (int k = 0; k < 2; ++k) {
      group.push_back(std::make_unique<DeviceFloats>(fill(100 + 28 * k, static_cast<float>(k)),
                                                     std::vector<int64_t>{100 + 28 * k}));
    }
    bcast = std::make_unique<DeviceFloats>(
        rank == 1 ? fill(kBroadcastElements, 0.5f) : std::vector<float>(kBroadcastElements, 0.0f),
        std::vector<int64_t>{kBroadcastElements});
    gather_in = std::make_unique<DeviceFloats>(
        fill(gather_rows(rank) * kWidth, static_cast<float>(rank * 1000)),
        std::vector<int64_t>{gather_rows(rank), kWidth});
    gather_even_in = std::make_unique<DeviceFloats>(
        fill(2 * kWidth, static_cast<float>(rank * 1000)), std::vector<int64_t>{2, kWidth});
    scatter_in = std::make_unique<DeviceFloats>(fill(2 * size * kWidth, static_cast<float>(rank)),
                                                std::vector<int64_t>{2 * size, kWidth});
    std::vector<float> send;
    for (int j = 0; j < size; ++j) {
      splits.push_back(j + 1);
      for (int64_t i = 0; i < (j + 1) * kWidth; ++i) send.push_back(alltoall_value(rank, j, i));
    }
    alltoall_in = std::make_unique<DeviceFloats>(
        send, std::vector<int64_t>{static_cast<int64_t>(send.size()) / kWidth, kWidth});
  }

  // Submits every collective and waits for each (any thread).
  void run(const std::string& tag) {
    using ringlet::ReduceOp;
    const int d = device;
    std::vector<int64_t> h;
    h.push_back(ringlet::allreduce_async(tag + ".sum", sum_in->tensor(d), sum_out->tensor(d),
                                         ReduceOp::kSum));
    std::vector<ringlet::Tensor> ins, outs;
    std::vector<std::string> names;
    for (size_t k = 0; k < group.size(); ++k) {
      ins.push_back(group[k]->tensor(d));
      outs.push_back(group[k]->tensor(d));
      names.push_back(tag + ".group" + std::to_string(k));
    }
    for (int64_t g : ringlet::grouped_allreduce_async(names, ins, outs, ReduceOp::kAvg)) {
      h.push_back(g);
    }
    h.push_back(ringlet::broadcast_async(tag + ".bcast", bcast->tensor(d), 1));
    h.push_back(ringlet::allgather_async(tag + ".gather", gather_in->tensor(d)));
    h.push_back(ringlet::allgather_async(tag + ".gather_even", gather_even_in->tensor(d)));
    h.push_back(
        ringlet::reducescatter_async(tag + ".scatter", scatter_in->tensor(d), ReduceOp::kSum));
    h.push_back(ringlet::alltoall_async(tag + ".alltoall", alltoall_in->tensor(d), splits));
    for (int64_t handle : h) results.push_back(ringlet::synchronize(handle));
  }

  // The collectives that only move bytes: only where they went through host
  // memory (the caller knows).
  void check_values() const {
    expect("broadcast", bcast->read(), fill(kBroadcastElements, 0.5f));
    // results: sum, group0, group1, bcast, gather, gather_even, scatter,
    // alltoall.
    std::vector<float> gather_want, gather_even_want;
    for (int r = 0; r < size; ++r) {
      const std::vector<float> part = fill(gather_rows(r) * kWidth, static_cast<float>(r * 1000));
      gather_want.insert(gather_want.end(), part.begin(), part.end());
      const std::vector<float> even = fill(2 * kWidth, static_cast<float>(r * 1000));
      gather_even_want.insert(gather_even_want.end(), even.begin(), even.end());
    }
    expect("allgather", device_floats(results.at(4)), gather_want);
    expect("allgather (equal blocks)", device_floats(results.at(5)), gather_even_want);
    const ringlet::Result& exchanged = results.at(7);
    std::vector<float> alltoall_want;
    for (int j = 0; j < size; ++j) {
      for (int64_t i = 0; i < (rank + 1) * kWidth; ++i) {
        alltoall_want.push_back(alltoall_value(j, rank, i));
      }
    }
    expect("alltoall", device_floats(exchanged), alltoall_want);
  }

  static std::vector<float> device_floats(const ringlet::Result& r) {
    if (r.device_data == nullptr) throw std::runtime_error("a result has no device data");
    return DeviceFloats::read_floats(r.device_data.get(), r.device_bytes / sizeof(float));
  }

  void expect(const char* what, const std::vector<float>& got,
              const std::vector<float>& want) const {
    if (got.size() < want.size()) {
      throw std::runtime_error(std::string(what) + ": " + std::to_string(got.size()) +
                               " elements, expected " + std::to_string(want.size()));
    }
    for (size_t i = 0; i < want.size(); ++i) {
      if (got[i] != want[i]) {
        throw std::runtime_error(std::string(what) + " on rank " + std::to_string(rank) +
                                 ": element " + std::to_string(i) + " is " +
                                 std::to_string(got[i]) + ", expected " + std::to_string(want[i]));
      }
    }
  }

  const int rank, size, device;
  std::unique_ptr<DeviceFloats> sum_in, sum_out, bcast, gather_in, gather_even_in, scatter_in,
      alltoall_in;
  std::vector<std::unique_ptr<DeviceFloats>> group;
  std::vector<int64_t> splits;
  std::vector<ringlet::Result> results;
};

// The stand-in's counters (-2 where it is not loaded).
long standin_count(const char* what) {
  using Count = long (*)(const char*);
  auto fn = reinterpret_cast<Count>(dlsym(RTLD_DEFAULT, "ringlet_standin_count"));
  return fn ? fn(what) : -2;
}

int collectives(bool check_values) {
  ringlet::init();
  const int rank = ringlet::rank(), size = ringlet::size(), device = rank + 1;
  cuda(cudaSetDevice(device), "cudaSetDevice");
  std::printf("rank %d on cuda:%d\n", rank, device);

  Round main_round(rank, size, device);
  main_round.run("main");
  if (check_values) main_round.check_values();

  // A thread that never chose a device submits, waits, and hands the
  // results back; another such thread lets them go.
  Round worker_round(rank, size, device);
  std::exception_ptr failed;
  std::thread worker([&] {
    try {
      worker_round.run("worker");
    } catch (...) {
      failed = std::current_exception();
    }
  });
  worker.join();
  if (failed) std::rethrow_exception(failed);
  if (check_values) worker_round.check_values();
  std::thread releaser([results = std::move(worker_round.results)]() mutable { results.clear(); });
  releaser.join();

  // A process set of this rank alone: its NCCL communicator (if NCCL runs
  // it) goes once the set is removed.
  const long live_before = standin_count("live_communicators");
  std::vector<int> sets;
  for (int r = 0; r < size; ++r) sets.push_back(ringlet::add_process_set({r}));
  DeviceFloats alone(fill(64, 1.0f), {64});
  ringlet::synchronize(ringlet::allreduce_async("alone", alone.tensor(device), alone.tensor(device),
                                                ringlet::ReduceOp::kSum, 1.0, 1.0, sets[rank]));
  const long live_with_set = standin_count("live_communicators");
  for (int id : sets) ringlet::remove_process_set(id);
  const long live_after = standin_count("live_communicators");
  std::printf("STANDIN-SETS live_before=%ld live_with_set=%ld live_after=%ld\n", live_before,
              live_with_set, live_after);

  ringlet::shutdown();
  std::printf("rank %d done\n", rank);
  return 0;
}

int lost_peer() {
  ringlet::init();
  const int rank = ringlet::rank(), device = rank + 1;
  cuda(cudaSetDevice(device), "cudaSetDevice");
  DeviceFloats x(fill(kElements, 1.0f), {kElements});
  const auto start = Clock::now();
  const int64_t h =
      ringlet::allreduce_async("lost", x.tensor(device), x.tensor(device), ringlet::ReduceOp::kSum);
  if (rank != 0) {
    if (ringlet::wait_for(h, std::chrono::seconds(1))) {
      std::fprintf(stderr, "rank %d: the allreduce ended although the stand-in hangs NCCL\n", rank);
      return 3;
    }
    std::printf("rank %d: the allreduce hangs, as the stand-in says: this rank dies now\n", rank);
    std::fflush(stdout);
    std::raise(SIGKILL);
  }
  int code = 0;
  try {
    ringlet::synchronize(h);
    std::fprintf(stderr, "rank 0: the allreduce succeeded although its peer died\n");
    return 3;
  } catch (const ringlet::Error& e) {
    code = static_cast<int>(e.code());
    std::printf("rank 0: the allreduce failed: %s\n", e.what());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto down = Clock::now();
  ringlet::shutdown();
  const double shutdown_seconds = std::chrono::duration<double>(Clock::now() - down).count();
  std::printf("STANDIN-RESULT seconds=%.3f code=%d shutdown_seconds=%.3f\n", seconds, code,
              shutdown_seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "collectives") {
      return collectives(argc > 2 && std::strcmp(argv[2], "--check-values") == 0);
    }
    if (mode == "lost-peer") return lost_peer();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "standin_rank %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: standin_rank collectives [--check-values] | lost-peer\n");
  return 2;
}
