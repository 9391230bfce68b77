// One rank of the runtime fault test (three ranks): every rank submits steps
// of 16 allreduces through the runtime; at step 20 rank 2 kills itself with
// SIGKILL as the step begins, while the survivors submit theirs. None of
// those can complete without rank 2, so every one of the survivors' handles
// must fail with an error naming rank 2 (had rank 2 submitted first, its loop
// could still finish some of them before it died, and the count would
// depend on timing): each prints "FAULT <rank> <failed handles> <message>"
// and exits 3 (4 if the loop ended, which it must not).
// With --process-set, ranks 0 and 2 form a process set and submit 8 more
// allreduces on it each step: rank 0 loses its peer inside the set, rank 1
// (not a member) learns of it from the world.
// With --timeline FILE STEP, rank 0 writes a timeline (cycle marks included,
// so its writer is always busy) and kills itself at step STEP instead: the
// file it leaves must still parse.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/communicator.h"
#include "core/config.h"
#include "core/runtime/runtime.h"

int main(int argc, char** argv) {
  using namespace ringlet;
  const bool with_set = argc > 1 && std::string(argv[1]) == "--process-set";
  const bool with_timeline = argc > 3 && std::string(argv[1]) == "--timeline";
  const int victim = with_timeline ? 0 : 2;
  const int kill_step = with_timeline ? std::atoi(argv[3]) : 20;
  std::vector<std::vector<int>> sets;
  if (with_set) sets.push_back({0, 2});
  core::runtime::Runtime rt(core::Communicator::create(core::load_config(), core::detect_launch()),
                            sets);
  if (with_timeline) rt.start_timeline(argv[2], true);
  std::vector<std::vector<float>> bufs(16, std::vector<float>(4096, 1.0f));
  std::vector<std::vector<float>> set_bufs(8, std::vector<float>(4096, 1.0f));
  for (int step = 0; step < 100000; ++step) {
    if (rt.rank() == victim && step == kill_step) ::raise(SIGKILL);
    std::vector<core::runtime::Handle> h;
    for (size_t i = 0; i < bufs.size(); ++i) {
      h.push_back(rt.enqueue_allreduce("t" + std::to_string(i), bufs[i].data(), bufs[i].data(),
                                       {4096}, DataType::kFloat32, ReduceOp::kMax));
    }
    for (size_t i = 0; with_set && rt.rank() != 1 && i < set_bufs.size(); ++i) {
      h.push_back(rt.enqueue_allreduce("s" + std::to_string(i), set_bufs[i].data(),
                                       set_bufs[i].data(), {4096}, DataType::kFloat32,
                                       ReduceOp::kMax, 1.0, 1.0, {}, 1));
    }
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
