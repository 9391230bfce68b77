// A small measurement program for the runtime (not a timed test):
//   ringletrun -np 4 runtime_fusion_bench --tensors 256 --bytes 65536 --iters 20
// Each iteration submits N float allreduces of the given size through the
// runtime (in a different order on each rank) and waits for all of them.
// With --sync it also times the same count of synchronous core::allreduce
// calls on a Communicator of its own (run before the runtime starts).
// Rank 0 prints one line per mode: mean and median per iteration in µs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/collectives/collectives.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/runtime/runtime.h"

using namespace ringlet;
using Clock = std::chrono::steady_clock;

namespace {
void report(int rank, const char* mode, std::vector<double> us, int tensors, size_t bytes) {
  if (rank != 0) return;
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  std::printf("%-8s tensors=%d bytes=%zu iters=%zu mean_us=%.1f median_us=%.1f min_us=%.1f\n", mode, tensors,
              bytes, us.size(), sum / us.size(), us[us.size() / 2], us.front());
  std::fflush(stdout);
}
}  // namespace

int main(int argc, char** argv) {
  int tensors = 256, iters = 20, warmup = 3;
  size_t bytes = 65536;
  bool sync = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tensors" && i + 1 < argc) tensors = std::atoi(argv[++i]);
    else if (a == "--bytes" && i + 1 < argc) bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--sync") sync = true;
    else {
      std::fprintf(stderr, "usage: %s [--tensors N] [--bytes B] [--iters I] [--warmup W] [--sync]\n", argv[0]);
      return 2;
    }
  }
  const size_t count = bytes / sizeof(float);
  std::vector<std::vector<float>> bufs(tensors, std::vector<float>(count, 1.0f));
  const auto config = core::load_config();
  const auto launch = core::detect_launch();

  if (sync) {
    auto comm = core::Communicator::create(config, launch);
    std::vector<double> us;
    for (int it = 0; it < warmup + iters; ++it) {
      core::barrier(*comm);
      const auto t0 = Clock::now();
      for (auto& b : bufs) core::allreduce(*comm, b.data(), b.data(), count, DataType::kFloat32, ReduceOp::kSum);
      const double dt = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      if (it >= warmup) us.push_back(dt);
    }
    report(comm->rank(), "sync", us, tensors, bytes);
    core::barrier(*comm);
    comm.reset();
  }

  core::runtime::Runtime rt(core::Communicator::create(config, launch));
  std::mt19937 rng(17 + rt.rank());
  std::vector<int> order(tensors);
  for (int i = 0; i < tensors; ++i) order[i] = i;
  std::vector<core::runtime::Handle> h(tensors);
  std::vector<double> us, enqueue_us, first_us;  // whole iteration; submitting; first handle done
  std::vector<std::string> names;
  for (int i = 0; i < tensors; ++i) names.push_back("bench." + std::to_string(i));
  for (int it = 0; it < warmup + iters; ++it) {
    std::shuffle(order.begin(), order.end(), rng);
    // Line the ranks up so that each iteration measures the runtime, not skew.
    int one = 1;
    rt.synchronize(rt.enqueue_allreduce("bench.align", &one, &one, {1}, DataType::kInt32));
    const auto t0 = Clock::now();
    for (int i : order) {
      h[i] = rt.enqueue_allreduce(names[i], bufs[i].data(), bufs[i].data(), {static_cast<int64_t>(count)},
                                  DataType::kFloat32);
    }
    const double enq = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    rt.synchronize(h[order[0]]);
    const double first = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    for (int i = 0; i < tensors; ++i) {
      if (i != order[0]) rt.synchronize(h[i]);
    }
    const double dt = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (it >= warmup) {
      us.push_back(dt);
      enqueue_us.push_back(enq);
      first_us.push_back(first);
    }
  }
  report(rt.rank(), "enqueue", enqueue_us, tensors, bytes);
  report(rt.rank(), "first", first_us, tensors, bytes);
  report(rt.rank(), "runtime", us, tensors, bytes);
  const auto s = rt.stats();
  if (rt.rank() == 0) {
    std::printf("stats: cycles=%llu collectives=%llu tensors=%llu fused=%llu overflows=%llu threshold=%lld\n",
                (unsigned long long)s.cycles, (unsigned long long)s.collectives, (unsigned long long)s.tensors,
                (unsigned long long)s.fused_tensors, (unsigned long long)s.negotiation_overflows,
                (long long)config.fusion_threshold);
  }
  rt.shutdown();
  return 0;
}
