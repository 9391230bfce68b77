// This machine's name as the kernel knows it (gethostname). The name a rank
// reports to the others may be overridden by the configuration
// (RINGLET_HOSTNAME: see core/config.h); this is the machine's own.
#pragma once

#include <unistd.h>

#include <climits>
#include <string>

namespace ringlet::common {

// "localhost" when the kernel will not say.
inline std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace ringlet::common
