#include "ringlet/common/logging.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

namespace ringlet::common {

namespace detail {
std::atomic<int> min_log_level{static_cast<int>(LogLevel::kWarning)};
}  // namespace detail

namespace {

constexpr std::string_view kNames[] = {"trace", "debug", "info", "warning", "error", "fatal"};

std::atomic<int> g_rank{-1};
std::atomic<bool> g_timestamp{false};
std::atomic<int> g_fd{2};
// Set at init, read while formatting a line that is printed.
std::mutex g_host_mu;
std::string g_host;
// Keeps lines of different threads whole where one write() might not be
// (a pipe takes only PIPE_BUF bytes atomically).
std::mutex g_write_mu;

// "2026-12-02 19:40:01.123456 " (local time), or nothing.
size_t put_time(char* out, size_t room) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm tm{};
  if (localtime_r(&secs, &tm) == nullptr) return 0;
  size_t n = std::strftime(out, room, "%Y-%m-%d %H:%M:%S", &tm);
  if (n == 0) return 0;
  const int m = std::snprintf(out + n, room - n, ".%06lld ", static_cast<long long>(micros));
  return m > 0 && static_cast<size_t>(m) < room - n ? n + m : n;
}

void write_all(int fd, const char* data, size_t size) {
  std::lock_guard lock(g_write_mu);
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report a failing log: drop the line
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view text) {
  for (size_t i = 0; i < std::size(kNames); ++i) {
    const std::string_view name = kNames[i];
    if (text.size() != name.size()) continue;
    bool same = true;
    for (size_t j = 0; j < name.size() && same; ++j) {
      same = std::tolower(static_cast<unsigned char>(text[j])) == name[j];
    }
    if (same) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

std::string_view to_string(LogLevel level) {
  const auto i = static_cast<size_t>(level);
  return i < std::size(kNames) ? kNames[i] : "log";
}

void configure_log(const LogSettings& s) {
  g_rank.store(s.rank, std::memory_order_relaxed);
  g_timestamp.store(s.timestamp, std::memory_order_relaxed);
  g_fd.store(s.fd, std::memory_order_relaxed);
  {
    std::lock_guard lock(g_host_mu);
    g_host = s.host;
  }
  detail::min_log_level.store(static_cast<int>(s.level), std::memory_order_relaxed);
}

LogSettings log_settings() {
  std::lock_guard lock(g_host_mu);
  return LogSettings{static_cast<LogLevel>(detail::min_log_level.load(std::memory_order_relaxed)),
                     g_rank.load(std::memory_order_relaxed),
                     g_timestamp.load(std::memory_order_relaxed),
                     g_fd.load(std::memory_order_relaxed), g_host};
}

void log(LogLevel level, const char* format, ...) {
  if (!log_enabled(level)) return;
  // Prefix and message in one buffer, so that the line is one write.
  char line[1024];
  size_t n = 1;
  line[0] = '[';
  if (g_timestamp.load(std::memory_order_relaxed)) n += put_time(line + n, sizeof line - n);
  const int rank = g_rank.load(std::memory_order_relaxed);
  const std::string_view name = to_string(level);
  int p;
  if (rank < 0) {
    p = std::snprintf(line + n, sizeof line - n, "ringlet] %.*s: ", static_cast<int>(name.size()),
                      name.data());
  } else {
    std::lock_guard lock(g_host_mu);
    // A host name is at most 255 bytes (HOST_NAME_MAX, or a DNS name): the
    // prefix still fits the buffer.
    p = g_host.empty()
            ? std::snprintf(line + n, sizeof line - n, "ringlet rank %d] %.*s: ", rank,
                            static_cast<int>(name.size()), name.data())
            : std::snprintf(line + n, sizeof line - n, "ringlet rank %d on %.255s] %.*s: ", rank,
                            g_host.c_str(), static_cast<int>(name.size()), name.data());
  }
  if (p < 0) return;
  n += static_cast<size_t>(p);  // the prefix is far shorter than the buffer

  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int m = std::vsnprintf(line + n, sizeof line - n, format, args);
  va_end(args);
  if (m < 0) {
    va_end(again);
    return;
  }
  const int fd = g_fd.load(std::memory_order_relaxed);
  if (n + static_cast<size_t>(m) + 1 < sizeof line) {
    va_end(again);
    n += static_cast<size_t>(m);
    line[n++] = '\n';
    write_all(fd, line, n);
    return;
  }
  // A long message (a stall naming many tensors): format it again, whole.
  std::string whole(line, n);
  whole.resize(n + static_cast<size_t>(m) + 1);
  std::vsnprintf(whole.data() + n, static_cast<size_t>(m) + 1, format, again);
  va_end(again);
  whole.back() = '\n';
  write_all(fd, whole.data(), whole.size());
}

}  // namespace ringlet::common
