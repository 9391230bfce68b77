// What every rank of one job is told through its environment: who it is
// (RINGLET_RANK and friends, and Horovod's names for scripts that read those),
// where rank 0 serves the rendezvous store, the job's secret and its id.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hosts.h"
#include "ringlet/common/random.h"

namespace ringletrun {

// An environment as an ordered list of NAME=value, with set() replacing.
class Environment {
 public:
  static Environment from_process();  // a copy of this process's environ

  void set(std::string_view name, std::string_view value);
  void erase(std::string_view name);
  const std::string* get(std::string_view name) const;
  std::vector<std::string> entries() const;  // "NAME=value", for execvpe

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

// Shared by all ranks of one job, fresh for each job.
struct JobIdentity {
  std::string job_id;      // 12 chars [0-9a-f]; names /dev/shm/ringlet-<job_id>-*
  std::string secret;      // 64 hex chars (256 random bits) that ranks use to
                           // authenticate to the store and to each other
  std::string rendezvous;  // "<rank 0's host>:<port>", served by rank 0
};

// Draws the id and secret from ringlet/common/random.h and finds a port
// free here, served at `rendezvous_host`. Throws std::system_error.
JobIdentity make_job_identity(const std::string& rendezvous_host = "127.0.0.1");

// A TCP port on 127.0.0.1 that was free a moment ago: bound with port 0 and
// closed again so that rank 0 can bind it. Another process could take it in
// between; rank 0 then fails to serve the store and says so.
int pick_free_port();

// `bytes` random bytes as lower-case hex, from the library's one random source.
using ringlet::common::random_hex;

// The environment of rank `rank` of `size`, placed at `place`.
std::vector<std::string> rank_environment(const Environment& base, const JobIdentity& job, int rank,
                                          int size, const RankPlace& place);

// What a rank on another host takes of the launcher's environment: all of it
// but what names this host or its session (HOSTNAME, RINGLET_HOSTNAME, PWD,
// SSH_*, ...), as horovodrun forwards it.
bool forwarded_to_other_hosts(std::string_view entry);

}  // namespace ringletrun
