// The UCX carrier: one UCP context and worker per carrier (worker.h), its
// address published as "ucx/addr/<rank>" through the store, and pairs set up
// by LinkSetup (endpoint plus the data-link handshake) in connect().
//
// What UCX runs on is UCX's choice, under its own variables: UCX_TLS,
// UCX_NET_DEVICES and the rest are read as UCX reads them and never
// overridden (RINGLET_NETWORK_INTERFACE is a TCP carrier setting). Where
// they are unset, worker.cc sets a short keepalive and, on hosts without RDMA
// devices, a protocol threshold and segment sizes fit for the ring's posts.
//
// Memory: host memory always; CUDA memory only where UCX itself was built
// with CUDA support (its context reports the CUDA memory type), which
// Debian's UCX is not.
#include <memory>
#include <set>

#include "ucx/link_setup.h"
#include "ucx/tags.h"
#include "ucx/ucx_pair.h"
#include "ucx/worker.h"

namespace ringlet::transport {
namespace ucx {
namespace {

namespace hs = tcp::handshake;

class UcxCarrier final : public Carrier {
 public:
  explicit UcxCarrier(const CarrierOptions& options)
      : rank_(options.rank), size_(options.size), secret_(options.secret) {
    if (options.store == nullptr) throw Error(-1, "ucx: CarrierOptions::store is required");
    if (secret_.empty()) {
      throw Error(rank_, -1,
                  "ucx: no job secret (CarrierOptions::secret is empty): data "
                  "links are never opened unauthenticated");
    }
    if (size_ > kMaxRanks) {
      throw Error(rank_, -1,
                  "ucx: a job of " + std::to_string(size_) + " ranks; UCX links carry at most " +
                      std::to_string(kMaxRanks));
    }
    worker_ = Worker::create(rank_, size_);
    hs::Identity me;
    me.key = std::span(reinterpret_cast<const uint8_t*>(secret_.data()), secret_.size());
    me.job = hs::job_digest(options.job_id);
    me.rank = rank_;
    me.size = size_;
    me.link = hs::kUcxLink;
    // The handshake receive is posted before the address is published, so
    // that no HELLO arrives before it.
    setup_ = std::make_unique<LinkSetup>(worker_, me, options.store);
    options.store->set("ucx/addr/" + std::to_string(rank_), worker_->address());
  }

  std::string_view name() const override { return "ucx"; }
  bool supports(MemoryKind kind) const override {
    return kind == MemoryKind::kHost || (kind == MemoryKind::kCuda && worker_->cuda());
  }

  std::unique_ptr<Pair> connect(int peer, Deadline deadline) override {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      throw Error(rank_, peer,
                  "cannot connect to rank " + std::to_string(peer) + " (job size " +
                      std::to_string(size_) + ")");
    }
    // A pair's tags start again at sequence 0: messages a former link left
    // unreceived in the worker would match the new one's receives.
    if (linked_.count(peer) != 0) {
      throw Error(rank_, peer,
                  "ucx: rank " + std::to_string(rank_) + " already linked rank " +
                      std::to_string(peer) + " on this carrier; each pair is linked once");
    }
    std::unique_ptr<Endpoint> ep =
        rank_ > peer ? setup_->dial(peer, deadline) : setup_->accept(peer, deadline);
    auto pair = std::make_unique<UcxPair>(rank_, peer, std::move(ep));
    linked_.insert(peer);
    return pair;
  }

  void wait_for_activity(std::chrono::microseconds timeout) override { worker_->wait(timeout); }

 private:
  int rank_;
  int size_;
  std::string secret_;  // the key bytes the handshake's identity points into
  std::shared_ptr<Worker> worker_;
  std::unique_ptr<LinkSetup> setup_;
  std::set<int> linked_;
};

}  // namespace
}  // namespace ucx

std::unique_ptr<Carrier> make_ucx_carrier(const CarrierOptions& options) {
  return std::make_unique<ucx::UcxCarrier>(options);
}

}  // namespace ringlet::transport
