// NVTX3 ranges in the "Ringlet" domain, so that an Nsight Systems capture
// shows the runtime's API calls and phases beside the framework's kernels.
// Each range carries a payload: the message is the phase name, the uint64
// payload the bytes involved, and the category the tensor count (capped at
// 2^32-1); the dtype is appended to the message when known ("ALLREDUCE float").
//
// Compiles to nothing where the nvtx3 headers are absent (RINGLET_HAVE_NVTX3
// undefined). RINGLET_NVTX=0 (Config::nvtx) turns ranges off at run time at
// the cost of one predictable branch per range.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "ringlet/types.h"

namespace ringlet::core::nvtx {

namespace detail {
extern std::atomic<bool> enabled;
void push(const char* name, uint64_t bytes, int64_t tensors, std::optional<DataType> dtype);
void pop();
}  // namespace detail

// Set from Config::nvtx at runtime start.
void set_enabled(bool on);
// True when this build has NVTX (the headers were found).
bool available();

class Range {
 public:
  Range(const char* name, uint64_t bytes = 0, int64_t tensors = 0,
        std::optional<DataType> dtype = std::nullopt)
      : active_(detail::enabled.load(std::memory_order_relaxed)) {
    if (active_) detail::push(name, bytes, tensors, dtype);
  }
  ~Range() {
    if (active_) detail::pop();
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool active_;
};

}  // namespace ringlet::core::nvtx
