// The command line. Flag names, defaults and meanings are nccl-tests'; the
// Ringlet-only flags follow them. Choices that this build does not serve
// (--device cuda without CUDA and NCCL, --transport ucx without UCX) are
// refused by name when given, as is --tensors outside allreduce on the ring backend: a
// benchmark that silently ignores a flag reports numbers for something other
// than what was asked.
#include <CLI/CLI.hpp>

#include <cctype>
#include <iostream>
#include <limits>
#include <stdexcept>

#include "core/config.h"
#include "options.h"

namespace ringlet::bench {

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReducescatter: return "reducescatter";
    case Collective::kAlltoall: return "alltoall";
  }
  return "unknown";
}

std::string_view to_string(BackendKind b) { return b == BackendKind::kRing ? "ring" : "mpi"; }

bool Options::uses(BackendKind b) const {
  for (BackendKind k : backends) {
    if (k == b) return true;
  }
  return false;
}

std::vector<size_t> Options::sizes() const {
  std::vector<size_t> out;
  for (size_t s = min_bytes; s <= max_bytes;) {
    out.push_back(s);
    size_t next = step_factor > 1 ? s * step_factor : s + step_bytes;
    if (next <= s) break;  // overflow, or a zero step: stop rather than loop
    s = next;
  }
  return out;
}

size_t parse_size(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("empty size");
  size_t multiplier = 1;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K': multiplier = size_t{1} << 10; break;
    case 'M': multiplier = size_t{1} << 20; break;
    case 'G': multiplier = size_t{1} << 30; break;
    default: break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  auto number = core::parse_int64(text);
  if (!number || *number < 0 ||
      static_cast<uint64_t>(*number) > std::numeric_limits<size_t>::max() / multiplier) {
    throw std::invalid_argument("'" + std::string(text) + "' is not a size (bytes, with an optional K, M or G)");
  }
  return static_cast<size_t>(*number) * multiplier;
}

namespace {

constexpr const char* kFooter = R"(
Sizes follow nccl-tests: for allreduce and broadcast, size is the buffer and
count its elements; for allgather, reducescatter and alltoall, size is the
whole buffer of all ranks' blocks (allgather: the output, reducescatter: the
input) and count is the elements of one rank's block.
Time: with one backend, the mean time per op over -n iterations on each rank,
combined across ranks as -a says (nccl-tests' way). With a backend list
(--backend ring,mpi, run under mpirun), the backends alternate op by op in the
same processes with a barrier before each timed op, and time is the MEDIAN
over iterations of the per-op time (the max over ranks); -a does not apply.
p50, p90 and p99 (the columns after nccl-tests' ones, and p50_us,p90_us,p99_us
in the CSV): percentiles over iterations of each op's own time at its slowest rank.
One backend runs its ops back to back, so an op's time includes waiting for
ranks still in the one before; --per-op-barrier times each op alone.
Inputs are rewritten before every timed op, outside the timed region.
algbw = size / time; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n
(allgather, reducescatter, alltoall), 1 (broadcast).
Out-of-place broadcast copies the root's input into its output buffer inside
the timed op (the API broadcasts one buffer in place).
Every rank prints its own check ("# rank R checked IMPL: E elements, W wrong"),
counted without any collective.
Exit status: 0, or 1 when any element was wrong or a run failed; 2 for usage.
)";

std::vector<BackendKind> parse_backends(const std::string& list) {
  std::vector<BackendKind> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    BackendKind kind;
    if (name == "ring") {
      kind = BackendKind::kRing;
    } else if (name == "mpi") {
      kind = BackendKind::kMpi;
    } else if (name == "nccl") {
      kind = BackendKind::kRing;  // Ringlet's runtime, with HOROVOD_GPU_OPERATIONS=NCCL
    } else {
      throw CLI::ValidationError("--backend", "'" + name + "' is not one of ring, mpi");
    }
    for (BackendKind k : out) {
      if (k == kind) throw CLI::ValidationError("--backend", "'" + name + "' is listed twice");
    }
    out.push_back(kind);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// A CLI11 transform that accepts K/M/G sizes and stores them as text for parse_size.
auto size_validator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          parse_size(value);
          return {};
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      "SIZE[K|M|G]");
}

}  // namespace

