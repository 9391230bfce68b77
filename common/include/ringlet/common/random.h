// The one source of randomness for everything an attacker must not predict:
// job secrets, job ids and the nonces of every handshake. The kernel's CSPRNG
// through getrandom(2), which never returns bytes before the pool is seeded.
//
// Header-only so that ringletrun, which links nothing of the library but
// common/, draws from the very same source.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "ringlet/common/failure.h"

namespace ringlet::common {

// Fills `out` with cryptographically random bytes. Throws an internal
// common::Failure when the kernel gives none (no getrandom(2): a kernel older
// than 3.17).
inline void random_bytes(std::span<uint8_t> out) {
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Failure(FailureKind::kInternal, std::string("no random bytes from getrandom(2): ") +
                                                std::strerror(n < 0 ? errno : EIO));
    }
    got += static_cast<size_t>(n);
  }
}

// `bytes` random bytes as lower-case hex (2 * bytes characters).
inline std::string random_hex(size_t bytes) {
  std::vector<uint8_t> raw(bytes);
  random_bytes(raw);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (uint8_t c : raw) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex;
}

}  // namespace ringlet::common
