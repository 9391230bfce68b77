// Communicator set-up (store, world, carriers, window, ring links) and the
// waiting policy shared by the algorithms.
#include "core/communicator.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "core/bootstrap/job_settings.h"
#include "core/bootstrap/link_plan.h"
#include "core/bootstrap/placement.h"
#include "core/collectives/workspace.h"
#include "core/mpi/mpi_bootstrap.h"
#include "core/mpi/mpi_communicator.h"
#include "ringlet/common/duration_text.h"
#include "ringlet/common/hmac.h"
#include "ringlet/common/logging.h"

namespace ringlet::core {

namespace {

using transport::Clock;
using transport::Deadline;

// host:port → port; ConfigError naming the variable when malformed.
uint16_t rendezvous_port(const std::string& rendezvous) {
  const auto colon = rendezvous.rfind(':');
  std::optional<int64_t> port;
  if (colon != std::string::npos)
    port = parse_int64(std::string_view(rendezvous).substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    throw ConfigError("RINGLET_RENDEZVOUS='" + rendezvous + "': expected host:port");
  }
  return static_cast<uint16_t>(*port);
}

using common::seconds_text;

// The host part of host:port ("[v6]:port" loses its brackets).
std::string rendezvous_host(const std::string& rendezvous) {
  std::string host = rendezvous.substr(0, rendezvous.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

// Where rank r publishes why it failed.
std::string abort_key(int rank) { return "ringlet/abort/" + std::to_string(rank); }

// The rank a failure blames: the one lost, or the one waited for in vain; -1
// for other kinds.
int culprit_of(const common::Failure& f) {
  const bool blames =
      f.kind() == common::FailureKind::kPeerLost || f.kind() == common::FailureKind::kTimeout;
  return blames ? f.peer() : -1;
}

// The last-level cache of cpu0 in bytes ("32768K" in sysfs), 0 if unknown;
// what the tuning takes where the topology does not say.
size_t llc_bytes() {
  FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  if (f == nullptr) return 0;
  unsigned long long v = 0;
  char unit = 0;
  const int got = std::fscanf(f, "%llu%c", &v, &unit);
  std::fclose(f);
  if (got < 1) return 0;
  if (unit == 'K') v <<= 10;
  if (unit == 'M') v <<= 20;
  return static_cast<size_t>(v);
}

// RINGLET_SPIN=auto. With more ranks (or busy threads) than cores a spinning
// rank holds the core that the rank it waits for needs: going straight to
// sched_yield was 20x faster for a 4 KiB allreduce at 4 ranks on 2 cores. With
// a core of its own, spinning is the fastest wait (0.7 us at 2 ranks), and it
// must outlast a peer's round of a collective (0.2-0.5 ms for a 1 MiB round):
// a rank that sleeps between rounds pays a futex wake-up in every round, and
// on a virtual machine, whose idle vCPU halts, that took a 16 MiB allreduce's
// p99 to 2-4x its median where a 1 ms spin kept it at 1.3-1.7x (in the runs
// quiet enough to tell; under a noisy host both reach 4x).
constexpr std::chrono::microseconds kAutoSpinTime{1000};

transport::WaitPolicy wait_policy(int spin_iterations, bool oversubscribed) {
  transport::WaitPolicy p;
  if (spin_iterations >= 0) {
    p.spin_iterations = spin_iterations;
    return p;
  }
  p.spin_iterations = 0;
  p.spin_time = oversubscribed ? std::chrono::microseconds(0) : kAutoSpinTime;
  return p;
}

#if RINGLET_HAVE_UCX
constexpr bool kHaveUcx = true;
#else
constexpr bool kHaveUcx = false;
#endif

// What a rank says once at info level about its links: which carrier reaches
// which peers, where TCP listens and why, and the ring.
void tell_transport(const Communicator& c, TransportKind asked, const std::string& address,
                    const std::string& address_why) {
  if (!common::log_enabled(common::LogLevel::kInfo)) return;
  const World& w = c.world();
  std::map<std::string, int> peers_by_carrier;
  for (int peer = 0; peer < w.size; ++peer) {
    if (peer != w.rank) ++peers_by_carrier[std::string(c.carrier_name(peer))];
  }
  std::string links;
  for (const auto& [name, count] : peers_by_carrier) {
    links += (links.empty() ? "" : ", ") + name + " to " + std::to_string(count) +
             (count == 1 ? " rank" : " ranks");
  }
  std::string ring;
  for (size_t i = 0; i < w.ring.size(); ++i) {
    const bool new_host = i > 0 && w.host_of[w.ring[i]] != w.host_of[w.ring[i - 1]];
    ring += (i == 0 ? "" : new_host ? " | " : " ") + std::to_string(w.ring[i]);
  }
  common::log(common::LogLevel::kInfo,
              "transport (RINGLET_TRANSPORT=%s): %s; data links on %s (%s); %d host(s), this one "
              "holds local rank %d of %d; ring %s",
              std::string(to_string(asked)).c_str(), links.empty() ? "no peers" : links.c_str(),
              peers_by_carrier.count("tcp") ? address.c_str() : "no TCP", address_why.c_str(),
              w.cross_size, w.local_rank, w.local_size, ring.c_str());
}

// The UCX carrier (RINGLET_TRANSPORT=ucx), or the refusal of a build without it.
std::unique_ptr<transport::Carrier> ucx_carrier(const transport::CarrierOptions& opts) {
#if RINGLET_HAVE_UCX
  return transport::make_ucx_carrier(opts);
#else
  (void)opts;
  check_transport_built(TransportKind::kUcx, false);  // throws
  return nullptr;
#endif
}

}  // namespace

Communicator::Communicator() : workspace_(std::make_unique<collectives::Workspace>()) {}

Communicator::~Communicator() {
  // The groups borrow the world's links and its list of subsets.
  cross_group_.reset();
  host_group_.reset();
  if (parent_ != nullptr) std::erase(parent_->subsets_, this);
  if (abort_publisher_.joinable()) abort_publisher_.join();
  // After a failure rank 0 keeps the store up a moment, so that peers still
  // failing can read who failed first (peer_abort_reason): up to 500 ms, and
  // no longer than some other rank is connected to it (a job that re-forms
  // at once, an elastic one, does not wait).
  if (failed() && store_server_ != nullptr) {
    const size_t own = store_ != nullptr ? 1 : 0;
    const auto until = Clock::now() + std::chrono::milliseconds(500);
    while (store_server_->connections() > own && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Links first (they may refer to request records in the workspace), then the
  // window, the carriers, the store.
  pairs_.clear();
  window_.reset();
  mpi_.reset();
  carrier_of_.clear();
  carriers_.clear();
  store_.reset();
  store_server_.reset();
}

std::unique_ptr<Communicator> Communicator::create(const Config& config, const LaunchInfo& launch,
                                                   StoreClient::Interrupt interrupted) {
  common::configure_log(log_settings(config, launch.rank));
  std::unique_ptr<Communicator> c(new Communicator());
  c->config_ = config;
  // Output past half the LLC is streamed (see direct_allreduce.cc).
  if (const size_t llc = llc_bytes(); llc > 0) c->workspace_->tuning.stream_min_bytes = llc / 2;
  const Deadline start = Clock::now() + config.start_timeout;

  check_transport_built(config.transport, kHaveUcx);
  if (config.cpu_operations == CpuOperations::kMpi) check_mpi_operations(launch);

  if (launch.size == 1 && launch.rendezvous.empty()) {
    // One process and no launcher: left where the system put it; a
    // RINGLET_TOPO_FILE it names is still checked.
    if (!config.topo_file.empty()) load_host_topology(config, 0);
    c->world_ = derive_world(0, {host_name(config)});
    c->world_.job_id = launch.job_id;
    return c;
  }
  if (launch.rendezvous.empty()) {
    throw ConfigError("RINGLET_RENDEZVOUS is not set: " + std::to_string(launch.size) +
                      " ranks need a rendezvous host:port");
  }
  // Read before the rendezvous, so that a bad RINGLET_TOPO_FILE fails this
  // rank before the others wait for it.
  const std::optional<topology::Host> host = load_host_topology(config, launch.rank);
  if (launch.rank == 0) {
    c->store_server_ = std::make_unique<StoreServer>(
        rendezvous_host(launch.rendezvous), rendezvous_port(launch.rendezvous), launch.secret);
  }
  c->store_ = std::make_unique<StoreClient>(launch.rendezvous, launch.secret, launch.rank, start,
                                            std::move(interrupted));
  c->rendezvous_ = launch.rendezvous;
  c->secret_ = launch.secret;
  c->world_ = build_world(launch, *c->store_, start);
  // Should this process end without publishing why (killed, or gone before
  // it failed), the store says so for it the moment its connection closes:
  // a peer asking why it was lost (failure_of) learns it at once instead of
  // at the end of its wait. A reason published first (abort) stands.
  const std::string will = std::to_string(static_cast<int>(common::FailureKind::kPeerLost)) +
                           " -1 rank " + std::to_string(launch.rank) +
                           ": its process ended, or it left the job, without reporting a failure";
  c->store_->set_will(abort_key(launch.rank), std::vector<uint8_t>(will.begin(), will.end()));
  check_job_settings(config, launch.rank, launch.size, *c->store_, start);
  // Only now: MPI's start is collective, and every rank is known to ask for it.
  if (config.cpu_operations == CpuOperations::kMpi && launch.size > 1) {
    start_mpi_operations(launch);
    c->mpi_ = collectives::MpiCommunicator::world();
  }
  // Bound, placed, and ordered in the ring by where it runs (placement.h).
  const RankPlacement placed = place_this_rank(
      host, config, c->world_.local_rank, c->world_.local_size,
      exchange_visible_gpus(c->world_, visible_gpu_of_this_rank(host, c->world_.local_rank),
                            *c->store_, start));
  exchange_locality(c->world_, placed.locality, *c->store_, start);
  if (placed.llc_bytes > 0) c->workspace_->tuning.stream_min_bytes = placed.llc_bytes / 2;
  // The CPUs the topology lists here, else hardware_concurrency() (read
  // once: it opens a sysfs file on every call).
  c->host_cpus_ = placed.host_cpus > 0 ? static_cast<unsigned>(placed.host_cpus)
                                       : std::thread::hardware_concurrency();
  c->workspace_->tuning.oversubscribed =
      static_cast<unsigned>(c->world_.local_size) > c->host_cpus_;
  c->wait_policy_ = wait_policy(c->config_.spin_iterations, c->workspace_->tuning.oversubscribed);
  const World& w = c->world_;

  LinkFacts facts;
  facts.transport = config.transport;
  facts.interface = config.network_interface;
  facts.have_ucx = kHaveUcx;
  facts.address_reaching_rank0 = [&] { return c->store_->local_address(); };
  facts.nearest_nic_address = [&](const std::string& reaching_rank0) {
    return nic_address(host, placed, w.local_rank, rendezvous_host(launch.rendezvous),
                       reaching_rank0);
  };
  const LinkPlan plan = plan_links(w, facts);
  c->make_links(plan);
  if (plan.world_window) c->open_world_window(start);
  c->connect_ring_neighbours(start);
  // From here the runtime's thread uses the store too.
  c->store_->set_interrupt({});
  return c;
}

void Communicator::make_links(const LinkPlan& plan) {
  const World& w = world_;
  transport::CarrierOptions opts;
  opts.rank = w.rank;
  opts.size = w.size;
  opts.job_id = w.job_id;
  opts.store = store_.get();
  opts.interface = config_.network_interface;
  opts.address = plan.address;
  {
    const auto key = common::secret_key(secret_);
    opts.secret.assign(key.begin(), key.end());
  }
  std::map<CarrierKind, transport::Carrier*> carrier;
  if (plan.shm) {
    carriers_.push_back(transport::make_shm_carrier(opts));
    carrier[CarrierKind::kShm] = carriers_.back().get();
  }
  if (plan.tcp) {
    carriers_.push_back(transport::make_tcp_carrier(opts));
    carrier[CarrierKind::kTcp] = carriers_.back().get();
  }
  if (plan.ucx) {
    carriers_.push_back(ucx_carrier(opts));
    carrier[CarrierKind::kUcx] = carriers_.back().get();
  }
  carrier_of_.assign(w.size, nullptr);
  for (int peer = 0; peer < w.size; ++peer) {
    if (plan.carrier_of[peer] != CarrierKind::kNone) {
      carrier_of_[peer] = carrier.at(plan.carrier_of[peer]);
    }
  }
  pairs_.resize(w.size);
  tell_transport(*this, config_.transport,
                 opts.interface.empty() ? opts.address : "interface " + opts.interface,
                 plan.address_why);
}

void Communicator::open_world_window(transport::Deadline deadline) {
  const World& w = world_;
  transport::SharedWindow::Options wo;
  wo.local_rank = w.local_rank;
  wo.local_size = w.local_size;
  wo.global_ranks = w.ranks_on_host[w.cross_rank];
  wo.bytes_per_rank = config_.shm_window_bytes;
  wo.job_id = w.job_id;
  // Named, not numbered by creation in this process: a process that
  // re-initialized (an elastic job's survivor) has made windows before,
  // and a worker new to the job has not.
  wo.name = "world";
  wo.store = store_.get();
  wo.wait = wait_policy_;
  window_ = transport::SharedWindow::create(wo, deadline);
}

// Eagerly, in the global lexicographic order of pairs: ascending peers are
// the pairs (min, max) in that order.
void Communicator::connect_ring_neighbours(transport::Deadline deadline) {
  const World& w = world_;
  if (w.size == 1) return;
  const int n = w.size;
  const auto pos = std::find(w.ring.begin(), w.ring.end(), w.rank) - w.ring.begin();
  const std::set<int> neighbours = {w.ring[(pos + 1) % n], w.ring[(pos + n - 1) % n]};
  for (int peer : neighbours) {
    if (pairs_[peer] == nullptr) {
      pairs_[peer] = carrier_of_[peer]->connect(peer, deadline);
      tell_connected(peer);
    }
  }
}

std::unique_ptr<Communicator> Communicator::create_subset(Communicator& parent,
                                                          const std::vector<int>& members,
                                                          const std::string& name) {
  const int me = parent.rank();
  const auto mine = std::find(members.begin(), members.end(), me);
  if (mine == members.end() || !std::is_sorted(members.begin(), members.end())) {
    throw common::caller_error("process set '" + name +
                               "': members must be ascending and include rank " +
                               std::to_string(me));
  }
  std::unique_ptr<Communicator> c(new Communicator());
  c->config_ = parent.config_;
  c->wait_policy_ = parent.wait_policy_;
  c->workspace_->tuning = parent.workspace_->tuning;
  c->parent_ = &parent;
  parent.subsets_.push_back(c.get());
  c->members_ = members;
  c->name_ = name;
  c->host_cpus_ = parent.host_cpus_;
  std::vector<std::string> hostnames;
  std::vector<int> locality;
  for (int r : members) {
    hostnames.push_back(parent.world_.hostnames.at(r));
    if (!parent.world_.locality.empty()) locality.push_back(parent.world_.locality.at(r));
  }
  c->world_ = derive_world(static_cast<int>(mine - members.begin()), hostnames, locality);
  c->world_.job_id = parent.world_.job_id;
  const transport::Deadline deadline = c->deadline();
  // A window wherever the members share one host, also in a job that spans
  // several (a set within a host, a hierarchical collective's host group).
  if (c->world_.single_host() && c->config_.transport != TransportKind::kTcp &&
      members.size() > 1) {
    transport::SharedWindow::Options wo;
    wo.local_rank = c->world_.rank;
    wo.local_size = c->world_.size;
    wo.global_ranks = members;
    wo.bytes_per_rank = c->config_.shm_window_bytes;
    wo.job_id = c->world_.job_id;
    wo.name = name;
    wo.store = &parent.store();
    wo.wait = c->wait_policy_;
    c->window_ = transport::SharedWindow::create(wo, deadline);
  }
  // Links the parent has not connected yet are connected now, in the order
  // that cannot deadlock, so that a collective's first use never waits on a
  // peer busy connecting elsewhere.
  c->connect_all();
  if (parent.mpi_ != nullptr && members.size() > 1) {
    c->mpi_ = parent.mpi_->subset(members, c->config_.timeout);
  }
  return c;
}

common::Failure Communicator::failure() const {
  if (first_) return *first_;
  if (parent_ != nullptr && parent_->failed()) return parent_->failure();
  return common::Failure(common::FailureKind::kInternal, "the communicator has not failed");
}

common::Failure Communicator::failed_earlier() const {
  const common::Failure first = failure();
  return common::Failure(first.kind(), global_rank(rank()), first.peer(),
                         "the communicator failed earlier (" + first.body() + ")");
}

transport::Pair& Communicator::pair(int peer) {
  if (parent_ != nullptr) return parent_->pair(members_.at(peer));
  if (failed()) throw failed_earlier();
  auto& p = pairs_.at(peer);
  if (p == nullptr) {
    p = carrier_of_.at(peer)->connect(peer, deadline());
    tell_connected(peer);
  }
  return *p;
}

std::string_view Communicator::carrier_name(int peer) const {
  if (parent_ != nullptr) return parent_->carrier_name(members_.at(peer));
  const transport::Carrier* carrier = carrier_of_.at(peer);
  return carrier == nullptr ? std::string_view("none") : carrier->name();
}

void Communicator::tell_connected(int peer) const {
  if (!common::log_enabled(common::LogLevel::kDebug)) return;
  common::log(common::LogLevel::kDebug, "linked to rank %d on %s over %s", peer,
              world_.hostnames.at(peer).c_str(), std::string(carrier_name(peer)).c_str());
}

void Communicator::connect_all() {
  // Pair (a, b) with a < b precedes (a', b') iff (a, b) < (a', b'). The least
  // pair not yet connected always has both ends asking for it, so this
  // finishes even when connect() blocks until the peer asks too.
  for (int peer = 0; peer < size(); ++peer) {
    if (peer != rank()) pair(peer);
  }
}

int Communicator::rank_of_global(int global) const {
  if (members_.empty()) return global >= 0 && global < size() ? global : -1;
  const auto it = std::find(members_.begin(), members_.end(), global);
  return it == members_.end() ? -1 : static_cast<int>(it - members_.begin());
}

StoreClient& Communicator::store() {
  if (parent_ != nullptr) return parent_->store();
  if (store_ == nullptr) {
    throw common::Failure(common::FailureKind::kInternal, rank(), -1,
                          "a world of one started without a launcher has no rendezvous store; "
                          "nothing should exchange through it");
  }
  return *store_;
}

transport::Deadline Communicator::deadline() const { return Clock::now() + config_.timeout; }

void Communicator::set_busy_threads_per_rank(int threads) {
  const unsigned cpus = host_cpus_ > 0 ? host_cpus_ : std::thread::hardware_concurrency();
  const bool oversubscribed = static_cast<unsigned>(world_.local_size * threads) > cpus;
  wait_policy_ = wait_policy(config_.spin_iterations, oversubscribed);
  if (window_) window_->set_wait_policy(wait_policy_);
}

bool Communicator::progress_or_wait(std::span<transport::Pair* const> pairs, int& idle,
                                    Deadline deadline, int waiting_for) {
  // The links and carriers are the world's; so is the waiting state.
  if (parent_ != nullptr) return parent_->progress_or_wait(pairs, idle, deadline, waiting_for);
  bool moved = false;
  for (transport::Pair* p : pairs) moved |= p->progress();
  if (moved) {
    idle = 0;
    return true;
  }
  // Spin as the wait policy says: for its spin time (auto), or a bounded
  // number of turns and at most kSpinTime (a turn on TCP is a syscall). Then
  // yield a little, then block.
  constexpr auto kSpinTime = std::chrono::microseconds(20);
  constexpr int kYields = 20;
  if (idle == 0) idle_since_ = Clock::now();
  ++idle;
  const transport::WaitPolicy& policy = wait_policy_;
  const auto spin_time = policy.spin_time.count() > 0 ? policy.spin_time : kSpinTime;
  const int spin =
      policy.spin_time.count() > 0 ? std::numeric_limits<int>::max() / 2 : policy.spin_iterations;
  if (idle < spin) {
    if ((idle & 15) != 0 || Clock::now() - idle_since_ < spin_time) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      return false;
    }
    idle = spin;
  }
  if (idle < spin + kYields) {
    ::sched_yield();
    return false;
  }
  if (Clock::now() >= deadline) {
    throw transport::Timeout(waiting_for, "timed out after " + seconds_text(config_.timeout) +
                                              " waiting for rank " + std::to_string(waiting_for));
  }
  // Block in the carriers; with two carriers in play, briefly in each.
  transport::Carrier* first = nullptr;
  bool several = false;
  for (transport::Pair* p : pairs) {
    transport::Carrier* c = carrier_of_[p->peer()];
    if (first == nullptr)
      first = c;
    else if (c != first)
      several = true;
  }
  if (first == nullptr) return false;
  if (!several) {
    first->wait_for_activity(std::chrono::microseconds(1000));
  } else {
    for (auto& c : carriers_) c->wait_for_activity(std::chrono::microseconds(100));
  }
  return false;
}

void Communicator::wait_all(std::span<transport::Request* const> requests,
                            std::span<transport::Pair* const> pairs, Deadline deadline) {
  int idle = 0;
  for (;;) {
    bool pending = false;
    for (transport::Request* r : requests) {
      if (r->failed()) throw r->failure();  // it names its pair's peer
      pending |= r->pending();
    }
    if (!pending) return;
    // Name the first link that still has work: that is who we wait for.
    // With one pair per request, the pair of the first pending request;
    // otherwise the first link that still has work.
    int waiting_for = -1;
    if (pairs.size() == requests.size()) {
      for (size_t i = 0; i < requests.size() && waiting_for < 0; ++i) {
        if (requests[i]->pending()) waiting_for = pairs[i]->peer();
      }
    }
    for (size_t i = 0; i < pairs.size() && waiting_for < 0; ++i) {
      if (pairs[i]->busy()) waiting_for = pairs[i]->peer();
    }
    if (progress_or_wait(pairs, idle, deadline, waiting_for)) deadline = this->deadline();
  }
}

void Communicator::abort(const common::Failure& why) {
  if (parent_ != nullptr) {
    if (first_) return;
    first_ = why;
    if (window_ != nullptr) {
      try {
        window_->abort(why);
      } catch (...) {
      }
    }
    parent_->abort(why);  // tells every peer, members or not
    return;
  }
  if (failed()) return;
  first_ = why;
  // Published as "<kind> <peer or -1> <message>": a peer that reads it learns
  // how this rank failed and which rank it lost or waited for in vain
  // without reading the message. The collective is left out: the peers that
  // read it name their own.
  const std::string published = std::to_string(static_cast<int>(why.kind())) + " " +
                                std::to_string(culprit_of(why)) + " " + why.told();
  if (store_ != nullptr) {
    // On a thread and a connection of its own: rank 0 (the store) may be
    // gone, and this rank's own client may be busy asking why a peer failed.
    // Closing the links below tells the peers at once either way; the reason
    // only says why.
    abort_publisher_ =
        std::jthread([host_port = rendezvous_, secret = secret_, me = rank(), published] {
          try {
            StoreClient client(host_port, secret, me, Clock::now() + std::chrono::seconds(2));
            client.set(abort_key(me), std::vector<uint8_t>(published.begin(), published.end()));
          } catch (...) {
            // Best effort: the peers learn of the failure from the closed links.
          }
        });
  }
  // A peer may be waiting in a process set's window rather than on a link
  // or the world's window: tell it there too.
  std::vector<transport::SharedWindow*> windows = {window_.get()};
  for (Communicator* set : subsets_) windows.push_back(set->window_.get());
  for (transport::SharedWindow* w : windows) {
    if (w == nullptr) continue;
    try {
      w->abort(why);
    } catch (...) {
    }
  }
  // Closed at once: a pair's close must not wait on a peer that hung.
  for (auto& p : pairs_) {
    if (p != nullptr) p->abandon();
  }
  pairs_.clear();
  pairs_.resize(world_.size);
}

std::optional<Communicator::PeerFailure> Communicator::failure_of(int peer,
                                                                  std::chrono::milliseconds wait) {
  // Peers in errors are the world's ranks (the links are the world's).
  if (parent_ != nullptr) return parent_->failure_of(peer, wait);
  if (store_ == nullptr || peer < 0 || peer >= size() || peer == rank()) return std::nullopt;
  std::vector<uint8_t> v;
  try {
    v = store_->get(abort_key(peer), Clock::now() + wait);
  } catch (...) {
    return std::nullopt;
  }
  const std::string text(v.begin(), v.end());
  const char* at = text.data();
  const char* const end = text.data() + text.size();
  // One number and the space after it; false if it is not there.
  auto number = [&](int& out) {
    const auto [past, ec] = std::from_chars(at, end, out);
    if (ec != std::errc() || past == end || *past != ' ') return false;
    at = past + 1;
    return true;
  };
  int kind = 0;
  PeerFailure f;
  if (!number(kind) || !number(f.peer)) return std::nullopt;
  if (kind < 0 || kind > static_cast<int>(common::FailureKind::kInternal)) return std::nullopt;
  f.kind = static_cast<common::FailureKind>(kind);
  f.what.assign(at, end);
  if (f.what.empty()) return std::nullopt;
  return f;
}

}  // namespace ringlet::core
