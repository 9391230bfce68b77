// Durations as a person reads them in a message.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace ringlet::common {

// A duration that was set (a timeout, a deadline): as precise as it was
// written, "30 s", "0.5 s", "0.001 s".
inline std::string seconds_text(std::chrono::nanoseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", std::chrono::duration<double>(d).count());
  return buf;
}

// A duration that was measured (how long something took): tenths, "3.2 s".
inline std::string elapsed_text(std::chrono::nanoseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace ringlet::common
