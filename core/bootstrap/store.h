// The rendezvous store: a key-value map served by rank 0 over TCP, through
// which ranks exchange hostnames and transport addresses at start-up. Every
// message carries an HMAC-SHA256 of its body under the job secret; the server
// drops (and logs) anything unauthenticated, truncated or malformed, and is
// never blocked by a client that stalls. The wire format is in store_wire.h.
//
// The secret is RINGLET_SECRET: hex (as ringletrun generates it) is decoded,
// any other text is used as it is. It must not be empty: server and client
// refuse to start without one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringlet/transport/transport.h"

namespace ringlet::core {

class StoreServer {
 public:
  // Listens on `port` (0 = any free one) at every address `host` resolves to
  // (the host of RINGLET_RENDEZVOUS) and nowhere else, serving from a
  // background thread until destroyed. Throws an invalid-argument
  // common::Failure for an empty secret and a ConfigError if it cannot
  // listen (the message names the address and the cause).
  StoreServer(const std::string& host, uint16_t port, std::string secret);
  // On 127.0.0.1 only.
  StoreServer(uint16_t port, std::string secret);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  uint16_t port() const;
  // Messages refused so far (bad HMAC, truncated, malformed): for tests.
  uint64_t refused() const;
  // Clients connected now (this process's own among them).
  size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class StoreClient : public transport::KeyValue {
 public:
  // Connects to host:port, retrying until the deadline (the server may start
  // later); `rank` only names this client in errors. Every call but get() has a
  // 30 s deadline. Failures throw transport::Timeout (a deadline passed),
  // transport::PeerLost (the store was lost), a transport failure (a reply
  // outside the store's protocol, or the store refused ours) or another
  // common::Failure, naming the rank, peer 0 (the store's rank), the key and
  // the store's address. Calls are serialized by a mutex. An empty secret
  // throws an invalid-argument common::Failure.
  //
  // `interrupted`, where given, is asked every 50 ms while a call waits (for
  // the store to come up or to answer, the rendezvous's waits for ranks that
  // have not arrived); true abandons the call with a kShutdown
  // common::Failure, so that set-up on a caller's thread can serve that
  // caller's signals. It runs on the waiting thread. Once this client has
  // changed the store (a set or an add went out), the other ranks count this
  // one in: an interrupt then abandons the rendezvous for this process, the
  // failure says the job must be started again, and a later client of the
  // same rendezvous (address and secret) here throws that kShutdown failure
  // at once.
  using Interrupt = std::function<bool()>;
  StoreClient(const std::string& host_port, std::string secret, int rank,
              transport::Deadline deadline, Interrupt interrupted = {});
  ~StoreClient() override;

  // Replaces `interrupted` (empty: none), e.g. once set-up is over and other
  // threads use the store.
  void set_interrupt(Interrupt interrupted);

  // The local address (numeric, no port) of this client's first connection
  // to the store: the address this host reaches rank 0 from.
  const std::string& local_address() const;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, transport::Deadline deadline) override;
  // The value if the key is set now, else nullopt; never waits for a set.
  std::optional<std::vector<uint8_t>> try_get(const std::string& key);
  // Leaves `value` for the server to set at `key` when this client's
  // connection closes (its process ended, however it ended), unless the key
  // is set by then. A later call replaces it.
  void set_will(const std::string& key, const std::vector<uint8_t>& value);
  // Atomically adds `delta` to the integer stored at key (decimal text; a
  // missing key counts as 0); returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  // Every rank of `size` calls barrier(name) once; returns when all have.
  void barrier(const std::string& name, int size, transport::Deadline deadline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlet::core
