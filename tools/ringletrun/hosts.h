// Where the ranks may run, as named by -H or --hostfile. This version of
// ringletrun starts ranks on this host only, so the host list is used to
// check the request, never silently narrowed: a host other than this one is
// an error, not something to skip.
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

}  // namespace ringletrun
