// What one ringlet-bench run was asked to do, after the command line has been
// parsed and checked. Flags follow nccl-tests so that its scripts read right.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/types.h"

namespace ringlet::bench {

enum class Collective { kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall };
enum class BackendKind { kRing, kMpi };

std::string_view to_string(Collective c);
std::string_view to_string(BackendKind b);

struct Options {
  Collective collective = Collective::kAllreduce;
  // nccl-tests' defaults: one 32 MiB size unless -b/-e say otherwise.
  size_t min_bytes = 32u << 20;
  size_t max_bytes = 32u << 20;
  size_t step_factor = 1;  // > 1: multiply; otherwise add step_bytes
  size_t step_bytes = 1u << 20;
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  ReduceOp op = ReduceOp::kSum;
  DataType dtype = DataType::kFloat32;
  int root = 0;
  int average = 1;  // 0 rank 0, 1 mean over ranks, 2 min, 3 max
  std::string json_file;
  std::string csv_file;
  std::vector<BackendKind> backends{BackendKind::kRing};
  std::string transport;  // "" = leave RINGLET_TRANSPORT as the environment has it
  // --device cuda: the buffers live on this rank's CUDA device (its local
  // rank modulo the devices it sees), filled and checked through the host;
  // HOROVOD_GPU_OPERATIONS is set from --backend (ring: RING, nccl: NCCL).
  bool cuda = false;
  std::string gpu_operations;
  // > 0: each iteration submits this many named tensors of the row's size
  // through the asynchronous runtime (allreduce, ring backend) and waits for
  // all; time and bandwidth are per iteration, the op column "sum_async_Nx".
  int tensors = 0;
  // A barrier (untimed) before every timed op of a single backend, so that
  // each op's time is its own rather than including the wait for ranks still
  // in the previous op: for latency distributions. Alternating runs always
  // have it.
  bool per_op_barrier = false;

  // Two or more backends alternate op by op and report medians.
  bool alternating() const { return backends.size() > 1; }
  bool uses(BackendKind b) const;
  // The sizes of the sweep, in bytes, as nccl-tests steps them.
  std::vector<size_t> sizes() const;
};

// What the command line asks for: run, or print something and exit.
struct Command {
  enum class Action { kRun, kExit } action = Action::kRun;
  int exit_code = 0;
  Options options;
};

// Parses argv. Help, --help-env and usage errors come back as kExit after
// printing; choices this build or version does not serve (--device cuda
// without CUDA and NCCL, or for other collectives than allreduce;
// --transport ucx) are refused by name when given, never silently ignored.
Command parse_command_line(int argc, char** argv);

// "4K", "64M", "1G", "4096": bytes. Throws std::invalid_argument.
size_t parse_size(std::string_view text);

}  // namespace ringlet::bench
