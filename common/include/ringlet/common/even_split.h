// Horovod's even split of `count` items over `parts` ranks: each gets
// count / parts, and the first count % parts ranks one more. Reducescatter's
// outputs, the ring's blocks and alltoall's default splits all follow it, so
// that every rank derives the same blocks without a message.
#pragma once

#include <cstddef>

namespace ringlet::common {

// Items of part `i` (0 <= i < parts, parts > 0).
constexpr size_t even_share(size_t count, size_t parts, size_t i) {
  return count / parts + (i < count % parts ? 1 : 0);
}

// Items before part `i`: where part `i` starts.
constexpr size_t even_offset(size_t count, size_t parts, size_t i) {
  const size_t extra = count % parts;
  return i * (count / parts) + (i < extra ? i : extra);
}

}  // namespace ringlet::common
