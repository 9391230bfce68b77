// SharedWindow over POSIX shm: one segment per local rank,
// "/ringlet-<job>-w<local_rank>" (".<n>" appended for the n-th window of a
// process after the first), laid out as a WindowHeader page and then
// bytes_per_rank of data.
//
// Set-up: create and initialise our segment, set "shmw/<n>/ready/<lr>", map
// every peer's segment once its key appears, set "shmw/<n>/mapped/<lr>", wait
// for every peer's mapped key, unlink ours. After that nothing is named.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "shm/doorbell.h"
#include "shm/liveness.h"
#include "shm/segment.h"
#include "store_wait.h"

namespace ringlet::transport {
namespace {

using shm::Segment;

struct WindowHeader {
  Doorbell bell;
  alignas(64) int32_t pid;
  int32_t global_rank;
  std::atomic<uint32_t> closed;     // the owner destroyed its window
  std::atomic<int32_t> aborted_by;  // global rank + 1 of the aborter; 0: none
  char why[512];                    // the aborter's reason, in its own header
  int32_t lost = -1;                // the peer the aborter lost, or -1
};
// Page-aligned data: 64-byte alignment as promised, and whole pages for copies.
constexpr size_t kDataOffset = 4096;
static_assert(sizeof(WindowHeader) <= kDataOffset);

class ShmWindow final : public SharedWindow {
 public:
  ShmWindow(const Options& options, Deadline deadline)
      : options_(options), segments_(options.local_size) {
    validate();
    std::string suffix, keys;
    if (options_.name.empty()) {
      static int windows_in_process = 0;
      const int n = windows_in_process++;
      suffix = n == 0 ? "" : "." + std::to_string(n);
      keys = "shmw/" + std::to_string(n) + "/";
    } else {
      suffix = "." + options_.name;
      keys = "shmw/" + options_.name + "/";
    }
    size_t bytes = kDataOffset + options_.bytes_per_rank;
    int me = options_.local_rank;
    auto name_of = [&](int lr) {
      return "/ringlet-" + options_.job_id + "-w" + std::to_string(lr) + suffix;
    };

    segments_[me] = Segment::create(name_of(me), bytes);
    auto* own = new (segments_[me].data()) WindowHeader{};
    own->pid = static_cast<int32_t>(::getpid());
    own->global_rank = options_.global_ranks[me];
    options_.store->set(keys + "ready/" + std::to_string(me), {1});

    for (int lr = 0; lr < local_size(); ++lr) {
      if (lr == me) continue;
      wait_key(keys + "ready/" + std::to_string(lr), lr, deadline);
      segments_[lr] = Segment::open(name_of(lr), bytes);
    }
    options_.store->set(keys + "mapped/" + std::to_string(me), {1});
    for (int lr = 0; lr < local_size(); ++lr) {
      if (lr != me) wait_key(keys + "mapped/" + std::to_string(lr), lr, deadline);
    }
    segments_[me].unlink();
  }

  ~ShmWindow() override {
    header(options_.local_rank)->closed.store(1, std::memory_order_release);
    ring_all();
  }

  int local_rank() const override { return options_.local_rank; }
  int local_size() const override { return options_.local_size; }
  size_t bytes_per_rank() const override { return options_.bytes_per_rank; }
  std::byte* segment(int local_rank) const override {
    return segments_.at(local_rank).data() + kDataOffset;
  }

  void ring(int local_rank) override { shm::ring(header(local_rank)->bell); }
  void ring_all() override {
    for (int lr = 0; lr < local_size(); ++lr) {
      if (lr != options_.local_rank) ring(lr);
    }
  }

  void abort(const common::Failure& failure) override {
    WindowHeader* own = header(options_.local_rank);
    // As told to the others: who failed and why. Each names its own
    // collective, so this one's is left out.
    const std::string why = failure.told();
    own->lost = failure.kind() == common::FailureKind::kPeerLost ? failure.peer() : -1;
    size_t n = std::min(why.size(), sizeof own->why - 1);
    std::memcpy(own->why, why.data(), n);
    own->why[n] = '\0';
    int32_t mark = own->global_rank + 1;
    for (int lr = 0; lr < local_size(); ++lr) {
      int32_t none = 0;  // the first abort wins; its reason is the one reported
      header(lr)->aborted_by.compare_exchange_strong(none, mark, std::memory_order_acq_rel);
    }
    ring_all();
  }

  void check_peers() override {
    int self = options_.global_ranks[options_.local_rank];
    int32_t mark = header(options_.local_rank)->aborted_by.load(std::memory_order_acquire);
    if (mark != 0) {
      int who = mark - 1;
      auto it = std::find(options_.global_ranks.begin(), options_.global_ranks.end(), who);
      const WindowHeader* theirs = it == options_.global_ranks.end()
                                       ? nullptr
                                       : header(int(it - options_.global_ranks.begin()));
      const std::string why = theirs == nullptr ? std::string("?") : std::string(theirs->why);
      const int lost = theirs == nullptr || theirs->lost == self ? -1 : theirs->lost;
      throw PeerLost(self, lost >= 0 ? lost : who,
                     "shared window aborted by rank " + std::to_string(who) + ": " + why);
    }
    for (int lr = 0; lr < local_size(); ++lr) {
      if (lr == options_.local_rank) continue;
      const WindowHeader* h = header(lr);
      int peer = options_.global_ranks[lr];
      if (h->closed.load(std::memory_order_acquire) != 0) {
        throw PeerLost(self, peer, "rank " + std::to_string(peer) + " closed its shared window");
      }
      if (shm::process_gone(h->pid)) {
        throw PeerLost(
            self, peer,
            "rank " + std::to_string(peer) + " (pid " + std::to_string(h->pid) + ") died");
      }
    }
  }

 protected:
  uint32_t doorbell_rings() const override {
    return header(options_.local_rank)->bell.rings.load(std::memory_order_seq_cst);
  }
  void sleep_on_doorbell(uint32_t seen, std::chrono::microseconds timeout) override {
    shm::sleep_on(header(options_.local_rank)->bell, seen, timeout);
  }
  const WaitPolicy& policy() const override { return options_.wait; }
  void set_wait_policy(const WaitPolicy& policy) override { options_.wait = policy; }

 private:
  WindowHeader* header(int lr) const {
    return reinterpret_cast<WindowHeader*>(segments_[lr].data());
  }

  void validate() const {
    if (options_.store == nullptr) throw Error(-1, "shm window: Options::store is required");
    if (options_.local_size < 1 || options_.local_rank < 0 ||
        options_.local_rank >= options_.local_size ||
        static_cast<int>(options_.global_ranks.size()) != options_.local_size) {
      throw Error(-1, "shm window: local_rank " + std::to_string(options_.local_rank) +
                          ", local_size " + std::to_string(options_.local_size) + " and " +
                          std::to_string(options_.global_ranks.size()) +
                          " global ranks do not agree");
    }
  }

  void wait_key(const std::string& key, int lr, Deadline deadline) {
    int peer = options_.global_ranks[lr];
    get_or_timeout(*options_.store, key, deadline, options_.global_ranks[options_.local_rank], peer,
                   "creating the shared window with rank " + std::to_string(peer));
  }

  Options options_;
  std::vector<Segment> segments_;
};

}  // namespace

std::unique_ptr<SharedWindow> SharedWindow::create(const Options& options, Deadline deadline) {
  return std::make_unique<ShmWindow>(options, deadline);
}

}  // namespace ringlet::transport
