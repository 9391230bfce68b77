// Whether a local peer process still exists. A peer that died but was not yet
// reaped by its parent is a zombie: kill(pid, 0) still succeeds for it, so
// the state letter in /proc/<pid>/stat is checked as well.
#pragma once

#include <sys/types.h>

namespace ringlet::transport::shm {

// True when `pid` has exited (gone, zombie or dead). A few syscalls: call it
// every so often, not on every poll.
bool process_gone(pid_t pid);

}  // namespace ringlet::transport::shm
