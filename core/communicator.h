// A communicator: the world, its links to peers, and the shared-memory window
// of this host. The collectives run on it. Built once at init() and driven by
// one thread at a time.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/bootstrap/world.h"
#include "core/config.h"
#include "ringlet/transport/shared_window.h"
#include "ringlet/transport/transport.h"

namespace ringlet::core {

class Communicator {
 public:
  // Rendezvous, world, carriers and (where all ranks share the host) the window.
  static std::unique_ptr<Communicator> create(const Config& config, const LaunchInfo& launch);
  ~Communicator();

  const World& world() const { return world_; }
  const Config& config() const { return config_; }
  int rank() const { return world_.rank; }
  int size() const { return world_.size; }

  // The link to `peer`, connected on first use (both ends must ask).
  transport::Pair& pair(int peer);
  // The window over this host's ranks; null unless every rank is on this host
  // and the configuration allows shared memory.
  transport::SharedWindow* window() const { return window_.get(); }

  // A deadline `config().timeout` from now.
  transport::Deadline deadline() const;

  // Drives progress until every request is done: spins, then yields, then
  // blocks in the carriers. Throws transport::PeerLost / Timeout naming the
  // peer of a request that did not complete.
  void wait_all(std::span<transport::Request* const> requests,
                std::span<transport::Pair* const> pairs, transport::Deadline deadline);

  // Marks this communicator failed so that peers waiting on it stop at once.
  void abort(const std::string& why);

  StoreClient& store() { return *store_; }

 private:
  Communicator() = default;

  Config config_;
  World world_;
  std::unique_ptr<StoreServer> store_server_;  // rank 0 only
  std::unique_ptr<StoreClient> store_;
  std::vector<std::unique_ptr<transport::Carrier>> carriers_;  // owned carriers
  std::vector<transport::Carrier*> carrier_of_;                // per peer
  std::vector<std::unique_ptr<transport::Pair>> pairs_;        // per peer, lazily
  std::unique_ptr<transport::SharedWindow> window_;
};

}  // namespace ringlet::core
