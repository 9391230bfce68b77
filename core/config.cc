// The environment table: one row per variable. Rows are built from a few typed
// helpers so that every variable reports a bad value the same way:
//   NAME='value' is not valid: expected <accepted>
#include "core/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "ringlet/common/host_name.h"

extern char** environ;

namespace ringlet::core {

std::optional<int64_t> parse_int64(std::string_view text) {
  // from_chars accepts a leading '-' but not '+'; accept '+' too, as strtol would.
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+') return std::nullopt;
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || text.front() == '+') return std::nullopt;
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value, std::chars_format::general);
  if (ec != std::errc() || ptr != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

namespace {

// A row's typed parser: returns false when the value is not acceptable; the
// wrapper in row() turns that into the one error format.
using Setter = std::function<bool(const std::string& value, Config& config)>;

EnvVar row(const char* name, const char* default_value, const char* accepted,
           const char* meaning, Setter set) {
  auto parse = [name, accepted, set = std::move(set)](const std::string& value, Config& config) {
    if (!set(value, config)) {
      throw ConfigError(std::string(name) + "='" + value + "' is not valid: expected " + accepted);
    }
  };
  return EnvVar{name, default_value, accepted, meaning, std::move(parse)};
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Enumerations compare case-insensitively: Horovod users write both "MPI" and "mpi".
template <typename E>
Setter choice(std::vector<std::pair<const char*, E>> names, E Config::*field) {
  return [names = std::move(names), field](const std::string& value, Config& config) {
    for (const auto& [text, e] : names) {
      if (lower(value) == lower(text)) {
        config.*field = e;
        return true;
      }
    }
    return false;
  };
}

template <typename T>
Setter integer(T Config::*field, int64_t min) {
  return [field, min](const std::string& value, Config& config) {
    auto v = parse_int64(value);
    if (!v || *v < min || *v > static_cast<int64_t>(std::numeric_limits<T>::max())) return false;
    config.*field = static_cast<T>(*v);
    return true;
  };
}

// 0|1|true|false, in any case; nullopt for anything else.
std::optional<bool> parse_bool(const std::string& value) {
  const std::string v = lower(value);
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  return std::nullopt;
}

Setter boolean(bool Config::*field) {
  return [field](const std::string& value, Config& config) {
    const std::optional<bool> b = parse_bool(value);
    if (b) config.*field = *b;
    return b.has_value();
  };
}

// 0|1|true|false, as boolean() reads them, where unset (nullopt) means a
// third thing: let Ringlet choose.
Setter optional_boolean(std::optional<bool> Config::*field) {
  return [field](const std::string& value, Config& config) {
    const std::optional<bool> b = parse_bool(value);
    if (b) config.*field = *b;
    return b.has_value();
  };
}

Setter text(std::string Config::*field) {
  return [field](const std::string& value, Config& config) {
    config.*field = value;
    return true;
  };
}

// Seconds (fractional allowed) stored as milliseconds, rounded up so that a
// tiny positive timeout never becomes zero. The cap keeps the chrono
// arithmetic of deadlines far from overflow.
Setter seconds(std::chrono::milliseconds Config::*field) {
  return [field](const std::string& value, Config& config) {
    auto v = parse_double(value);
    if (!v || *v <= 0 || *v > 1e9) return false;
    config.*field = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(*v * 1000.0)));
    return true;
  };
}

// A byte count with an optional binary K/M/G suffix ("16M" = 16 MiB), at
// least `min`.
Setter byte_size(size_t Config::*field, int64_t min = 1) {
  return [field, min](const std::string& value, Config& config) {
    std::string digits = value;
    int64_t unit = 1;
    if (!digits.empty()) {
      switch (std::toupper(static_cast<unsigned char>(digits.back()))) {
        case 'K': unit = int64_t{1} << 10; break;
        case 'M': unit = int64_t{1} << 20; break;
        case 'G': unit = int64_t{1} << 30; break;
        default: break;
      }
      if (unit != 1) digits.pop_back();
    }
    auto v = parse_int64(digits);
    if (!v || *v < min || *v > std::numeric_limits<int64_t>::max() / unit) return false;
    config.*field = static_cast<size_t>(*v * unit);
    return true;
  };
}

std::vector<EnvVar> build_table() {
  std::vector<EnvVar> t;
  // ucx and MPI parse in every build, so that the refusal at init in a build
  // without UCX (Communicator::create) or MPI (check_mpi_operations) can say
  // what is accepted there rather than call the value invalid.
  t.push_back(row("RINGLET_TRANSPORT", "auto", "one of auto|shm|tcp|ucx (ucx: builds with UCX)",
                  "carrier between ranks; auto = shm within a host, TCP across; tcp, ucx = "
                  "that carrier for every pair",
                  choice<TransportKind>({{"auto", TransportKind::kAuto},
                                         {"shm", TransportKind::kShm},
                                         {"tcp", TransportKind::kTcp},
                                         {"ucx", TransportKind::kUcx}},
                                        &Config::transport)));
  // MPI needs the job launched by mpirun (or srun with MPI): checked at init
  // (core/mpi/mpi_bootstrap.h), where the launch is known.
  t.push_back(row("HOROVOD_CPU_OPERATIONS", "RING", "one of RING|MPI (any case)",
                  "backend for host-memory collectives: Ringlet's own (RING), or MPI's (MPI: "
                  "the job launched by mpirun)",
                  choice<CpuOperations>({{"RING", CpuOperations::kRing},
                                         {"MPI", CpuOperations::kMpi}},
                                        &Config::cpu_operations)));
  // Accepted, every value, whatever this build serves: Horovod reads this
  // variable when it is built, and images built for GPUs keep it in the
  // environment of every job, CPU-only ones included. Refusing it at init
  // would stop jobs that never touch a device; instead a device tensor that
  // the chosen operations cannot serve is refused at its submission, naming
  // the setting (core/gpu/device_collectives.h: device_refusal).
  t.push_back(
      row("HOROVOD_GPU_OPERATIONS", "NCCL", "one of NCCL|RING|MPI (any case)",
          "backend for GPU-memory collectives: NCCL, or RING (Ringlet's own: CUDA IPC within a "
          "host, staged through host memory between hosts); MPI is refused",
          choice<GpuOperations>({{"NCCL", GpuOperations::kNccl},
                                 {"RING", GpuOperations::kRing},
                                 {"MPI", GpuOperations::kMpi}},
                                &Config::gpu_operations)));
  t.push_back(row("RINGLET_ALGORITHM", "auto", "one of auto|ring|direct|onestep|twoshot",
                  "force one collective algorithm; auto follows the algorithm table",
                  choice<AlgorithmChoice>({{"auto", AlgorithmChoice::kAuto},
                                           {"ring", AlgorithmChoice::kRing},
                                           {"direct", AlgorithmChoice::kDirect},
                                           {"onestep", AlgorithmChoice::kOneStep},
                                           {"twoshot", AlgorithmChoice::kTwoShot}},
                                          &Config::algorithm)));
  t.push_back(row("RINGLET_TIMEOUT_SECONDS", "30", "a number of seconds > 0 (fractions allowed)",
                  "how long any wait on a peer may last before it is an error",
                  seconds(&Config::timeout)));
  t.push_back(row("RINGLET_START_TIMEOUT_SECONDS", "30",
                  "a number of seconds > 0 (fractions allowed)",
                  "how long rendezvous at start-up may take", seconds(&Config::start_timeout)));
  t.push_back(row("RINGLET_NETWORK_INTERFACE", "", "an interface name, e.g. eth0",
                  "interface TCP links listen on; empty = loopback on one host, else that of "
                  "the NIC nearest the rank where it is on rank 0's subnet, else the address "
                  "reaching rank 0",
                  text(&Config::network_interface)));
  t.push_back(row("RINGLET_BIND", "auto", "one of auto|none",
                  "auto = each rank binds itself to the cores of its GPU's NUMA node (else its "
                  "share of one), unless it was started bound; none = the system places it",
                  choice<BindMode>({{"auto", BindMode::kAuto}, {"none", BindMode::kNone}},
                                   &Config::bind)));
  t.push_back(row("RINGLET_TOPO_FILE", "", "a path to an hwloc XML file",
                  "place ranks by this saved topology (ringlet-topo --save-xml, lstopo F.xml) "
                  "instead of discovering the machine's; only CPUs online here are bound",
                  text(&Config::topo_file)));
  t.push_back(row("HOROVOD_FUSION_THRESHOLD", "134217728", "an integer >= 0 (bytes)",
                  "largest fusion buffer; 0 disables fusion",
                  integer(&Config::fusion_threshold, 0)));
  t.push_back(row("HOROVOD_CYCLE_TIME", "1", "a number of milliseconds > 0 (fractions allowed)",
                  "longest the background loop holds ready tensors back to fuse them",
                  [](const std::string& value, Config& config) {
                    auto v = parse_double(value);
                    if (!v || *v <= 0) return false;
                    config.cycle_time_ms = *v;
                    return true;
                  }));
  t.push_back(row("HOROVOD_CACHE_CAPACITY", "1024", "an integer >= 0",
                  "entries of the response cache; 0 disables it",
                  integer(&Config::cache_capacity, 0)));
  t.push_back(row("HOROVOD_TIMELINE", "", "a file path",
                  "write a Chrome-trace timeline to this file; empty = off",
                  text(&Config::timeline)));
  t.push_back(row("HOROVOD_TIMELINE_MARK_CYCLES", "0", "one of 0|1|true|false",
                  "mark each background cycle in the timeline",
                  boolean(&Config::timeline_mark_cycles)));
  t.push_back(row("HOROVOD_STALL_CHECK_TIME_SECONDS", "60", "an integer >= 0 (seconds)",
                  "warn when some ranks wait this long for others; 0 = never",
                  integer(&Config::stall_check_seconds, 0)));
  t.push_back(row("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "0", "an integer >= 0 (seconds)",
                  "abort the job after a stall this long; 0 = never",
                  integer(&Config::stall_shutdown_seconds, 0)));
  t.push_back(row("RINGLET_STALL_TIMEOUT_SECONDS", "1800", "an integer >= 0 (seconds)",
                  "fail a collective that some ranks never submit after this long, on every "
                  "rank, and go on; 0 = never",
                  integer(&Config::stall_timeout_seconds, 0)));
  t.push_back(row("HOROVOD_LOG_LEVEL", "WARNING",
                  "one of TRACE|DEBUG|INFO|WARNING|ERROR|FATAL (any case)",
                  "least severe message that is printed",
                  [](const std::string& value, Config& config) {
                    if (!common::parse_log_level(value)) return false;
                    config.log_level = upper(value);
                    return true;
                  }));
  t.push_back(row("HOROVOD_LOG_TIMESTAMP", "0", "one of 0|1|true|false",
                  "start every log line with the local date and time (microseconds)",
                  boolean(&Config::log_timestamp)));
  // Unset, the algorithm table chooses (core/collectives/algorithm_table.cc).
  t.push_back(row("HOROVOD_HIERARCHICAL_ALLREDUCE", "", "one of 0|1|true|false",
                  "allreduce within each host, across hosts, then within again; 1: at every "
                  "size where the hosts hold as many ranks, several each; 0: never; unset: the "
                  "algorithm table chooses by size",
                  optional_boolean(&Config::hierarchical_allreduce)));
  t.push_back(row("HOROVOD_HIERARCHICAL_ALLGATHER", "", "one of 0|1|true|false",
                  "allgather within each host, across hosts, then broadcast within; 1: at every "
                  "size where some host holds several ranks; 0: never; unset: the algorithm "
                  "table chooses by size",
                  optional_boolean(&Config::hierarchical_allgather)));
  t.push_back(row("RINGLET_SHM_WINDOW_BYTES", "16M", "a byte count > 0, with optional K|M|G suffix",
                  "shared-memory window per rank", byte_size(&Config::shm_window_bytes)));
  t.push_back(row("RINGLET_CUDA_IPC_DIRECT_BYTES", "4M",
                  "a byte count >= 0, with optional K|M|G suffix (0: never)",
                  "HOROVOD_GPU_OPERATIONS=RING: device tensors of at least this size are "
                  "allreduced between the ranks' own buffers over CUDA IPC, with no staging",
                  byte_size(&Config::cuda_ipc_direct_bytes, 0)));
  t.push_back(row("RINGLET_SPIN", "auto", "auto or an integer >= 0",
                  "polls before a waiting rank yields, then sleeps; auto = poll for up to "
                  "1 ms, or not at all when ranks outnumber cores",
                  [](const std::string& value, Config& config) {
                    if (value == "auto") {
                      config.spin_iterations = -1;
                      return true;
                    }
                    return integer(&Config::spin_iterations, 0)(value, config);
                  }));
  t.push_back(row("RINGLET_NVTX", "1", "one of 0|1|true|false",
                  "emit NVTX ranges where built with CUDA", boolean(&Config::nvtx)));
  t.push_back(row("RINGLET_HOSTNAME", "", "a host name without a newline",
                  "host name this rank reports; empty = gethostname() (tests fake hosts with it)",
                  [](const std::string& value, Config& config) {
                    if (value.find('\n') != std::string::npos) return false;
                    config.hostname = value;
                    return true;
                  }));
  return t;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string_view::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

}  // namespace

std::string_view to_string(GpuOperations g) {
  switch (g) {
    case GpuOperations::kNccl: return "NCCL";
    case GpuOperations::kRing: return "RING";
    case GpuOperations::kMpi: return "MPI";
  }
  return "?";
}

std::string_view to_string(TransportKind t) {
  switch (t) {
    case TransportKind::kAuto:
      return "auto";
    case TransportKind::kShm:
      return "shm";
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kUcx:
      return "ucx";
  }
  return "?";
}

std::string_view to_string(CpuOperations c) {
  switch (c) {
    case CpuOperations::kRing:
      return "RING";
    case CpuOperations::kMpi:
      return "MPI";
  }
  return "?";
}

std::string_view to_string(AlgorithmChoice a) {
  switch (a) {
    case AlgorithmChoice::kAuto:
      return "auto";
    case AlgorithmChoice::kRing:
      return "ring";
    case AlgorithmChoice::kDirect:
      return "direct";
    case AlgorithmChoice::kOneStep:
      return "onestep";
    case AlgorithmChoice::kTwoShot:
      return "twoshot";
  }
  return "?";
}

std::string_view to_string(BindMode b) {
  switch (b) {
    case BindMode::kAuto:
      return "auto";
    case BindMode::kNone:
      return "none";
  }
  return "?";
}

const std::vector<EnvVar>& env_table() {
  static const std::vector<EnvVar> table = build_table();
  return table;
}

Config load_config(const std::map<std::string, std::string>* env) {
  std::map<std::string, std::string> own;
  if (env == nullptr) {
    own = process_environment();
    env = &own;
  }
  Config config;
  for (const EnvVar& var : env_table()) {
    auto it = env->find(var.name);
    // An empty value means "unset", as Horovod treats it: `export X=` keeps the default.
    if (it == env->end() || it->second.empty()) continue;
    var.parse(it->second, config);
  }
  // Both would choose the algorithm of the same collective: refused rather
  // than one silently overriding the other.
  const std::pair<const std::optional<bool>&, const char*> switches[] = {
      {config.hierarchical_allreduce, "HOROVOD_HIERARCHICAL_ALLREDUCE"},
      {config.hierarchical_allgather, "HOROVOD_HIERARCHICAL_ALLGATHER"}};
  for (const auto& [on, name] : switches) {
    if (on.value_or(false) && config.algorithm != AlgorithmChoice::kAuto) {
      throw ConfigError(std::string(name) + "=" + env->at(name) + " and RINGLET_ALGORITHM=" +
                        std::string(to_string(config.algorithm)) +
                        " both choose the algorithm: set one of them (or RINGLET_ALGORITHM=auto)");
    }
  }
  // MPI's operations take every host collective: a choice among Ringlet's own
  // host algorithms beside them would be ignored, so it is refused.
  if (config.cpu_operations == CpuOperations::kMpi) {
    const std::string mpi = "HOROVOD_CPU_OPERATIONS=" + env->at("HOROVOD_CPU_OPERATIONS");
    if (config.algorithm != AlgorithmChoice::kAuto && config.algorithm != AlgorithmChoice::kRing) {
      throw ConfigError("RINGLET_ALGORITHM=" + env->at("RINGLET_ALGORITHM") +
                        " chooses one of Ringlet's host algorithms, but " + mpi +
                        " hands every host collective to MPI (accepted with it: auto, or ring "
                        "for device tensors under HOROVOD_GPU_OPERATIONS=RING)");
    }
    for (const auto& [on, name] : switches) {
      if (on.value_or(false)) {
        throw ConfigError(std::string(name) + "=" + env->at(name) +
                          " asks for Ringlet's hierarchical host algorithm, but " + mpi +
                          " hands every host collective to MPI (accepted with it: 0, or unset)");
      }
    }
  }
  return config;
}

common::LogSettings log_settings(const Config& config, int rank) {
  common::LogSettings s;
  s.level = common::parse_log_level(config.log_level).value_or(common::LogLevel::kWarning);
  s.rank = rank;
  s.timestamp = config.log_timestamp;
  s.host = host_name(config);
  return s;
}

std::string host_name(const Config& config) {
  return config.hostname.empty() ? common::host_name() : config.hostname;
}

std::string describe_env_table() {
  size_t w_name = 8, w_default = 7, w_accepted = 8;
  for (const EnvVar& var : env_table()) {
    w_name = std::max(w_name, std::string_view(var.name).size());
    w_default = std::max(w_default, std::string_view(var.default_value).size());
    w_accepted = std::max(w_accepted, std::string_view(var.accepted).size());
  }
  std::ostringstream out;
  auto line = [&](std::string_view a, std::string_view b, std::string_view c, std::string_view d) {
    out << a << std::string(w_name - a.size() + 2, ' ') << b
        << std::string(w_default - b.size() + 2, ' ') << c
        << std::string(w_accepted - c.size() + 2, ' ') << d << '\n';
  };
  line("VARIABLE", "DEFAULT", "ACCEPTED", "MEANING");
  for (const EnvVar& var : env_table()) {
    line(var.name, *var.default_value ? var.default_value : "\"\"", var.accepted, var.meaning);
  }
  return out.str();
}

}  // namespace ringlet::core
