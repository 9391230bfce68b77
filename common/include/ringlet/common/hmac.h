// HMAC-SHA256 under the job secret: the rendezvous store's messages and the
// tcp data-link handshake. The one place that calls OpenSSL.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ringlet::common {

using Digest = std::array<uint8_t, 32>;

// The key bytes of a RINGLET_SECRET value: hex-decoded when it is an even-length
// hex string (what ringletrun generates), else the text's own bytes, so every
// rank of a job derives the same key from the same variable.
std::vector<uint8_t> secret_key(std::string_view secret);

// SHA-256 of `bytes`.
Digest sha256(std::span<const uint8_t> bytes);

class Hmac {
 public:
  // Throws an invalid-argument Failure for an empty key: HMAC would accept it (as
  // the key 0x00), and a MAC everyone can compute authenticates nothing.
  explicit Hmac(std::vector<uint8_t> key);

  // The MAC of the concatenation of `parts`.
  Digest compute(std::initializer_list<std::span<const uint8_t>> parts) const;

  // Constant-time comparison, so a forger learns nothing from timing.
  static bool equal(std::span<const uint8_t> a, std::span<const uint8_t> b);

 private:
  std::vector<uint8_t> key_;
};

}  // namespace ringlet::common
