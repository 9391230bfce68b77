// The shm carrier: pairs between ranks of one host over shared memory.
//
// Set-up of the pair (lo, hi), shaped like TCP's accept/dial so that ranks may
// call connect() in any order:
//   hi: creates both channels "/ringlet-<job>-<hi>-<lo>" and "...-<lo>-<hi>",
//       maps lo's rank page (found through the store key "shm/rank/<lo>"),
//       files a request in one of its connect slots and rings lo;
//   lo: in any connect() call, serves every filed request: maps the two
//       channels and the requester's page, keeps them for the connect() call
//       that asks for that rank, marks the slot mapped and rings hi;
//   hi: sees the slot mapped, unlinks both channels, frees the slot.
// From then on nothing of the pair has a name in /dev/shm, so a crash at any
// later moment leaves nothing behind. A rank waiting in connect() (as either
// role) keeps serving requests, so chains of waits always end at a rank that
// serves them: no order of connect() calls deadlocks.
//
// Each rank's doorbell, pid and connect slots live in a nameless memfd page
// (RankPage) that peers open through /proc/<pid>/fd: one futex word per rank,
// whatever the number of pairs, and nothing to unlink.
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <new>

#include "shm/channel.h"
#include "shm/doorbell.h"
#include "shm/liveness.h"
#include "shm/segment.h"
#include "shm/shm_pair.h"
#include "store_wait.h"

namespace ringlet::transport {
namespace shm {
namespace {

// How long one sleep lasts at most before deadlines and liveness are
// re-checked, whatever timeout the caller asked for.
constexpr std::chrono::microseconds kLivenessSlice{20000};
// Yields before sleeping: with more ranks than cores the peer often needs
// just our core for a moment, and a yield is far cheaper than a futex round.
constexpr int kYieldsBeforeSleep = 16;

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

class ShmCarrier final : public Carrier {
 public:
  explicit ShmCarrier(const CarrierOptions& options)
      : rank_(options.rank),
        size_(options.size),
        job_id_(options.job_id),
        store_(options.store),
        pairs_(std::make_shared<PairList>()) {
    if (store_ == nullptr) throw Error(-1, "shm: CarrierOptions::store is required");
    page_segment_ = Segment::anonymous(kRankPageBytes);
    page_ = new (page_segment_.data()) RankPage{};
    page_->pid = static_cast<int32_t>(::getpid());
    store_->set("shm/rank/" + std::to_string(rank_),
                bytes_of(std::to_string(::getpid()) + " " + std::to_string(page_segment_.fd())));
  }

  std::string_view name() const override { return "shm"; }
  bool supports(MemoryKind kind) const override { return kind == MemoryKind::kHost; }

  std::unique_ptr<Pair> connect(int peer, Deadline deadline) override {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      throw Error(rank_, peer,
                  "cannot connect to rank " + std::to_string(peer) + " (job size " +
                      std::to_string(size_) + ")");
    }
    return rank_ > peer ? dial(peer, deadline) : accept(peer, deadline);
  }

  void wait_for_activity(std::chrono::microseconds timeout) override {
    uint32_t seen = page_->bell.rings.load(std::memory_order_seq_cst);
    for (int i = 0; i < kYieldsBeforeSleep; ++i) {
      if (any_ready()) return;
      ::sched_yield();
    }
    for (ShmPair* pair : pairs_->pairs) {
      if (pair->busy()) pair->check_alive();
    }
    if (any_ready()) return;
    sleep_on(page_->bell, seen, std::min(timeout, kLivenessSlice));
  }

 private:
  // A pair's mappings, made by the acceptor before its connect() asks for it.
  struct Link {
    Segment out, in, peer_page;
  };

  std::string channel_name(int from, int to) const {
    return "/ringlet-" + job_id_ + "-" + std::to_string(from) + "-" + std::to_string(to);
  }

  [[noreturn]] void timed_out(int peer) {
    throw Timeout(rank_, peer,
                  "timed out connecting to rank " + std::to_string(peer) + " over shm");
  }

  bool any_ready() const {
    for (ShmPair* pair : pairs_->pairs) {
      if (pair->ready()) return true;
    }
    return false;
  }

  Segment open_rank_page(int peer, Deadline deadline) {
    std::vector<uint8_t> value =
        get_or_timeout(*store_, "shm/rank/" + std::to_string(peer), deadline, rank_, peer,
                       "connecting to rank " + std::to_string(peer) + " over shm");
    std::string text(value.begin(), value.end());
    int pid = 0, fd = -1;
    if (std::sscanf(text.c_str(), "%d %d", &pid, &fd) != 2) {
      throw Error(rank_, peer, "bad shm rank page '" + text + "' for rank " + std::to_string(peer));
    }
    return Segment::open_of_process(pid, fd, kRankPageBytes);
  }

  std::unique_ptr<Pair> make_pair(int peer, Link link) {
    return std::make_unique<ShmPair>(rank_, peer, std::move(link.out), std::move(link.in),
                                     std::move(link.peer_page), pairs_);
  }

