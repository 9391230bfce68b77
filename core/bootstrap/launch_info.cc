// Launch detection. The first launcher whose rank and size variables are set
// wins, in this order: ringletrun, Horovod's names, Open MPI, Slurm. The order
// matters where launchers nest (mpirun inside a Slurm allocation leaves
// SLURM_PROCID set on every rank, so Open MPI's names must win over Slurm's).
#include "core/bootstrap/launch_info.h"

#include <cstdio>
#include <cstdlib>

#include "core/config.h"
#include "ringlet/common/random.h"

namespace ringlet::core {
namespace {

// Reads variables either from the map a test gives or from the process.
class Env {
 public:
  explicit Env(const std::map<std::string, std::string>* map) : map_(map) {}

  std::optional<std::string> get(const std::string& name) const {
    if (map_ != nullptr) {
      auto it = map_->find(name);
      if (it == map_->end() || it->second.empty()) return std::nullopt;
      return it->second;
    }
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  }

  bool has(const std::string& name) const { return get(name).has_value(); }

  // A strict integer with a lower bound, or nullopt when unset.
  std::optional<int> integer(const std::string& name, int min) const {
    auto text = get(name);
    if (!text) return std::nullopt;
    auto v = parse_int64(*text);
    if (!v || *v < min || *v > 1'000'000'000) {
      throw ConfigError(name + "='" + *text + "' is not valid: expected an integer >= " +
                        std::to_string(min));
    }
    return static_cast<int>(*v);
  }

 private:
  const std::map<std::string, std::string>* map_;
};

// The variable names one launcher uses.
struct Names {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;  // nullptr where the launcher has none
  const char* local_size;
};

constexpr Names kLaunchers[] = {
    {"ringletrun", "RINGLET_RANK", "RINGLET_SIZE", "RINGLET_LOCAL_RANK", "RINGLET_LOCAL_SIZE"},
    {"horovod", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    // Slurm's per-node task count (SLURM_NTASKS_PER_NODE) is a pattern such as
    // "2(x3)", not a number, so Slurm gives only the local rank.
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

// The job id names /dev/shm segments and files: keep it to [A-Za-z0-9_-] and
// short. A long id keeps its head and gets a hash of the whole, so two long
// ids that share a prefix still differ.
std::string sanitize_job_id(const std::string& raw) {
  std::string id;
  for (char c : raw) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    id.push_back(ok ? c : '_');
  }
  constexpr size_t kMax = 32;
  if (id.size() > kMax) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : raw) h = (h ^ c) * 1099511628211ull;
    char tail[10];
    std::snprintf(tail, sizeof tail, "-%08x", static_cast<unsigned>(h ^ (h >> 32)));
    id = id.substr(0, kMax - 9) + tail;
  }
  return id;
}

// A fresh id for a job whose launcher named none: 64 random bits behind the
// launcher's name. Ids become the names of /dev/shm segments, which another
// user of the host could squat on were they predictable (a process or job
// number). Each rank draws its own; build_world() has them all adopt rank 0's.
std::string fresh_job_id(const std::string& launcher) {
  const std::string prefix = launcher == "mpirun" ? "ompi" : launcher;
  return prefix + "-" + common::random_hex(8);
}

}  // namespace

LaunchInfo detect_launch(const std::map<std::string, std::string>* env_map) {
  const Env env(env_map);
  LaunchInfo info;
  info.launcher = "single";

  for (const Names& names : kLaunchers) {
    const bool has_rank = env.has(names.rank);
    const bool has_size = env.has(names.size);
    if (!has_rank && !has_size) continue;
    if (has_rank != has_size) {
      throw ConfigError(std::string(has_rank ? names.rank : names.size) + " is set but " +
                        (has_rank ? names.size : names.rank) + " is not (launcher " +
                        names.launcher + ")");
    }
    info.launcher = names.launcher;
    info.rank = *env.integer(names.rank, 0);
    info.size = *env.integer(names.size, 1);
    if (info.rank >= info.size) {
      throw ConfigError(std::string(names.rank) + "=" + std::to_string(info.rank) +
                        " is not valid: expected 0 <= rank < " + names.size + "=" +
                        std::to_string(info.size));
    }
    if (names.local_rank) info.local_rank = env.integer(names.local_rank, 0);
    if (names.local_size) info.local_size = env.integer(names.local_size, 1);
    if (info.local_size && *info.local_size > info.size) {
      throw ConfigError(std::string(names.local_size) + "=" + std::to_string(*info.local_size) +
                        " is not valid: expected at most " + names.size + "=" +
                        std::to_string(info.size));
    }
    if (info.local_rank && info.local_size && *info.local_rank >= *info.local_size) {
      throw ConfigError(std::string(names.local_rank) + "=" + std::to_string(*info.local_rank) +
                        " is not valid: expected 0 <= local rank < " + names.local_size + "=" +
                        std::to_string(*info.local_size));
    }
    if (info.local_rank && *info.local_rank >= info.size) {
      throw ConfigError(std::string(names.local_rank) + "=" + std::to_string(*info.local_rank) +
                        " is not valid: expected 0 <= local rank < " + names.size + "=" +
                        std::to_string(info.size));
    }
    break;
  }

  // Ringlet's own rendezvous variables apply under any launcher (mpirun -x ...).
  info.rendezvous = env.get("RINGLET_RENDEZVOUS").value_or("");
  info.secret = env.get("RINGLET_SECRET").value_or("");
  // The secret is what keeps strangers out of the store and off the data
  // links; without one anyone who can reach the port could join the job.
  if (!info.rendezvous.empty() && info.secret.empty()) {
    throw ConfigError(
        "RINGLET_RENDEZVOUS is set but RINGLET_SECRET is not: every rank of the job needs the "
        "same secret to authenticate to the rendezvous store and to its peers (ringletrun and "
        "mpirun set both; by hand, give every rank the same RINGLET_SECRET, e.g. from "
        "'openssl rand -hex 32')");
  }
  const std::string job = env.get("RINGLET_JOB_ID").value_or("");
  info.job_id = job.empty() ? fresh_job_id(info.launcher) : sanitize_job_id(job);
  return info;
}

}  // namespace ringlet::core
