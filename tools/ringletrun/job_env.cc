#include "job_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "fd.h"

extern char** environ;

namespace ringletrun {

Environment Environment::from_process() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry = *e;
    std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.vars_.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

void Environment::set(std::string_view name, std::string_view value) {
  for (auto& [n, v] : vars_) {
    if (n == name) {
      v = value;
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::string(value));
}

void Environment::erase(std::string_view name) {
  std::erase_if(vars_, [name](const auto& var) { return var.first == name; });
}

const std::string* Environment::get(std::string_view name) const {
  for (const auto& [n, v] : vars_) {
    if (n == name) return &v;
  }
  return nullptr;
}

std::vector<std::string> Environment::entries() const {
  std::vector<std::string> out;
  out.reserve(vars_.size());
  for (const auto& [n, v] : vars_) out.push_back(n + "=" + v);
  return out;
}

int pick_free_port() {
  Fd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::system_error(errno, std::generic_category(), "bind 127.0.0.1:0");
  }
  socklen_t len = sizeof addr;
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::system_error(errno, std::generic_category(), "getsockname");
  }
  return ntohs(addr.sin_port);
}

JobIdentity make_job_identity(const std::string& rendezvous_host) {
  JobIdentity job;
  // Both from the kernel's CSPRNG: the id names this job's /dev/shm segments
  // and must not be predictable by another user; the secret is the job's key.
  job.job_id = random_hex(6);
  job.secret = random_hex(32);
  // An IPv6 address is bracketed, as in a URL, so that its port stays apart.
  const bool v6 = rendezvous_host.find(':') != std::string::npos;
  job.rendezvous = (v6 ? "[" + rendezvous_host + "]" : rendezvous_host) + ":" +
                   std::to_string(pick_free_port());
  return job;
}

std::vector<std::string> rank_environment(const Environment& base, const JobIdentity& job, int rank,
                                          int size, const RankPlace& place) {
  Environment env = base;
  for (std::string_view prefix : {"RINGLET_", "HOROVOD_"}) {
    std::string p(prefix);
    env.set(p + "RANK", std::to_string(rank));
    env.set(p + "SIZE", std::to_string(size));
    env.set(p + "LOCAL_RANK", std::to_string(place.local_rank));
    env.set(p + "LOCAL_SIZE", std::to_string(place.local_size));
    env.set(p + "CROSS_RANK", std::to_string(place.cross_rank));
    env.set(p + "CROSS_SIZE", std::to_string(place.cross_size));
  }
  env.set("RINGLET_RENDEZVOUS", job.rendezvous);
  env.set("RINGLET_SECRET", job.secret);
  env.set("RINGLET_JOB_ID", job.job_id);
  return env.entries();
}

bool forwarded_to_other_hosts(std::string_view entry) {
  const std::string_view name = entry.substr(0, entry.find('='));
  for (std::string_view own : {"HOSTNAME", "RINGLET_HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"}) {
    if (name == own) return false;
  }
  for (std::string_view prefix : {"SSH_", "BASH_FUNC_"}) {
    if (name.substr(0, prefix.size()) == prefix) return false;
  }
  return true;
}

}  // namespace ringletrun
