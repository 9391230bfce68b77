// The world from hostnames: every rank publishes its host under
// "world/host/<rank>" and reads everyone's. Hosts are numbered by their lowest
// rank, so every rank derives the same numbering without another round trip.
//
// RINGLET_HOSTNAME (a row of the configuration table) overrides gethostname():
// tests use it to pretend that ranks of one machine live on several hosts.
//
// Once each rank knows where on its host it runs (core/bootstrap/placement.h),
// exchange_locality shares that the same way ("world/locality/<rank>", then
// "world/localities" from rank 0), and the ring keeps each NUMA node's ranks
// together within their host (topology::ring_order).
#include "core/bootstrap/world.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <map>
#include <thread>

#include "core/config.h"
#include "ringlet/topology/placement.h"

namespace ringlet::core {
namespace {

std::string this_host() { return host_name(load_config()); }

// The variable names behind a launcher's local hints, for error messages.
std::pair<std::string, std::string> local_names(const std::string& launcher) {
  if (launcher == "ringletrun") return {"RINGLET_LOCAL_RANK", "RINGLET_LOCAL_SIZE"};
  if (launcher == "horovod") return {"HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"};
  if (launcher == "mpirun") return {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
  if (launcher == "slurm") return {"SLURM_LOCALID", "(none)"};
  return {"local rank", "local size"};
}

}  // namespace

World derive_world(int rank, const std::vector<std::string>& hostnames,
                   const std::vector<int>& locality) {
  World w;
  w.rank = rank;
  w.size = static_cast<int>(hostnames.size());
  w.hostnames = hostnames;
  w.host_of.assign(hostnames.size(), -1);
  std::map<std::string, int> index;  // hostname -> host index
  for (int r = 0; r < w.size; ++r) {
    auto [it, fresh] = index.emplace(hostnames[r], static_cast<int>(w.ranks_on_host.size()));
    if (fresh) w.ranks_on_host.emplace_back();
    w.host_of[r] = it->second;
    w.ranks_on_host[it->second].push_back(r);  // ascending: r ascends
  }
  w.cross_size = static_cast<int>(w.ranks_on_host.size());
  w.cross_rank = w.host_of[rank];
  const auto& mine = w.ranks_on_host[w.cross_rank];
  w.local_size = static_cast<int>(mine.size());
  w.local_rank = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  w.locality = locality;
  w.ring = topology::ring_order(w.ranks_on_host, locality);
  return w;
}

namespace {

// The ranks whose hostname is not in the store: those that never arrived.
// Best effort, on the failure path only.
std::string missing_ranks(StoreClient& store, int size) {
  std::string text;
  int listed = 0;
  try {
    for (int r = 0; r < size; ++r) {
      if (store.try_get("world/host/" + std::to_string(r))) continue;
      if (listed++ == 8) {
        text += ", ...";
        break;
      }
      text += (text.empty() ? "" : ", ") + ("rank " + std::to_string(r));
    }
  } catch (const std::exception&) {
    return "";
  }
  return text;
}

// Rank 0's verdict, published in place of the hostnames so that the ranks
// waiting for them fail naming the missing ranks rather than the store that
// closed under them.
constexpr char kFailed = '\0';

// Rank 0 gathers the hostnames and publishes them as one value, so the store
// answers 2N requests rather than N^2 (which matters at thousands of ranks).
std::vector<std::string> exchange_hostnames(const LaunchInfo& launch, const std::string& host,
                                            StoreClient& store, transport::Deadline deadline) {
  const int me = launch.rank;
  store.set("world/host/" + std::to_string(launch.rank), {host.begin(), host.end()});
  store.add("world/joined", 1);
  std::vector<std::string> hostnames(launch.size);
  if (launch.rank == 0) {
    std::string all;
    for (int r = 0; r < launch.size; ++r) {
      try {
        const auto value = store.get("world/host/" + std::to_string(r), deadline);
        hostnames[r].assign(value.begin(), value.end());
      } catch (const transport::Timeout& e) {
        const std::string missing = missing_ranks(store, launch.size);
        std::string verdict = std::string(1, kFailed) + std::to_string(r) + "\n" +
                              (missing.empty() ? "rank " + std::to_string(r) : missing);
        try {
          store.set("world/hosts", {verdict.begin(), verdict.end()});
          // The store dies with this rank: keep it up until those that joined
          // have read the verdict (a second at most).
          const int64_t waiting = store.add("world/joined", 0) - 1;
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
          while (store.add("world/verdict_read", 0) < waiting &&
                 std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        } catch (const std::exception&) {
          // Best effort: the others then fail on their own deadline.
        }
        throw transport::Timeout(
            me, r,
            "rank " + std::to_string(r) + " did not join the rendezvous in time: " + e.cause());
      }
      all += hostnames[r] + '\n';
    }
    // Before the hosts, so that whoever reads the hosts finds the id at once.
    store.set("world/job_id", {launch.job_id.begin(), launch.job_id.end()});
    store.set("world/hosts", {all.begin(), all.end()});
    return hostnames;
  }
  std::vector<uint8_t> all;
  try {
    all = store.get("world/hosts", deadline);
  } catch (const transport::Timeout& e) {
    std::string joined = "?";
    try {
      joined = std::to_string(store.add("world/joined", 0));
    } catch (const std::exception&) {
      // Best effort: the count only sharpens the message.
    }
    const std::string missing = missing_ranks(store, launch.size);
    throw transport::Timeout(me, 0,
                             "the world did not form in time: " + joined + " of " +
                                 std::to_string(launch.size) + " ranks joined the rendezvous" +
                                 (missing.empty() ? "" : " (missing: " + missing + ")") + " (" +
                                 e.cause() + ")");
  }
  if (!all.empty() && all[0] == kFailed) {
    const std::string verdict(all.begin() + 1, all.end());
    const auto nl = verdict.find('\n');
    const int first_missing = std::atoi(verdict.c_str());
    try {
      store.add("world/verdict_read", 1);
    } catch (const std::exception&) {
      // Rank 0 waits only so long for it.
    }
    throw transport::Timeout(me, first_missing,
                             "the world did not form in time: rank 0 gave up waiting for " +
                                 verdict.substr(nl == std::string::npos ? 0 : nl + 1) +
                                 " (missing from the rendezvous)");
  }
  size_t r = 0;
  for (uint8_t c : all) {
    if (c == '\n') {
      ++r;
    } else if (r < hostnames.size()) {
      hostnames[r].push_back(static_cast<char>(c));
    }
  }
  if (r != hostnames.size()) {
    throw transport::Error(me, 0,
                           "rank 0 published " + std::to_string(r) + " hostnames for a world of " +
                               std::to_string(launch.size));
  }
  return hostnames;
}

}  // namespace

World build_world(const LaunchInfo& launch, StoreClient& store, transport::Deadline deadline) {
  const std::string host = this_host();
  if (host.find('\n') != std::string::npos) {
    throw ConfigError(launch.rank, "RINGLET_HOSTNAME must not contain a newline");
  }
  const std::vector<std::string> hostnames = exchange_hostnames(launch, host, store, deadline);
  World w = derive_world(launch.rank, hostnames);
  // Every rank takes rank 0's job id: a launcher that names no job leaves
  // each rank with its own random one (launch_info.cc), and the id must be
  // one per job since it names the job's shared-memory segments.
  if (launch.rank == 0) {
    w.job_id = launch.job_id;
  } else {
    const auto id = store.get("world/job_id", deadline);
    w.job_id.assign(id.begin(), id.end());
  }

  // The launcher's local hints must agree with what the hostnames say; if
  // they do not, shared-memory segments and device choices would collide.
  const auto [rank_var, size_var] = local_names(launch.launcher);
  if (launch.local_size && *launch.local_size != w.local_size) {
    throw ConfigError(w.rank, size_var + "=" + std::to_string(*launch.local_size) + " but " +
                                  std::to_string(w.local_size) + " ranks report host '" + host +
                                  "'");
  }
  if (launch.local_rank && *launch.local_rank != w.local_rank) {
    throw ConfigError(w.rank, rank_var + "=" + std::to_string(*launch.local_rank) +
                                  " but this rank is number " + std::to_string(w.local_rank) +
                                  " (by global rank) of host '" + host + "'");
  }
  return w;
}

std::vector<int> exchange_visible_gpus(const World& w, int gpu, StoreClient& store,
                                       transport::Deadline deadline) {
  if (w.local_size == 1) return {gpu};
  const std::string mine = std::to_string(gpu);
  store.set("world/gpu/" + std::to_string(w.rank), {mine.begin(), mine.end()});
  std::vector<int> gpus;
  for (const int peer : w.ranks_on_host.at(static_cast<size_t>(w.cross_rank))) {
    std::vector<uint8_t> v;
    try {
      v = store.get("world/gpu/" + std::to_string(peer), deadline);
    } catch (const transport::Timeout& e) {
      throw transport::Timeout(w.rank, peer,
                               "rank " + std::to_string(peer) +
                                   " did not tell which GPU it drives in time: " + e.cause());
    }
    const auto parsed = parse_int64(std::string(v.begin(), v.end()));
    if (!parsed || *parsed < -1 || *parsed > INT_MAX) {
      throw transport::Error(w.rank, peer,
                             "rank " + std::to_string(peer) + " told a malformed GPU index");
    }
    gpus.push_back(static_cast<int>(*parsed));
  }
  return gpus;
}

void exchange_locality(World& w, int locality, StoreClient& store, transport::Deadline deadline) {
  std::string all;
  if (w.size == 1) {
    all = std::to_string(locality) + '\n';
  } else {
    const std::string mine = std::to_string(locality);
    store.set("world/locality/" + std::to_string(w.rank), {mine.begin(), mine.end()});
    if (w.rank == 0) {
      for (int r = 0; r < w.size; ++r) {
        std::vector<uint8_t> v;
        try {
          v = store.get("world/locality/" + std::to_string(r), deadline);
        } catch (const transport::Timeout& e) {
          throw transport::Timeout(
              0, r,
              "rank " + std::to_string(r) + " did not tell where it runs in time: " + e.cause());
        }
        all.append(v.begin(), v.end());
        all += '\n';
      }
      store.set("world/localities", {all.begin(), all.end()});
    } else {
      std::vector<uint8_t> v;
      try {
        v = store.get("world/localities", deadline);
      } catch (const transport::Timeout& e) {
        throw transport::Timeout(
            w.rank, 0, "rank 0 did not publish where the ranks run in time: " + e.cause());
      }
      all.assign(v.begin(), v.end());
    }
  }
  std::vector<int> parsed;
  size_t at = 0;
  for (size_t nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1) {
    const auto v = parse_int64(std::string_view(all).substr(at, nl - at));
    if (!v || *v < -1 || *v > INT_MAX) {
      throw transport::Error(
          w.rank, 0,
          "rank 0 published a malformed locality for rank " + std::to_string(parsed.size()));
    }
    parsed.push_back(static_cast<int>(*v));
  }
  if (parsed.size() != static_cast<size_t>(w.size) || at != all.size()) {
    throw transport::Error(w.rank, 0,
                           "rank 0 published " + std::to_string(parsed.size()) +
                               " localities for a world of " + std::to_string(w.size));
  }
  w.locality = std::move(parsed);
  w.ring = topology::ring_order(w.ranks_on_host, w.locality);
}

}  // namespace ringlet::core
