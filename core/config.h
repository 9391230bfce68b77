// Every environment variable Ringlet reads, declared once (name, type, default,
// accepted values, one line of meaning), and the validated configuration that
// init() builds from them. A bad value is a ConfigError naming the variable
// and what it accepts.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/common/failure.h"
#include "ringlet/common/logging.h"

namespace ringlet::core {

// A bad environment variable or launch; the cause names the variable.
class ConfigError : public common::Failure {
 public:
  explicit ConfigError(std::string cause)
      : Failure(common::FailureKind::kConfig, std::move(cause)) {}
  // `rank`: the rank that reports (this one).
  ConfigError(int rank, std::string cause)
      : Failure(common::FailureKind::kConfig, rank, -1, std::move(cause)) {}
};

enum class TransportKind { kAuto, kShm, kTcp, kUcx };
enum class CpuOperations { kRing, kMpi };
enum class GpuOperations { kNccl, kRing, kMpi };
// Which allreduce/allgather algorithm runs; kAuto follows the algorithm table.
enum class AlgorithmChoice { kAuto, kRing, kDirect, kOneStep, kTwoShot };
// RINGLET_BIND: whether each rank binds itself to the cores of its placement.
enum class BindMode { kAuto, kNone };

struct Config {
  TransportKind transport = TransportKind::kAuto;
  CpuOperations cpu_operations = CpuOperations::kRing;
  GpuOperations gpu_operations = GpuOperations::kNccl;
  AlgorithmChoice algorithm = AlgorithmChoice::kAuto;
  std::chrono::milliseconds timeout{30000};        // RINGLET_TIMEOUT_SECONDS
  std::chrono::milliseconds start_timeout{30000};  // RINGLET_START_TIMEOUT_SECONDS
  std::string network_interface;                   // RINGLET_NETWORK_INTERFACE
  BindMode bind = BindMode::kAuto;                 // RINGLET_BIND
  std::string topo_file;                           // RINGLET_TOPO_FILE ("": this machine, by hwloc)
  int64_t fusion_threshold = 128 * 1024 * 1024;    // HOROVOD_FUSION_THRESHOLD
  double cycle_time_ms = 1.0;                      // HOROVOD_CYCLE_TIME
  int64_t cache_capacity = 1024;                   // HOROVOD_CACHE_CAPACITY
  std::string timeline;                            // HOROVOD_TIMELINE
  bool timeline_mark_cycles = false;               // HOROVOD_TIMELINE_MARK_CYCLES
  int stall_check_seconds = 60;                    // HOROVOD_STALL_CHECK_TIME_SECONDS
  int stall_shutdown_seconds = 0;                  // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS
  int stall_timeout_seconds = 1800;                // RINGLET_STALL_TIMEOUT_SECONDS
  std::string log_level = "WARNING";               // HOROVOD_LOG_LEVEL (upper case)
  bool log_timestamp = false;                      // HOROVOD_LOG_TIMESTAMP
  std::string hostname;                            // RINGLET_HOSTNAME ("": the machine's)
  // HOROVOD_HIERARCHICAL_ALLREDUCE / _ALLGATHER: true takes the hierarchical
  // algorithm wherever the placement has one, false never; unset lets the
  // algorithm table choose by size.
  std::optional<bool> hierarchical_allreduce;
  std::optional<bool> hierarchical_allgather;
  size_t shm_window_bytes = 16 << 20;              // RINGLET_SHM_WINDOW_BYTES (per rank)
  size_t cuda_ipc_direct_bytes = 4 << 20;          // RINGLET_CUDA_IPC_DIRECT_BYTES (0: never)
  int spin_iterations = -1;                        // RINGLET_SPIN (-1: auto)
  bool nvtx = true;                                // RINGLET_NVTX
};

// One row of the table. parse() validates and stores into a Config; it throws
// ConfigError with the variable's name and `accepted` on a bad value.
struct EnvVar {
  const char* name;
  const char* default_value;  // as a user would write it
  // What a valid value looks like, completing the error's "expected ...":
  // "one of auto|shm|tcp|ucx", "an integer >= 0 (bytes)".
  const char* accepted;
  const char* meaning;
  std::function<void(const std::string& value, Config& config)> parse;
};

const std::vector<EnvVar>& env_table();

// Reads the process environment (or `env` when given, for tests).
Config load_config(const std::map<std::string, std::string>* env = nullptr);

// The logger's settings for `rank` (HOROVOD_LOG_LEVEL, HOROVOD_LOG_TIMESTAMP).
common::LogSettings log_settings(const Config& config, int rank);

// The host name this rank reports to the others: RINGLET_HOSTNAME where set
// (tests place ranks of one machine on several "hosts"), else the machine's.
std::string host_name(const Config& config);

// "NCCL", "RING", "MPI": as HOROVOD_GPU_OPERATIONS spells them.
std::string_view to_string(GpuOperations g);
// As RINGLET_TRANSPORT, HOROVOD_CPU_OPERATIONS and RINGLET_ALGORITHM spell them.
std::string_view to_string(TransportKind t);
std::string_view to_string(CpuOperations c);
std::string_view to_string(AlgorithmChoice a);
std::string_view to_string(BindMode b);

// The table as text, for `ringletrun --help-env`.
std::string describe_env_table();

// Strict number parsing, shared by the table and by launch detection: the whole
// text must be the number (no blanks, no trailing junk), and out of range is
// nullopt rather than a wrapped or clamped value.
std::optional<int64_t> parse_int64(std::string_view text);
std::optional<double> parse_double(std::string_view text);  // finite values only

}  // namespace ringlet::core
