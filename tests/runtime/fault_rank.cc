// One rank of the runtime fault test (three ranks): every rank submits steps
// of 16 allreduces through the runtime; at step 20 rank 2 kills itself with
// SIGKILL after submitting. The survivors' handles must fail with an error
// naming rank 2: each prints "FAULT <rank> <failed handles> <message>" and
// exits 3 (4 if the loop ended, which it must not).
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/runtime/runtime.h"

int main() {
  using namespace ringlet;
  core::runtime::Runtime rt(core::Communicator::create(core::load_config(), core::detect_launch()));
  std::vector<std::vector<float>> bufs(16, std::vector<float>(4096, 1.0f));
  for (int step = 0; step < 100000; ++step) {
    std::vector<core::runtime::Handle> h;
    for (size_t i = 0; i < bufs.size(); ++i) {
      h.push_back(rt.enqueue_allreduce("t" + std::to_string(i), bufs[i].data(), bufs[i].data(), {4096},
                                       DataType::kFloat32, ReduceOp::kMax));
    }
    if (rt.rank() == 2 && step == 20) ::raise(SIGKILL);
    int failed = 0;
    std::string first;
    for (auto x : h) {
      try {
        rt.synchronize(x);
      } catch (const core::runtime::RuntimeError& e) {
        if (failed++ == 0) first = e.what();
      }
    }
    if (failed > 0) {
      std::printf("FAULT %d %d %s\n", rt.rank(), failed, first.c_str());
      std::fflush(stdout);
      return 3;
    }
  }
  return 4;
}
