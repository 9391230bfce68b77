#include "core/mpi/mpi_bootstrap.h"

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "core/config.h"
#include "ringlet/common/host_name.h"
#include "ringlet/common/random.h"

#ifdef RINGLET_HAVE_MPI
#include <arpa/inet.h>
// Only MPI's C API: its deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

namespace ringlet::core {

bool needs_mpi_bootstrap(const LaunchInfo& launch) {
  return launch.rendezvous.empty() && launch.size > 1 &&
         (launch.launcher == "mpirun" || launch.launcher == "slurm");
}

// Refuses, naming it, an MPI that the program initialized below
// MPI_THREAD_SERIALIZED; nothing where MPI is not initialized yet.
void check_thread_level_if_initialized(const LaunchInfo& launch);

void check_mpi_operations(const LaunchInfo& launch) {
  const std::string var = "HOROVOD_CPU_OPERATIONS=MPI";
  if (!mpi_bootstrap_available()) {
    throw ConfigError(launch.rank, var + ": this build has no MPI (accepted: RING)");
  }
  if (launch.size > 1 && launch.launcher != "mpirun" && launch.launcher != "slurm") {
    const std::string by = launch.launcher == "horovod"
                               ? "a launcher that sets HOROVOD_RANK"
                               : launch.launcher;
    throw ConfigError(launch.rank,
                      var + ": this job's " + std::to_string(launch.size) +
                          " ranks were started by " + by +
                          ", and MPI's collectives need them started by mpirun (or ringletrun "
                          "--mpi, or srun with MPI support) (accepted here: RING)");
  }
  // An MPI the program initialized itself is refused here, on every rank,
  // before the rendezvous: not after it, where the first rank to refuse would
  // take the store with it and the others would report losing it instead.
  check_thread_level_if_initialized(launch);
}

#ifndef RINGLET_HAVE_MPI

bool mpi_bootstrap_available() { return false; }

void check_thread_level_if_initialized(const LaunchInfo&) {}

void start_mpi_operations(const LaunchInfo& launch) {
  throw ConfigError(launch.rank, "HOROVOD_CPU_OPERATIONS=MPI: this build has no MPI (accepted: RING)");
}

void complete_launch_with_mpi(LaunchInfo& launch) {
  throw ConfigError("rank " + std::to_string(launch.rank) + " was started by " + launch.launcher +
                    " without RINGLET_RENDEZVOUS, and this build has no MPI to find the other "
                    "ranks with: set RINGLET_RENDEZVOUS or launch with ringletrun");
}

#else

namespace {

// The strings every rank receives from rank 0, in one fixed-size broadcast.
struct Answer {
  char rendezvous[272];
  char secret[72];
};

std::string mpi_error(int code) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int len = 0;
  MPI_Error_string(code, text.data(), &len);
  return std::string(text.data(), static_cast<size_t>(len));
}

void check_mpi(int code, const char* call, int rank) {
  if (code != MPI_SUCCESS) {
    throw ConfigError(rank,
                      std::string(call) + " failed during the MPI bootstrap: " + mpi_error(code));
  }
}

// MPI initialized by Ringlet is finalized when the process exits; a static
// object's destructor is the last point where MPI is still usable.
struct MpiOwner {
  bool owned = false;
  ~MpiOwner() {
    int finalized = 0;
    if (owned && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
  }
};
MpiOwner& mpi_owner() {
  static MpiOwner owner;
  return owner;
}

// Rank 0's draws, from the library's one random source.
std::string random_hex(size_t bytes, int rank) {
  try {
    return common::random_hex(bytes);
  } catch (const std::system_error& e) {
    throw ConfigError(rank, std::string("no random bytes for the job secret: ") + e.what());
  }
}

// The IPv4 address other hosts reach this one at: the first non-loopback
// address the hostname resolves to, or the hostname itself if none does.
std::string host_address(const std::string& hostname) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(hostname.c_str(), nullptr, &hints, &found) != 0) return hostname;
  std::string address = hostname;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    auto* in = reinterpret_cast<sockaddr_in*>(a->ai_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) {
      address = text;
      break;
    }
  }
  freeaddrinfo(found);
  return address;
}

// A port free right now on `address` (bind port 0, read it back, close). The
// store binds it moments later, on the same address: it listens only at the
// rendezvous address (store_server.cc), so the probe must test that address,
// resolved the same way, and never the wildcard. The window in between is
// the usual cost of choosing a port before the process that serves it exists.
uint16_t free_port(const std::string& address, int rank) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(address.c_str(), "0", &hints, &found); rc != 0) {
    throw ConfigError(
        rank, "cannot resolve " + address + " for the rendezvous store: " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, freeaddrinfo);
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw ConfigError(rank, std::string("socket(): ") + strerror(errno));
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  bool ok = ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) {
    throw ConfigError(
        rank, "no free TCP port on " + address + " for the rendezvous store: " + strerror(err));
  }
  return ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
}

