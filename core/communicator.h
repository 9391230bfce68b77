// A communicator: the world, its links to peers, and the shared-memory window
// of this host. The collectives run on it. Built once at init() and driven by
// one thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/world.h"
#include "core/config.h"
#include "ringlet/common/failure.h"
#include "ringlet/transport/shared_window.h"
#include "ringlet/transport/transport.h"

namespace ringlet::core {

struct LinkPlan;  // which carriers reach which peers (core/bootstrap/link_plan.h)

namespace collectives {
struct Workspace;       // scratch, request records and round counters of the algorithms
class MpiCommunicator;  // HOROVOD_CPU_OPERATIONS=MPI: MPI's communicator over the same ranks
}  // namespace collectives

class Communicator {
 public:
  // Rendezvous, world, carriers and (where all ranks share the host) the window.
  // The links to the ring neighbours are connected here; others on first use.
  // `interrupted` is asked while the rendezvous waits for the other ranks
  // (StoreClient::Interrupt), on this thread, and dropped before this returns.
  static std::unique_ptr<Communicator> create(const Config& config, const LaunchInfo& launch,
                                              StoreClient::Interrupt interrupted = {});
  // A communicator over some of `parent`'s ranks (a process set): `members`
  // are the parent's ranks, ascending, this rank among them; its ranks are
  // their indices. It borrows the parent's links and store (the parent must
  // outlive it) and, where the parent has a shared window, creates its own,
  // named `name` (the same on every member, unique in the job), and where the
  // parent has an MPI communicator, its own over the members. Collective
  // over the members only; connects every pair among them.
  static std::unique_ptr<Communicator> create_subset(Communicator& parent,
                                                     const std::vector<int>& members,
                                                     const std::string& name);
  ~Communicator();

  // The two groups of a hierarchical collective (core/collectives/
  // hierarchical_*.cc), built at the first call: collective over this
  // communicator's ranks, which all call it at the same collective. `host`
  // holds this communicator's ranks on this rank's host (with a shared window
  // unless RINGLET_TRANSPORT=tcp), in rank order; `cross` holds, one per host,
  // the ranks whose index within their host's ranks is this rank's, in rank
  // order (hosts lacking that index have none in it). Both run over the
  // world's links and fail with the world, as a process set does.
  struct HostGroups {
    Communicator* host = nullptr;
    Communicator* cross = nullptr;
  };
  HostGroups host_groups();

  const World& world() const { return world_; }
  const Config& config() const { return config_; }
  int rank() const { return world_.rank; }
  int size() const { return world_.size; }
  // The world's rank of this communicator's rank r, and back (-1: not a
  // member). The identity except on a process set's communicator.
  int global_rank(int r) const { return members_.empty() ? r : members_.at(r); }
  int rank_of_global(int global) const;

  // The link to `peer`, connected on first use (both ends must ask).
  transport::Pair& pair(int peer);
  // Connects every pair not yet connected, in an order that cannot deadlock
  // (pairs (a, b), a < b, in lexicographic order on every rank). Collective.
  void connect_all();
  // The window over this host's ranks; null unless every rank is on this host
  // and the configuration allows shared memory.
  transport::SharedWindow* window() const { return window_.get(); }
  // MPI's communicator over the same ranks, which runs the host collectives
  // (HOROVOD_CPU_OPERATIONS=MPI); null otherwise, and in a job of one rank.
  collectives::MpiCommunicator* mpi() const { return mpi_.get(); }

  // A deadline `config().timeout` from now.
  transport::Deadline deadline() const;

  // Drives progress until every request is done: spins, then yields, then
  // blocks in the carriers. Throws transport::PeerLost / Timeout naming the
  // peer of a request that did not complete.
  void wait_all(std::span<transport::Request* const> requests,
                std::span<transport::Pair* const> pairs, transport::Deadline deadline);

  // One turn of the waiting policy for loops that complete requests one by
  // one: progresses the pairs; after `idle` turns without movement it yields,
  // then blocks briefly in the carriers. Returns true if anything moved (and
  // resets idle). At the deadline throws Timeout naming `waiting_for`.
  bool progress_or_wait(std::span<transport::Pair* const> pairs, int& idle,
                        transport::Deadline deadline, int waiting_for);

