// One rank of the job that strangers attack in stranger_test.cc. It joins the
// job (TCP data links), tells the test where the job listens, then runs
// checked allreduces until the test says stop, and a last round of sizes
// after that: the job must come through every attack with correct results.
//
//   SECURITY_DIR/job      rank 0: rendezvous, secret, job id, rank 0's tcp address
//   SECURITY_DIR/pid.R    each rank's process id
//   SECURITY_DIR/ready.R  written last
//   SECURITY_DIR/stop     written by the test; ranks agree on it through the allreduce
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/collectives/collectives.h"
#include "core/communicator.h"
#include "core/config.h"

namespace {

using namespace ringlet;

void write_file(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp");
    out << text;
  }
  std::filesystem::rename(path + ".tmp", path);  // readers never see half a file
}

// Allreduce of `count` floats, element i of rank r being r + i (and `flag`
// in element 0); returns how many elements are wrong and the reduced flag.
size_t checked_allreduce(core::Communicator& comm, size_t count, float flag, float& flag_sum) {
  const int r = comm.rank(), n = comm.world().size;
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r) + static_cast<float>(i % 1000);
  if (count > 0) in[0] = flag;
  core::allreduce(comm, in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum);
  size_t wrong = 0;
  for (size_t i = 1; i < count; ++i) {
    const float want = static_cast<float>(n * (n - 1) / 2) + static_cast<float>(n) *
                                                                   static_cast<float>(i % 1000);
    wrong += out[i] != want;
  }
  flag_sum = count > 0 ? out[0] : 0.0f;
  return wrong;
}

}  // namespace

int main() {
  const char* dir_env = std::getenv("SECURITY_DIR");
  if (dir_env == nullptr) {
    std::fprintf(stderr, "job_rank: SECURITY_DIR is not set\n");
    return 2;
  }
  const std::string dir = dir_env;
  try {
    auto comm = core::Communicator::create(core::load_config(), core::detect_launch());
    const int rank = comm->rank();
    write_file(dir + "/pid." + std::to_string(rank), std::to_string(::getpid()));
    if (rank == 0) {
      const auto addr = comm->store().try_get("tcp/addr/0");
      const std::string link = addr ? std::string(addr->begin(), addr->end()) : "";
      write_file(dir + "/job", std::string(std::getenv("RINGLET_RENDEZVOUS")) + "\n" +
                                   std::getenv("RINGLET_SECRET") + "\n" + comm->world().job_id +
                                   "\n" + link + "\n");
    }
    write_file(dir + "/ready." + std::to_string(rank), "1");

    size_t wrong = 0, collectives = 0;
    for (float stop = 0; stop == 0;) {
      const float mine = std::filesystem::exists(dir + "/stop") ? 1.0f : 0.0f;
      wrong += checked_allreduce(*comm, 4096, mine, stop);
      ++collectives;
      ::usleep(2000);
    }
    // After the attacks: sizes from one element to a few MiB, all still right.
    for (size_t count : {size_t{1}, size_t{1000}, size_t{65536}, size_t{1} << 20}) {
      for (int k = 0; k < 5; ++k) {
        float ignored = 0;
        wrong += checked_allreduce(*comm, count, 0.0f, ignored);
        ++collectives;
      }
    }
    core::barrier(*comm);
    std::printf("RESULT rank %d collectives %zu wrong %zu\n", rank, collectives, wrong);
    std::fflush(stdout);
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "job_rank failed: %s\n", e.what());
    return 1;
  }
}
