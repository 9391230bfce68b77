// One rank of the fault test: loops allreduce; rank 2 kills itself with
// SIGKILL mid-loop (or, with the argument "hang", stops answering). The survivors must fail with an error naming rank 2; each
// prints "FAULT <rank> <seconds> <message>" and exits 3 (4 if the loop ended,
// which it must not).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/collectives/collectives.h"
#include "core/communicator.h"

int main(int argc, char** argv) {
  const bool hang = argc > 1 && std::string(argv[1]) == "hang";
  using namespace ringlet;
  auto comm = core::Communicator::create(core::load_config(), core::detect_launch());
  if (comm->rank() == 0) {
    const char* job = std::getenv("RINGLET_JOB_ID");
    std::printf("JOB %s\n", job ? job : "");
    std::fflush(stdout);
  }
  std::vector<float> buf(1 << 18, 1.0f);
  auto killed_at = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < 100000; ++i) {
      if (comm->rank() == 2 && i == 40) {
        if (!hang) ::raise(SIGKILL);
        ::sleep(60);  // the launcher stops it once the others have failed
        return 5;
      }
      if (i == 40) killed_at = std::chrono::steady_clock::now();
      core::allreduce(*comm, buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kMax);
    }
  } catch (const std::exception& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
    std::printf("FAULT %d %.3f %s\n", comm->rank(), s, e.what());
    std::fflush(stdout);
    return 3;
  }
  return 4;
}