void copy_field(char* dst, size_t cap, const std::string& src) {
  std::memset(dst, 0, cap);
  std::memcpy(dst, src.data(), std::min(src.size(), cap - 1));
}

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "thread level " + std::to_string(level);
}

// Initializes MPI, MPI_THREAD_SERIALIZED, unless somebody has; `purpose`
// completes "MPI was already finalized, so it cannot ...". Returns the level
// MPI gives.
int initialize_mpi(int hint, const std::string& purpose) {
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized", hint);
  if (!initialized) {
    int finalized = 0;
    check_mpi(MPI_Finalized(&finalized), "MPI_Finalized", hint);
    if (finalized) {
      throw ConfigError(hint, "MPI was already finalized, so it cannot " + purpose);
    }
    // SERIALIZED: the launch needs only this thread, but with
    // HOROVOD_CPU_OPERATIONS=MPI (now, or in a later init() of this process)
    // the runtime's thread makes the calls. Open MPI treats it as FUNNELED.
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
              "MPI_Init_thread", hint);
    mpi_owner().owned = true;
    return provided;
  }
  int provided = 0;
  check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread", hint);
  return provided;
}

// MPI_COMM_WORLD must be the launch's world.
void check_world(const LaunchInfo& launch) {
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank", launch.rank);
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size", launch.rank);
  if (rank != launch.rank || size != launch.size) {
    throw ConfigError("the " + launch.launcher + " launcher says rank " +
                      std::to_string(launch.rank) + " of " + std::to_string(launch.size) +
                      " but MPI_COMM_WORLD says rank " + std::to_string(rank) + " of " +
                      std::to_string(size));
  }
}

}  // namespace

bool mpi_bootstrap_available() { return true; }

void complete_launch_with_mpi(LaunchInfo& launch) {
  initialize_mpi(launch.rank, "complete the launch; set RINGLET_RENDEZVOUS or launch with ringletrun");
  check_world(launch);

  const int rank = launch.rank;
  const int size = launch.size;
  // All ranks on one host can meet on the loopback address, which needs no
  // working name resolution; otherwise rank 0's routable address is needed.
  constexpr int kHostLen = 256;
  std::vector<char> mine(kHostLen, 0);
  common::host_name().copy(mine.data(), kHostLen - 1);
  std::vector<char> all(static_cast<size_t>(kHostLen) * size, 0);
  check_mpi(MPI_Allgather(mine.data(), kHostLen, MPI_CHAR, all.data(), kHostLen, MPI_CHAR,
                          MPI_COMM_WORLD),
            "MPI_Allgather(hostnames)", rank);
  bool one_host = true;
  for (int r = 1; r < size; ++r) {
    one_host = one_host && std::strncmp(all.data(), all.data() + r * kHostLen, kHostLen) == 0;
  }

  Answer answer{};
  if (rank == 0) {
    std::string host = one_host ? "127.0.0.1" : host_address(mine.data());
    uint16_t port = free_port(host, rank);
    copy_field(answer.rendezvous, sizeof answer.rendezvous, host + ":" + std::to_string(port));
    copy_field(answer.secret, sizeof answer.secret, random_hex(32, rank));
  }
  check_mpi(MPI_Bcast(&answer, sizeof answer, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast(rendezvous)",
            rank);
  launch.rendezvous = answer.rendezvous;
  launch.secret = answer.secret;
  // The job id needs no broadcast: build_world() has every rank adopt rank 0's.
}

// The refusal of an MPI whose thread level is below SERIALIZED: `ours` when
// Ringlet initialized it (MPI gave less than asked), else the program did.
void refuse_thread_level(int provided, bool ours, int rank) {
  if (provided >= MPI_THREAD_SERIALIZED) return;
  throw ConfigError(
      rank, "HOROVOD_CPU_OPERATIONS=MPI: MPI " +
                (ours ? std::string("gives only ")
                      : std::string("was initialized before init() with ")) +
                thread_level_name(provided) +
                ", but Ringlet's background thread makes the MPI calls, which needs "
                "MPI_THREAD_SERIALIZED or more" +
                (ours ? std::string(" (accepted here: RING)")
                      : std::string(": initialize MPI with MPI_Init_thread(..., "
                                    "MPI_THREAD_MULTIPLE, ...) (mpi4py's default), or let "
                                    "Ringlet initialize it")));
}

void check_thread_level_if_initialized(const LaunchInfo& launch) {
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized", launch.rank);
  if (!initialized) return;
  int provided = 0;
  check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread", launch.rank);
  refuse_thread_level(provided, mpi_owner().owned, launch.rank);
}

void start_mpi_operations(const LaunchInfo& launch) {
  const int provided = initialize_mpi(launch.rank, "run HOROVOD_CPU_OPERATIONS=MPI");
  refuse_thread_level(provided, mpi_owner().owned, launch.rank);
  check_world(launch);
}

#endif

}  // namespace ringlet::core
