// One rank of the namespaced-hosts tests (test_multihost.py), for what a test
// must watch while the job runs:
//
//   hosts_rank loop        allreduces until one fails, then prints
//                          "LOST <rank>: <error>" and exits 3
//   hosts_rank hold FILE   one allreduce, then waits until FILE exists (60 s
//                          at most: exits 4 then), one more allreduce, exit 0
//
// Both print "READY <rank> <host name>" once the first allreduce gave the
// right sum: by then every rank has met the others and its links carry data.
// Every sum is checked; a wrong one prints "WRONG <rank> ..." and exits 1. A
// failed init() prints "INIT FAILED: <error>" and exits 5.
// The collectives go through the runtime (init_with_runtime), as a framework's
// do, so a lost peer fails every survivor's pending work naming that peer.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/ringlet.h"

namespace {

constexpr size_t kCount = 1 << 16;

// Every rank contributes rank + 1 + step in each element: the sum is known.
bool allreduce_checked(int step) {
  const int n = ringlet::size();
  std::vector<float> x(kCount, static_cast<float>(ringlet::rank() + 1 + step));
  ringlet::allreduce(x.data(), x.data(), x.size(), ringlet::DataType::kFloat32);
  const float want = static_cast<float>(n * (n + 1) / 2 + n * step);
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != want) {
      std::printf("WRONG %d step %d element %zu: %g, want %g\n", ringlet::rank(), step, i, x[i],
                  want);
      std::fflush(stdout);
      return false;
    }
  }
  return true;
}

void say_ready() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::printf("READY %d %s\n", ringlet::rank(), host);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (!(mode == "loop" && argc == 2) && !(mode == "hold" && argc == 3)) {
    std::fprintf(stderr, "usage: hosts_rank loop | hosts_rank hold FILE\n");
    return 2;
  }
  try {
    ringlet::init_with_runtime();
  } catch (const ringlet::Error& e) {
    std::printf("INIT FAILED: %s\n", e.what());
    return 5;
  }
  if (mode == "hold") {
    if (!allreduce_checked(0)) return 1;
    say_ready();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(argv[2])) {
      if (std::chrono::steady_clock::now() > give_up) {
        std::printf("hosts_rank %d: %s did not appear within 60 s\n", ringlet::rank(), argv[2]);
        return 4;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!allreduce_checked(1)) return 1;
    ringlet::shutdown();
    return 0;
  }
  for (int step = 0;; ++step) {
    try {
      if (!allreduce_checked(step % 1000)) return 1;
    } catch (const ringlet::Error& e) {
      std::printf("LOST %d: %s\n", ringlet::rank(), e.what());
      std::fflush(stdout);
      return 3;
    }
    if (step == 0) say_ready();
  }
}
