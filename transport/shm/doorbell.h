// Futex operations on a Doorbell (declared in shared_window.h because the
// window's wait_until uses it). The doorbell lives in shared memory, so the
// futex is the shared (non-private) kind.
//
// Protocol, free of lost wake-ups: a waiter reads `rings` (seen), checks its
// condition, then sleeps only while `rings` still equals seen. A ringer first
// changes the condition, then increments `rings`, and makes the wake syscall
// only when someone announced itself in `sleepers`. Both sides use
// sequentially consistent operations on rings and sleepers, so either the
// ringer sees the sleeper or the sleeper sees the new ring count.
#pragma once

#include <chrono>
#include <cstdint>

#include "ringlet/transport/shared_window.h"

namespace ringlet::transport::shm {

void ring(Doorbell& bell);

// Sleeps until the bell rings after `seen`, or the timeout passes.
void sleep_on(Doorbell& bell, uint32_t seen, std::chrono::microseconds timeout);

}  // namespace ringlet::transport::shm
