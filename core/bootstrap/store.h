// The rendezvous store: a key-value map served by rank 0 over TCP, through
// which ranks exchange hostnames and transport addresses at start-up. Every
// message carries an HMAC-SHA256 of its body under the job secret; the server
// drops (and logs) anything unauthenticated, truncated or malformed, and is
// never blocked by a client that stalls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringlet/transport/transport.h"

namespace ringlet::core {

class StoreServer {
 public:
  // Listens on `port` (0 = any free one) on all interfaces, serving from a
  // background thread until destroyed.
  StoreServer(uint16_t port, std::string secret);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  uint16_t port() const;
  // Messages refused so far (bad HMAC, truncated, malformed): for tests.
  uint64_t refused() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class StoreClient : public transport::KeyValue {
 public:
  // Connects to host:port, retrying until the deadline (the server may start later).
  StoreClient(const std::string& host_port, std::string secret, int rank,
              transport::Deadline deadline);
  ~StoreClient() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, transport::Deadline deadline) override;
  // Atomically adds `delta` to the integer stored at key; returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  // Every rank of `size` calls barrier(name) once; returns when all have.
  void barrier(const std::string& name, int size, transport::Deadline deadline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlet::core
