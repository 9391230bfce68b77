// Where the ranks run, as named by -H or --hostfile, and who each rank is on
// its host. Entries that name this machine (localhost, its name, 127.0.0.1)
// are one host; every other name is a host reached through the remote shell.
#pragma once

#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace ringletrun {

struct HostSlots {
  std::string host;
  int slots = 1;  // horovodrun's default for a host named without ":N"
};

// "-H host1:4,host2:2,host3". Throws std::invalid_argument on a malformed entry.
std::vector<HostSlots> parse_host_list(std::string_view list);

// A hostfile: one host per line, "host slots=N" (Open MPI's and horovodrun's
// form) or "host:N" or "host"; '#' starts a comment. Throws std::invalid_argument.
std::vector<HostSlots> parse_hostfile(std::istream& in);

// localhost, 127.0.0.1, ::1, or this machine's name (`hostname`, with or
// without its domain).
bool is_local_host(std::string_view host, std::string_view this_hostname);

std::string this_hostname();

// Where one rank runs and who it is there, as horovodrun numbers them: local
// ranks within the host, and the cross rank among the hosts that have a rank
// of the same local rank.
struct RankPlace {
  std::string host;  // as named; empty for this machine
  int host_index = 0;  // hosts numbered in the order their first rank comes
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  bool local() const { return host.empty(); }
};

// Ranks 0..np-1 fill the hosts in the order named, each up to its slots.
// Throws std::invalid_argument when the slots do not add up to np.
std::vector<RankPlace> place_ranks(const std::vector<HostSlots>& hosts, int np,
                                   std::string_view this_hostname);

// Every rank on this machine (no -H, no --hostfile).
std::vector<RankPlace> place_here(int np);

// The IPv4 address of `interface` here, or with an empty name this host's
// first non-loopback one that is up. Throws std::invalid_argument naming the
// interface and the ones this host has, when it has no such address.
std::string interface_address(std::string_view interface);

}  // namespace ringletrun