  // Marks this communicator failed so that peers waiting on it stop at once:
  // publishes `why` in the store (on a thread of its own: the store's owner,
  // rank 0, may be gone), aborts the window and closes every link.
  void abort(const common::Failure& why);

  // Decides again how waits spin, for `threads` busy threads per rank (the
  // runtime's background thread beside the application's). Changes nothing
  // unless RINGLET_SPIN was left to auto.
  void set_busy_threads_per_rank(int threads);
  // A process set's communicator fails with its parent and aborts it.
  bool failed() const { return first_.has_value() || (parent_ != nullptr && parent_->failed()); }
  // The failure that failed it first (this communicator's or its parent's).
  common::Failure failure() const;
  // What a call on it reports once it failed: the first failure's kind and
  // peer, reported by this rank as learnt earlier.
  common::Failure failed_earlier() const;
  // Why `peer` failed, as it published with abort(), if that appears within
  // `wait`: its message, its kind, and the rank it lost or timed out waiting
  // for (-1 for other kinds).
  struct PeerFailure {
    std::string what;
    common::FailureKind kind = common::FailureKind::kInternal;
    int peer = -1;
  };
  std::optional<PeerFailure> failure_of(int peer, std::chrono::milliseconds wait);

  // A process set's name; empty for the job's own communicator.
  const std::string& name() const { return name_; }

  // The carrier that links this rank to `peer` ("shm", "tcp", "ucx").
  std::string_view carrier_name(int peer) const;

  // The job's rendezvous store. A world of one started without a launcher
  // (`python train.py`) has none, and needs none: it has nobody to exchange
  // anything with. store() then throws an internal error naming the caller's
  // mistake rather than handing out a null reference.
  bool has_store() const { return parent_ != nullptr ? parent_->has_store() : store_ != nullptr; }
  StoreClient& store();
  collectives::Workspace& workspace() { return *workspace_; }

 private:
  Communicator();
  // create's steps after the rendezvous: the carriers the plan names and
  // which reaches each peer; the window over the job's one host; the links to
  // this rank's ring neighbours.
  void make_links(const LinkPlan& plan);
  void open_world_window(transport::Deadline deadline);
  void connect_ring_neighbours(transport::Deadline deadline);
  // Says at debug level that the link to `peer` is up, and over what.
  void tell_connected(int peer) const;

  Config config_;
  World world_;
  Communicator* parent_ = nullptr;      // a process set's: the world's communicator
  std::vector<Communicator*> subsets_;  // the world's: its live process sets' (to abort)
  std::vector<int> members_;  // a process set's: global rank of each rank; empty for the world
  std::string name_;          // a process set's (names its window); empty for the world
  // host_groups(), once built; released first at destruction.
  std::unique_ptr<Communicator> host_group_, cross_group_;
  std::unique_ptr<collectives::Workspace> workspace_;  // outlives the pairs
  std::unique_ptr<StoreServer> store_server_;          // rank 0 only
  std::unique_ptr<StoreClient> store_;
  std::string rendezvous_, secret_;  // for the abort publisher's own connection
  std::vector<std::unique_ptr<transport::Carrier>> carriers_;  // owned carriers
  std::vector<transport::Carrier*> carrier_of_;                // per peer
  std::vector<std::unique_ptr<transport::Pair>> pairs_;        // per peer, lazily
  std::unique_ptr<transport::SharedWindow> window_;
  std::unique_ptr<collectives::MpiCommunicator> mpi_;
  transport::WaitPolicy wait_policy_;  // from RINGLET_SPIN and the placement
  unsigned host_cpus_ = 0;  // CPUs of this host for its ranks (the topology's); 0: not known
  std::optional<common::Failure> first_;  // the first failure; set: this communicator failed
  // Publishes this rank's failure under its own store connection; joined at
  // destruction (bounded: a 2 s connect, then one set).
  std::jthread abort_publisher_;
  transport::Clock::time_point idle_since_{};  // start of the current idle spell
};

}  // namespace ringlet::core
