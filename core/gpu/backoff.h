// How the device collectives' host-side polls wait between looks: short
// turns first, so that a collective of a few microseconds is not charged a
// sleep; then sleeps, so that a long one leaves the core to the
// application's threads. One counter per wait.
#pragma once

#include <chrono>
#include <thread>

namespace ringlet::core::gpu {

inline void backoff(int& turns) {
  if (++turns < 256) return;
  std::this_thread::sleep_for(std::chrono::microseconds(turns < 1024 ? 5 : 50));
}

}  // namespace ringlet::core::gpu
