#include "shm/segment_registry.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ringlet::transport::shm {
namespace {

// Fixed storage: the signal handler may not allocate or lock. Set-up holds at
// most a handful of segments at once (one per peer being connected).
constexpr int kSlots = 64;
constexpr size_t kNameBytes = 256;

enum : int { kFree = 0, kWriting = 1, kUsed = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  pid_t owner = 0;  // a forked child inherits the table but not the segments
  char name[kNameBytes];
};

Slot g_slots[kSlots];
struct sigaction g_previous[2];
constexpr int kSignals[2] = {SIGINT, SIGTERM};

void unlink_all() {
  pid_t self = ::getpid();
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kUsed && slot.owner == self) {
      ::shm_unlink(slot.name);
    }
  }
}

void on_signal(int sig, siginfo_t* info, void* context) {
  unlink_all();
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
  if (std::strlen(name) >= kNameBytes) return;
  for (Slot& slot : g_slots) {
    int expected = kFree;
    if (slot.state.compare_exchange_strong(expected, kWriting)) {
      std::strcpy(slot.name, name);
      slot.owner = ::getpid();
      slot.state.store(kUsed, std::memory_order_release);
      return;
    }
  }
}

void forget_segment(const char* name) {
  pid_t self = ::getpid();
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kUsed && slot.owner == self &&
        std::strcmp(slot.name, name) == 0) {
      slot.state.store(kFree, std::memory_order_release);
      return;
    }
  }
}

}  // namespace ringlet::transport::shm
