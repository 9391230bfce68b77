#include "ringlet/common/hmac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <mutex>

#include "ringlet/common/failure.h"

namespace ringlet::common {
namespace {

// OpenSSL frees its tables from an atexit handler by default. A process that
// returns from main with the job still up runs that handler before Ringlet's
// own teardown, whose store thread may still authenticate a peer's message:
// it would call into a cleaned-up library. Initialising without the handler
// leaves the tables to the process's end.
void init_openssl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) != 1)
      throw Failure(FailureKind::kInternal, "OpenSSL failed to initialise");
  });
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::vector<uint8_t> secret_key(std::string_view secret) {
  std::vector<uint8_t> key;
  bool hex = !secret.empty() && secret.size() % 2 == 0;
  for (char c : secret) hex = hex && hex_value(c) >= 0;
  if (hex) {
    for (size_t i = 0; i < secret.size(); i += 2) {
      key.push_back(static_cast<uint8_t>(hex_value(secret[i]) * 16 + hex_value(secret[i + 1])));
    }
  } else {
    key.assign(secret.begin(), secret.end());
  }
  return key;
}

Digest sha256(std::span<const uint8_t> bytes) {
  init_openssl_once();
  Digest out{};
  SHA256(bytes.data(), bytes.size(), out.data());
  return out;
}

Hmac::Hmac(std::vector<uint8_t> key) : key_(std::move(key)) {
  if (key_.empty()) throw caller_error("ringlet: HMAC-SHA256 with an empty key");
  init_openssl_once();
}

Digest Hmac::compute(std::initializer_list<std::span<const uint8_t>> parts) const {
  // Messages are small (keys, hostnames, addresses), so one contiguous copy
  // and the one-shot HMAC() are simpler than a context and cost nothing that matters.
  size_t total = 0;
  for (auto p : parts) total += p.size();
  std::vector<uint8_t> data;
  data.reserve(total);
  for (auto p : parts) data.insert(data.end(), p.begin(), p.end());
  Digest out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), data.data(), data.size(),
           out.data(), &len) == nullptr ||
      len != out.size()) {
    throw Failure(FailureKind::kInternal, "HMAC-SHA256 failed in OpenSSL");
  }
  return out;
}

bool Hmac::equal(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ringlet::common
