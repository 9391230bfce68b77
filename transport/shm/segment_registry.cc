#include "shm/segment_registry.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ringlet::transport::shm {
namespace {

// Fixed storage: the signal handler may not allocate or lock. Set-up holds at
// most a handful of segments at once (one per peer being connected).
//
// Each slot holds the segment's file path under /dev/shm, computed when it is
// registered, because the handler may call only async-signal-safe functions:
// shm_unlink() is not one (it builds the path, and may allocate), but the
// unlink(2) system call on a ready path is. Linux's POSIX shared memory is a
// tmpfs at /dev/shm, where shm_open(name) is the file /dev/shm/name.
constexpr int kRegistrySlots = 64;
constexpr char kShmDir[] = "/dev/shm";
constexpr size_t kNameBytes = 256 + sizeof kShmDir;

enum : int { kFree = 0, kWriting = 1, kUsed = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  pid_t owner = 0;  // a forked child inherits the table but not the segments
  char path[kNameBytes];  // "/dev/shm/<name>"
};

Slot g_slots[kRegistrySlots];
struct sigaction g_previous[2];
constexpr int kSignals[2] = {SIGINT, SIGTERM};

// Async-signal-safe: lock-free atomic loads, getpid(2) and unlink(2) through
// syscall(2) (no libc wrapper that a sanitizer or a future libc might extend).
void unlink_all() {
  const auto self = static_cast<pid_t>(::syscall(SYS_getpid));
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kUsed && slot.owner == self) {
      ::syscall(SYS_unlink, slot.path);
    }
  }
}

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads slot states");

// "/dev/shm" + name into `out` (kNameBytes); false when it does not fit.
bool shm_path(const char* name, char* out) {
  const size_t len = std::strlen(name);
  if (name[0] != '/' || sizeof kShmDir + len > kNameBytes) return false;
  std::memcpy(out, kShmDir, sizeof kShmDir - 1);
  std::memcpy(out + sizeof kShmDir - 1, name, len + 1);
  return true;
}

void on_signal(int sig, siginfo_t* info, void* context) {
  // The interrupted code may be about to read errno: leave it as it was.
  const int saved_errno = errno;
  unlink_all();
  errno = saved_errno;
  int which = sig == SIGINT ? 0 : 1;
  const struct sigaction& prev = g_previous[which];
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler == SIG_IGN) return;
  if (prev.sa_handler == SIG_DFL) {
    // Restore the default and re-raise: the signal is blocked while we run,
    // so it is delivered (and ends the process) as soon as we return.
    ::sigaction(sig, &prev, nullptr);
    ::raise(sig);
    return;
  }
  prev.sa_handler(sig);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < 2; ++i) {
      struct sigaction action {};
      action.sa_sigaction = on_signal;
      action.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&action.sa_mask);
      ::sigaction(kSignals[i], &action, &g_previous[i]);
    }
    std::atexit(unlink_all);
  });
}

}  // namespace

void register_segment(const char* name) {
  install_once();
  char path[kNameBytes];
  if (!shm_path(name, path)) return;
  for (Slot& slot : g_slots) {
    int expected = kFree;
    if (slot.state.compare_exchange_strong(expected, kWriting)) {
      std::memcpy(slot.path, path, sizeof path);
      slot.owner = ::getpid();
      slot.state.store(kUsed, std::memory_order_release);
      return;
    }
  }
}

void forget_segment(const char* name) {
  char path[kNameBytes];
  if (!shm_path(name, path)) return;
  pid_t self = ::getpid();
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kUsed && slot.owner == self &&
        std::strcmp(slot.path, path) == 0) {
      slot.state.store(kFree, std::memory_order_release);
      return;
    }
  }
}

}  // namespace ringlet::transport::shm
