// One rank of the placement job test (placement_job_test.cc): joins the job,
// runs each ring collective once with values it checks itself, and prints
//   PLACE <rank> ring=<ring> cpus=<its CPUs after init> ok=<0|1> <what failed>
// Exits 0 when the collectives were right.
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "core/bootstrap/launch_info.h"
#include "core/collectives/collectives.h"
#include "core/communicator.h"
#include "ringlet/topology/affinity.h"

using namespace ringlet;

int main() {
  std::unique_ptr<core::Communicator> comm;
  try {
    comm = core::Communicator::create(core::load_config(), core::detect_launch());
  } catch (const std::exception& e) {
    std::printf("INIT FAILED %s\n", e.what());
    return 3;
  }
  const int me = comm->rank(), n = comm->size();
  std::string failed;

  // Allreduce: rank r gives r + 1 + i at element i; the sum is
  // n(n+1)/2 + n*i. Large enough for several ring slices.
  const size_t count = 300000;
  std::vector<int32_t> in(count), out(count);
  for (size_t i = 0; i < count; ++i) in[i] = me + 1 + static_cast<int32_t>(i % 1000);
  core::allreduce(*comm, in.data(), out.data(), count, DataType::kInt32, ReduceOp::kSum);
  for (size_t i = 0; i < count && failed.empty(); ++i) {
    if (out[i] != n * (n + 1) / 2 + n * static_cast<int32_t>(i % 1000)) failed = "allreduce";
  }

  // Allgather, rank r giving r + 1 elements of value 100 r.
  std::vector<size_t> counts(n);
  for (int r = 0; r < n; ++r) counts[r] = static_cast<size_t>(r + 1);
  std::vector<int32_t> mine(me + 1, 100 * me),
      all(std::accumulate(counts.begin(), counts.end(), size_t{0}));
  core::allgather(*comm, mine.data(), all.data(), counts, DataType::kInt32);
  size_t at = 0;
  for (int r = 0; r < n; ++r) {
    for (size_t k = 0; k < counts[r]; ++k) {
      if (all[at++] != 100 * r && failed.empty()) failed = "allgather";
    }
  }

  // Broadcast from the last rank.
  std::vector<int32_t> b(1000, me == n - 1 ? 7 : -1);
  core::broadcast(*comm, b.data(), b.size(), DataType::kInt32, n - 1);
  for (int32_t v : b) {
    if (v != 7 && failed.empty()) failed = "broadcast";
  }

  std::string ring;
  for (int r : comm->world().ring) ring += (ring.empty() ? "" : ",") + std::to_string(r);
  std::printf("PLACE %d ring=%s cpus=%s ok=%d %s\n", me, ring.c_str(),
              topology::cpu_list_text(topology::process_affinity()).c_str(), failed.empty() ? 1 : 0,
              failed.c_str());
  std::fflush(stdout);
  return failed.empty() ? 0 : 1;
}
