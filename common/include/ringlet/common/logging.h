// The library's one way to say something outside an error: a line on stderr
// (or the descriptor set here), filtered by level, with the rank in every
// line. Horovod's levels; the settings come from HOROVOD_LOG_LEVEL and
// HOROVOD_LOG_TIMESTAMP through the configuration table at init.
//
// A line reads
//   [ringlet rank 3 on node7] warning: <message>
// with the local time in front of "ringlet" when timestamps are on
//   [2026-12-02 19:40:01.123456 ringlet rank 3 on node7] warning: <message>
// "[ringlet rank 3]" while the host is not set, and "[ringlet]" alone before
// the rank is known.
//
// Thread-safe; each line is one write(); a filtered-out message costs one
// relaxed load and formats nothing (no allocation).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>

namespace ringlet::common {

enum class LogLevel : int { kTrace, kDebug, kInfo, kWarning, kError, kFatal };

// "trace", "debug", "info", "warning", "error", "fatal", in any case.
std::optional<LogLevel> parse_log_level(std::string_view text);
std::string_view to_string(LogLevel level);  // lower case, as in a line

struct LogSettings {
  LogLevel level = LogLevel::kWarning;  // the least severe level printed
  int rank = -1;                        // -1: not known yet
  bool timestamp = false;               // local time at the start of every line
  int fd = 2;                           // where lines go
  std::string host;                     // the rank's host, as the job names it; "" = unsaid
};

// Takes effect for every later line, on every thread.
void configure_log(const LogSettings& settings);
LogSettings log_settings();

namespace detail {
extern std::atomic<int> min_log_level;
}

inline bool log_enabled(LogLevel level) {
  return static_cast<int>(level) >= detail::min_log_level.load(std::memory_order_relaxed);
}

// printf-style: formats and writes one line when `level` is enabled. The
// message needs no trailing newline.
void log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace ringlet::common