  // Maps the channels of every filed request and keeps them by rank.
  void serve_requests(Deadline deadline) {
    for (ConnectSlot& slot : page_->connect) {
      uint32_t filed = ConnectSlot::kRequested;
      if (!slot.state.compare_exchange_strong(filed, ConnectSlot::kServicing,
                                              std::memory_order_acq_rel)) {
        continue;
      }
      int from = slot.from;
      Link link;
      try {
        link.in = Segment::open(channel_name(from, rank_), kChannelBytes);
        link.out = Segment::open(channel_name(rank_, from), kChannelBytes);
        link.peer_page = open_rank_page(from, deadline);
      } catch (const Error&) {
        // The requester gave up or died half-way: its connect() reports it.
        slot.state.store(ConnectSlot::kFree, std::memory_order_release);
        continue;
      }
      auto* peer_page = reinterpret_cast<RankPage*>(link.peer_page.data());
      accepted_[from] = std::move(link);
      slot.state.store(ConnectSlot::kMapped, std::memory_order_release);
      ring(peer_page->bell);
    }
  }

  // One round of a set-up wait: serve requests, then sleep until rung.
  void serve_and_sleep(uint32_t seen, Deadline deadline) {
    serve_requests(deadline);
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    if (left.count() > 0) sleep_on(page_->bell, seen, std::min(left, kLivenessSlice));
  }

  std::unique_ptr<Pair> accept(int peer, Deadline deadline) {
    for (;;) {
      uint32_t seen = page_->bell.rings.load(std::memory_order_seq_cst);
      serve_requests(deadline);
      if (auto it = accepted_.find(peer); it != accepted_.end()) {
        Link link = std::move(it->second);
        accepted_.erase(it);
        return make_pair(peer, std::move(link));
      }
      if (Clock::now() >= deadline) timed_out(peer);
      serve_and_sleep(seen, deadline);
    }
  }

  std::unique_ptr<Pair> dial(int peer, Deadline deadline) {
    Link link;
    link.peer_page = open_rank_page(peer, deadline);
    link.out = Segment::create(channel_name(rank_, peer), kChannelBytes);
    link.in = Segment::create(channel_name(peer, rank_), kChannelBytes);
    new (link.out.data()) ChannelControl{};
    new (link.in.data()) ChannelControl{};
    auto* page = reinterpret_cast<RankPage*>(link.peer_page.data());

    ConnectSlot* slot = nullptr;
    while (slot == nullptr) {
      uint32_t seen = page_->bell.rings.load(std::memory_order_seq_cst);
      for (ConnectSlot& s : page->connect) {
        uint32_t free = ConnectSlot::kFree;
        // Claim with kServicing so the acceptor ignores it until `from` is set.
        if (s.state.compare_exchange_strong(free, ConnectSlot::kServicing,
                                            std::memory_order_acq_rel)) {
          slot = &s;
          break;
        }
      }
      if (slot != nullptr) break;
      if (Clock::now() >= deadline) timed_out(peer);
      serve_and_sleep(seen, deadline);  // every slot busy: others are connecting
    }
    slot->from = rank_;
    slot->state.store(ConnectSlot::kRequested, std::memory_order_release);
    ring(page->bell);

    for (;;) {
      uint32_t seen = page_->bell.rings.load(std::memory_order_seq_cst);
      if (slot->state.load(std::memory_order_acquire) == ConnectSlot::kMapped) break;
      if (process_gone(page->pid)) {
        throw PeerLost(rank_, peer,
                       "rank " + std::to_string(peer) + " exited while connecting over shm");
      }
      if (Clock::now() >= deadline) {
        uint32_t filed = ConnectSlot::kRequested;
        if (slot->state.compare_exchange_strong(filed, ConnectSlot::kFree)) timed_out(peer);
        if (filed == ConnectSlot::kMapped) break;  // finished just now
        // The acceptor took the request and has not finished mapping it: the
        // slot is its own until it does, so leave it there. Our channels are
        // unlinked as `link` goes, and the acceptor's maps of them only wait
        // in its table for a connect() that this failure ends anyway.
        throw Timeout(rank_, peer,
                      "timed out connecting to rank " + std::to_string(peer) + " over shm: rank " +
                          std::to_string(peer) +
                          " took the request but did not finish mapping the channels");
      }
      serve_and_sleep(seen, deadline);
    }
    link.out.unlink();
    link.in.unlink();
    slot->state.store(ConnectSlot::kFree, std::memory_order_release);
    return make_pair(peer, std::move(link));
  }

  int rank_;
  int size_;
  std::string job_id_;
  KeyValue* store_;
  Segment page_segment_;
  RankPage* page_ = nullptr;
  std::map<int, Link> accepted_;  // mapped for a peer whose connect() is still to come
  std::shared_ptr<PairList> pairs_;
};

}  // namespace
}  // namespace shm

std::unique_ptr<Carrier> make_shm_carrier(const CarrierOptions& options) {
  return std::make_unique<shm::ShmCarrier>(options);
}

}  // namespace ringlet::transport
