// ringlet-bench: nccl-tests' bandwidth benchmark for Ringlet (and MPI as the
// baseline). See --help for the flags and the timing method.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend.h"
#include "harness.h"
#include "options.h"
#include "ringlet/ringlet.h"
#include "ringlet/common/host_name.h"
#include "table.h"

using namespace ringlet::bench;

namespace {

// Under ringletrun every process would start its own one-rank MPI world and
// measure nothing collective; say so instead.
void check_same_world(const Options& o, const std::vector<std::unique_ptr<Backend>>& backends) {
  const int n = backends.front()->size();
  for (const auto& b : backends) {
    if (b->size() != n || b->rank() != backends.front()->rank()) {
      throw std::runtime_error("backend " + std::string(b->name()) + " is rank " + std::to_string(b->rank()) +
                               " of " + std::to_string(b->size()) + " but " +
                               std::string(backends.front()->name()) + " is rank " +
                               std::to_string(backends.front()->rank()) + " of " + std::to_string(n) +
                               ": run --backend mpi under mpirun");
    }
  }
  const char* launched = std::getenv("RINGLET_SIZE");
  if (o.uses(BackendKind::kMpi) && launched && std::to_string(n) != launched) {
    throw std::runtime_error("MPI sees " + std::to_string(n) + " ranks but RINGLET_SIZE is " + launched +
                             ": run --backend mpi under mpirun, not ringletrun");
  }
  if (o.collective == Collective::kBroadcast && (o.root < 0 || o.root >= n)) {
    throw std::runtime_error("-r " + std::to_string(o.root) + " is not a rank (0.." + std::to_string(n - 1) + ")");
  }
}

std::string describe_rank(bool cuda) {
  return "Pid " + std::to_string(getpid()) + " on " + ringlet::common::host_name() + " device " +
         (cuda ? "cuda (local rank " + std::to_string(ringlet::local_rank()) + " modulo the devices)"
               : std::string("cpu"));
}

int run(const Options& o) {
  if (!o.transport.empty()) setenv("RINGLET_TRANSPORT", o.transport.c_str(), 1);
  if (o.cuda) setenv("HOROVOD_GPU_OPERATIONS", o.gpu_operations.c_str(), 1);
  // Declared first so that MPI outlives Ringlet, which may have bootstrapped through it.
  MpiRuntime mpi(o.uses(BackendKind::kMpi));
  std::vector<std::unique_ptr<Backend>> owned;
  for (BackendKind k : o.backends) {
    owned.push_back(k == BackendKind::kRing ? make_ringlet_backend(o) : make_mpi_backend(o));
  }
  check_same_world(o, owned);
  std::vector<Backend*> backends;
  for (auto& b : owned) backends.push_back(b.get());
  Backend& first = *backends.front();
  const int n = first.size();
  const bool printer = first.rank() == 0;

  std::vector<std::string> ranks = first.gather_strings(describe_rank(o.cuda), 160);
  if (printer) {
    print_preamble(o, n, ranks);
    if (!o.alternating()) print_table_header(o, std::string(backends.front()->name()));
  }
  std::vector<Table> tables = run_sweep(o, backends, [&](const Row& row) {
    if (printer) print_row(o, n, row);
  });
  if (printer) {
    if (o.alternating()) {
      for (const Table& t : tables) {
        print_table_header(o, t.backend);
        for (const Row& row : t.rows) print_row(o, n, row);
        print_table_footer(o, n, t);
      }
      print_comparison(o, tables);
    } else {
      print_table_footer(o, n, tables.front());
    }
    if (!o.csv_file.empty()) write_csv(o.csv_file, o, n, tables);
    if (!o.json_file.empty()) write_json(o.json_file, o, n, tables);
  }
  print_local_check(o, first.rank(), tables);
  return total_wrong(tables) > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Command cmd = parse_command_line(argc, argv);
  if (cmd.action == Command::Action::kExit) return cmd.exit_code;
  try {
    return run(cmd.options);
  } catch (const std::exception& e) {
    // Ringlet's and MPI's messages already name the rank; the launcher's
    // rank variable covers failures before either knows it.
    const char* rank = std::getenv("RINGLET_RANK");
    if (!rank) rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = std::getenv("SLURM_PROCID");
    std::fprintf(stderr, "ringlet-bench (rank %s): %s\n", rank ? rank : "0, no launcher", e.what());
    return 1;
  }
}
