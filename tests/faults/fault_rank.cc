// One rank of the fault matrix, through the public API as a user would run
// it: `fault_rank CASE TOKEN` under ringletrun -np 3. The last rank (the
// culprit) misbehaves; the others (the survivors) must fail with a clear
// error. TOKEN only marks the processes so that the test can look for
// leftovers.
//
// Cases, the culprit's part:
//   kill-allgather, kill-broadcast, kill-alltoall: SIGKILL after submitting a
//       step of that collective, while the others are inside it;
//   kill-sync-allgather, ...: SIGKILL instead of a blocking call of it, which
//       the others make (the direct path, without the runtime);
//   exit: returns from main between collectives without shutdown();
//   exit-shutdown: the same after shutdown();
//   stop: SIGSTOP after submitting a step (only the deadline can tell);
//   never-starts: never calls init();
// and one where rank 0, which holds the rendezvous store, is the culprit:
//   store-dies: rank 0 is SIGKILLed during init while the last rank has not
//       arrived yet.
//
// Every rank first prints "JOB <job id> RANK <rank>". A survivor that fails
// prints "FAULT <rank> <seconds> <code>: <message>" (seconds since the step
// or the init it failed in began) and exits 3; a loop that ends exits 4,
// which it must not.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/ringlet.h"

namespace {

using Clock = std::chrono::steady_clock;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int report(int rank, Clock::time_point began, const ringlet::Error& e) {
  std::printf("FAULT %d %.3f %s: %s\n", rank, since(began), ringlet::to_string(e.code()), e.what());
  std::fflush(stdout);
  return 3;
}

constexpr int kSteps = 100000;
constexpr int kCulpritStep = 10;
constexpr int64_t kRows = 4096;
constexpr int64_t kWidth = 16;

// One step of `kind`: four named collectives, each rank's own order.
std::vector<int64_t> submit(const std::string& kind, int step, int rank, int size,
                            std::vector<std::vector<float>>& bufs) {
  std::vector<int64_t> h;
  for (int i = 0; i < 4; ++i) {
    const int t = (i + rank) % 4;
    const std::string name = kind + "." + std::to_string(t);
    auto& b = bufs[static_cast<size_t>(t)];
    ringlet::Tensor tensor{b.data(), ringlet::DataType::kFloat32, {kRows, kWidth}, -1};
    if (kind == "allgather") {
      h.push_back(ringlet::allgather_async(name, tensor));
    } else if (kind == "broadcast") {
      h.push_back(ringlet::broadcast_async(name, tensor, (step + t) % size));
    } else if (kind == "alltoall") {
      // Uneven splits: one row to each other rank, the rest to rank 0.
      std::vector<int64_t> splits(static_cast<size_t>(size), 1);
      splits[0] = kRows - (size - 1);
      h.push_back(ringlet::alltoall_async(name, tensor, splits));
    } else {
      h.push_back(ringlet::allreduce_async(name, tensor, tensor, ringlet::ReduceOp::kSum));
    }
  }
  return h;
}

// One blocking call of `kind` (before any asynchronous call, these take the
// direct path, without the runtime).
void blocking(const std::string& kind, int step, int size, std::vector<float>& in,
              std::vector<float>& out) {
  const size_t n = in.size();
  if (kind == "allgather") {
    std::vector<size_t> counts(static_cast<size_t>(size), n / size);
    ringlet::allgather(in.data(), out.data(), counts, ringlet::DataType::kFloat32);
  } else if (kind == "broadcast") {
    ringlet::broadcast(in.data(), n, ringlet::DataType::kFloat32, step % size);
  } else if (kind == "alltoall") {
    std::vector<size_t> counts(static_cast<size_t>(size), n / size);
    ringlet::alltoall(in.data(), counts, out.data(), counts, ringlet::DataType::kFloat32);
  } else {
    ringlet::allreduce(in.data(), out.data(), n, ringlet::DataType::kFloat32);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fault_rank CASE TOKEN\n");
    return 2;
  }
  const std::string what = argv[1];
  const int rank = env_int("RINGLET_RANK");
  const int size = env_int("RINGLET_SIZE");
  const int culprit = what == "store-dies" ? 0 : size - 1;
  const char* job = std::getenv("RINGLET_JOB_ID");
  std::printf("JOB %s RANK %d\n", job ? job : "", rank);
  std::fflush(stdout);

  if (what == "never-starts" && rank == culprit) {
    ::sleep(60);  // ringletrun stops it once the others have failed
    return 5;
  }
  if (what == "store-dies") {
    if (rank == 0) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        ::raise(SIGKILL);
      }).detach();
    }
    // The last rank arrives after rank 0 is gone.
    if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }

  auto began = Clock::now();
  try {
    ringlet::init();
  } catch (const ringlet::Error& e) {
    return report(rank, began, e);
  }
  if (what == "store-dies") {
    std::printf("rank %d: init succeeded without rank 0's store\n", rank);
    return 4;
  }

  std::string kind = "allreduce";
  if (what.rfind("kill-", 0) == 0) kind = what.substr(5);
  if (kind.rfind("sync-", 0) == 0) {
    kind = kind.substr(5);
    std::vector<float> in(kRows * kWidth, 1.0f), out(in.size());
    for (int step = 0; step < kSteps; ++step) {
      if (rank == culprit && step == kCulpritStep) ::raise(SIGKILL);
      began = Clock::now();
      try {
        blocking(kind, step, size, in, out);
      } catch (const ringlet::Error& e) {
        return report(rank, began, e);
      }
    }
    return 4;
  }
  std::vector<std::vector<float>> bufs(4, std::vector<float>(kRows * kWidth, 1.0f));
  for (int step = 0; step < kSteps; ++step) {
    began = Clock::now();
    std::vector<int64_t> handles;
    try {
      handles = submit(kind, step, rank, size, bufs);
    } catch (const ringlet::Error& e) {
      return report(rank, began, e);
    }
    if (rank == culprit && step == kCulpritStep) {
      if (what.rfind("kill-", 0) == 0) ::raise(SIGKILL);
      if (what == "stop") ::raise(SIGSTOP);  // ringletrun kills it at the end
    }
    try {
      for (int64_t h : handles) ringlet::synchronize(h);
    } catch (const ringlet::Error& e) {
      return report(rank, began, e);
    }
    if (rank == culprit && step == kCulpritStep) {
      if (what == "exit") return 0;  // no shutdown(): the process just ends
      if (what == "exit-shutdown") {
        ringlet::shutdown();
        return 0;
      }
    }
  }
  return 4;
}