Command parse_command_line(int argc, char** argv) {
  Command cmd;
  Options& o = cmd.options;
  CLI::App app{"ringlet-bench: bus bandwidth of Ringlet's collectives, nccl-tests style", "ringlet-bench"};
  app.footer(kFooter);

  std::string collective;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  std::string op = "sum", dtype = "float", device = "cpu", backend = "ring", transport = "auto";
  int check = 1;
  int tensors = 0;
  bool help_env = false;

  app.add_option("collective", collective, "allreduce | allgather | broadcast | reducescatter | alltoall")
      ->check(CLI::IsMember({"allreduce", "allgather", "broadcast", "reducescatter", "alltoall"}));
  app.add_option("-b,--minbytes", min_bytes, "smallest size (default 32M)")->check(size_validator());
  app.add_option("-e,--maxbytes", max_bytes, "largest size (default 32M)")->check(size_validator());
  app.add_option("-f,--stepfactor", o.step_factor, "multiply the size by this each step (default 1: add -i)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("-i,--stepbytes", step_bytes, "add this to the size each step when -f is 1 (default 1M)")
      ->check(size_validator());
  app.add_option("-n,--iters", o.iters, "timed iterations per size (default 20)")->check(CLI::Range(1, 1 << 24));
  app.add_option("-w,--warmup_iters", o.warmup_iters, "untimed iterations first (default 5)")
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("-c,--check", check, "check results: 0 or 1 (default 1)")->check(CLI::Range(0, 1));
  app.add_option("-o,--op", op, "reduction: sum | prod | min | max | avg")
      ->check(CLI::IsMember({"sum", "prod", "min", "max", "avg"}));
  app.add_option("-d,--datatype", dtype,
                 "float | double | half | bfloat16 | int8 | uint8 | int16 | uint16 | int32 | int64")
      ->check(CLI::IsMember({"float", "double", "half", "bfloat16", "int8", "uint8", "int16",
                             "uint16", "int32", "int64"}));
  app.add_option("-r,--root", o.root, "root rank of broadcast (default 0)");
  app.add_option("-a,--average", o.average,
                 "time across ranks: 0 rank 0's, 1 mean (default), 2 min, 3 max")
      ->check(CLI::Range(0, 3));
  app.add_option("-J,--output_file", o.json_file, "also write the results as JSON to this file");
  // No CLI11 IsMember on these three: it would list its whole set in --help,
  // refused choices included; the values are checked below instead.
#if RINGLET_BENCH_CUDA
  app.add_option("--device", device,
                 "cpu (default) | cuda (device buffers on this rank's GPU)");
  app.add_option("--backend", backend,
                 "ring | mpi, or a comma list (ring,mpi) to alternate under mpirun; with --device "
                 "cuda: nccl | ring (sets HOROVOD_GPU_OPERATIONS)");
#else
  app.add_option("--device", device, "cpu (default; this build has no CUDA collectives)");
  app.add_option("--backend", backend, "ring | mpi, or a comma list (ring,mpi) to alternate under mpirun");
#endif
#if RINGLET_BENCH_UCX
  auto* transport_opt =
      app.add_option("--transport", transport, "auto | shm | tcp | ucx (sets RINGLET_TRANSPORT)");
#else
  auto* transport_opt = app.add_option(
      "--transport", transport, "auto | shm | tcp (sets RINGLET_TRANSPORT; this build has no UCX)");
#endif
  app.add_option("--tensors", tensors, "submit N named tensors per iteration through the async runtime");
  app.add_flag("--per-op-barrier", o.per_op_barrier,
               "an untimed barrier before every timed op, so each op is timed alone (latency "
               "distributions; changes what the mean measures)");
  app.add_option("--csv", o.csv_file,
                 "also write CSV rows (impl,np,bytes,dtype,op,time_us,...,p50_us,p90_us,p99_us) to this file");
  app.add_flag("--help-env", help_env, "print the environment variables Ringlet reads, and exit");

  try {
    app.parse(argc, argv);
    if (help_env) {
      std::cout << core::describe_env_table();
      cmd.action = Command::Action::kExit;
      return cmd;
    }
    if (collective.empty()) throw CLI::RequiredError("collective");
    if (device == "cuda") {
#if RINGLET_BENCH_CUDA
      if (backend != "nccl" && backend != "ring") {
        throw CLI::ValidationError("--backend", "with --device cuda, one of nccl, ring (asked: " +
                                                    backend + ")");
      }
      o.cuda = true;
      o.gpu_operations = backend == "nccl" ? "NCCL" : "RING";
#else
      throw CLI::ValidationError("--device",
                                 "cuda is not served by this build: it was built without CUDA "
                                 "and NCCL (accepted: cpu)");
#endif
    } else if (device != "cpu") {
      throw CLI::ValidationError("--device", "'" + device + "' is not one of cpu, cuda");
    } else if (backend.find("nccl") != std::string::npos) {
      throw CLI::ValidationError("--backend", "nccl needs --device cuda (accepted: ring, mpi)");
    }
    // Every carrier the library has is measured: the flag sets
    // RINGLET_TRANSPORT, as a job would.
#if RINGLET_BENCH_UCX
    if (transport != "auto" && transport != "shm" && transport != "tcp" && transport != "ucx") {
      throw CLI::ValidationError("--transport",
                                 "'" + transport + "' is not one of auto, shm, tcp, ucx");
    }
#else
    if (transport == "ucx") {
      throw CLI::ValidationError("--transport",
                                 "ucx: this build has no UCX carrier (accepted: auto, shm, tcp)");
    }
    if (transport != "auto" && transport != "shm" && transport != "tcp") {
      throw CLI::ValidationError("--transport", "'" + transport + "' is not one of auto, shm, tcp");
    }
#endif
    o.backends = parse_backends(backend);
    if (tensors < 0) throw CLI::ValidationError("--tensors", "must be 0 or more");
    if (tensors > 0) {
      if (collective != "allreduce") {
        throw CLI::ValidationError("--tensors", "is served for allreduce only so far");
      }
      if (o.backends.size() != 1 || o.backends[0] != BackendKind::kRing) {
        throw CLI::ValidationError("--tensors", "needs --backend ring (it runs through Ringlet's runtime)");
      }
    }
    if (tensors > 0 && o.cuda) {
      throw CLI::ValidationError("--tensors", "is not served with --device cuda yet");
    }
    o.tensors = tensors;
    o.min_bytes = parse_size(min_bytes);
    o.max_bytes = parse_size(max_bytes);
    o.step_bytes = parse_size(step_bytes);
    if (o.min_bytes > o.max_bytes) {
      throw CLI::ValidationError("--minbytes", "is larger than --maxbytes");
    }
    if (o.step_factor <= 1 && o.step_bytes == 0 && o.min_bytes != o.max_bytes) {
      throw CLI::ValidationError("--stepbytes", "is 0 with -f 1: the sweep would never advance");
    }
    o.check = check == 1;
    o.op = *parse_op(op);
    o.dtype = *parse_dtype(dtype);
    if (transport_opt->count() > 0) o.transport = transport;
    for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                         Collective::kReducescatter, Collective::kAlltoall}) {
      if (to_string(c) == collective) o.collective = c;
    }
  } catch (const CLI::ParseError& e) {
    cmd.action = Command::Action::kExit;
    cmd.exit_code = app.exit(e);
    if (cmd.exit_code != 0) cmd.exit_code = 2;
  }
  return cmd;
}

}  // namespace ringlet::bench
