// Negotiation: which collectives run next, in which order, fused how.
//
// Every cycle each rank contributes a RankMessage (the names that became ready
// on it since its last message, plus a shutdown flag). The runtime exchanges
// them with an allgather, so every rank holds every rank's messages of every
// cycle; a Negotiator fed the same messages in the same order builds the same
// table and derives the same responses on every rank. That is equivalent to
// Horovod's rank-0 coordinator (gather the ready lists, decide, broadcast the
// decision), at the price of one allgather per cycle instead of a gather and a
// broadcast, and with no rank waiting for another's decision.
//
// Order: a name runs in the cycle in which the last rank reported it; names
// completing in the same cycle run in rank 0's submission order. Fusion:
// allreduces with the same dtype, op, scale factors and devices (each rank's
// its own, compared rank by rank) complete in one cycle are packed greedily in
// that order up to the fusion threshold.
//
// Send and recv: a transfer is one name that its sender submits as kSend and
// its receiver as kRecv (Metadata::root and ::peer name both, on both
// ranks); it completes in the cycle in which the second of the two reported
// it, and every member runs its response in the same place of the same
// order, the two ranks exchanging the bytes, the others passing over it, so
// that a transfer and the collectives around it meet on the links in one
// order everywhere.
//
// Devices: ranks must agree on host or device memory for one name; which GPU
// a rank's tensor is on is its own (one rank per GPU is the usual job), so a
// response carries every member's device and each rank runs on its own. A group
// (grouped allreduce) waits until every member is ready everywhere and then
// runs as one response, whatever the threshold.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/runtime/request.h"

namespace ringlet::core::runtime {

// A rank's request to change the process sets (see Runtime::add_process_set).
struct SetChange {
  int32_t remove_id = -1;      // >= 0: remove this set; else add `ranks`
  std::vector<int32_t> ranks;  // global ranks, ascending
  bool operator==(const SetChange&) const = default;
};

// A collective that waited past the stall timeout, and the error every rank
// fails it with (see stall_inspector.h).
struct StalledName {
  std::string name;
  std::string error;
  bool operator==(const StalledName&) const = default;
};

struct RankMessage {
  bool shutdown = false;
  bool join = false;  // this rank has run out of data (join())
  std::string abort;  // non-empty: stop every rank with this error (stall shutdown)
  std::vector<Metadata> ready;
  // Response cache (see response_cache.h): bit s set = the tensor cached in
  // slot s is ready on this rank; slots every rank must erase.
  std::vector<uint8_t> cached_bits;
  std::vector<uint32_t> invalidate;
  // World only: this rank's add_process_set / remove_process_set calls, in
  // call order; each rank's n-th change meets the others' n-th.
  std::vector<SetChange> set_changes;
  // Collectives of this set to fail on every member now, as stalled (sent by
  // the set's rank 0, whose stall inspector decides).
  std::vector<StalledName> stalled;
};
std::string encode(const RankMessage& m);
// A message that cannot be read is a transport common::Failure naming `from`,
// the global rank that sent it (-1: unknown): a peer broke the protocol.
RankMessage decode(std::string_view bytes, int from = -1);

// One decision, the same on every rank.
struct Response {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  std::vector<std::string> names;  // one, or several fused (allreduce)
  std::string error;               // non-empty: fail these names on every rank
  // The agreed metadata of each name (the lowest submitting rank's, whose
  // `device` is that rank's own), and what differs per rank:
  std::vector<Metadata> meta;
  // Device tensors: each member's CUDA device for these tensors (index: rank
  // in the set; -1 for a rank that joined), the same for every fused name.
  // Empty for host tensors.
  std::vector<int32_t> devices;
  // allgather: first dimension of each rank's tensor, per name.
  // alltoall: each rank's splits (rank r sends splits[r][j] rows to rank j).
  std::vector<std::vector<std::vector<int64_t>>> per_rank;
  int64_t bytes = 0;   // total payload of the response (this rank's view for allgather)
  bool group = false;  // a whole grouped allreduce: fused atomically
};

class Negotiator {
 public:
  // `global_ranks`: how messages name rank r (a process set's members);
  // empty: r itself.
  explicit Negotiator(int size, std::vector<int> global_ranks = {})
      : size_(size), global_ranks_(std::move(global_ranks)) {}

  // Adds one cycle's messages (index = rank) and returns what runs now.
  // `cached` are responses already agreed through the response cache; they
  // come first and take part in fusion.
  std::vector<Response> add_cycle(const std::vector<RankMessage>& messages,
                                  int64_t fusion_threshold, std::vector<Response> cached = {});

  // join(): a joined rank counts as having submitted every allreduce (it
  // contributes zeros); once every rank has joined, take_join_result() gives
  // the last rank to join (the highest of those joining in the same cycle),
  // once, and the ranks are active again.
  bool joined(int rank) const { return joined_[rank]; }
  std::optional<int> take_join_result();

  // Names reported by some ranks but not all: name -> ranks that have not
  // reported it, as global_ranks names them (for the stall inspector and
  // for shutdown messages).
  std::map<std::string, std::vector<int>> waiting() const;
  // Forgets `name` and the other members of its group, reported or waiting
  // (a stalled collective failed on every rank); returns the names forgotten.
  std::vector<std::string> drop(const std::string& name);
  // The ranks that have reported `name` so far (empty if unknown).
  std::vector<int> reported_by(const std::string& name) const;

 private:
  struct Entry {
    std::vector<std::optional<Metadata>> by_rank;
    int count = 0;
    int64_t order = -1;   // rank 0's submission sequence, once it reported
    int64_t arrival = 0;  // when any rank first reported it
  };
  std::optional<std::string> validate(const Entry& e) const;
  // Send and recv: the two ranks and their tensors agree.
  std::optional<std::string> validate_transfer(const Entry& e) const;
  // A transfer's sender and receiver as indices in the set (-1: not a member).
  std::pair<int, int> parties(const Entry& e) const;
  // The index in the set of global rank `global` (-1: not a member).
  int index_of(int global) const;
  static const Metadata& first_reported(const Entry& e) {
    for (const auto& m : e.by_rank) {
      if (m) return *m;
    }
    return e.by_rank.front().value();  // every entry holds one report at least
  }
  struct Group {
    std::vector<Response> members;  // validated singles, in completion order
    int64_t order = 0;
  };
  // A name every rank it waits for has now reported.
  struct Done {
    int64_t order;    // Entry::order
    int64_t arrival;  // Entry::arrival
    std::string name;
  };

  // add_cycle's steps. Records this cycle's reports; returns the names they
  // completed, and adds an error response for a name reported twice.
  std::vector<Done> record_arrivals(const std::vector<RankMessage>& messages,
                                    std::vector<Response>& errors);
  void record_joins(const std::vector<RankMessage>& messages);
  // Every name complete once joined ranks count as having submitted it.
  std::vector<Done> complete_counting_joined() const;
  // The validated response for one complete name (an error response if invalid).
  Response single_response(const std::string& name, const Entry& e) const;
  // Adds a member to its group; the group's one response once all are in.
  std::optional<Response> add_to_group(const std::string& group, int32_t group_size, int64_t order,
                                       Response member);
  // Appends `singles` to `out`, allreduces fused up to the threshold.
  static void fuse_allreduces(std::vector<Response> singles, int64_t fusion_threshold,
                              std::vector<Response>& out);

  std::string rank_text(int r) const {
    return std::to_string(global_ranks_.empty() ? r : global_ranks_[r]);
  }

  int size_;
  std::vector<int> global_ranks_;
  int64_t rank0_sequence_ = 0;
  int64_t arrival_sequence_ = 0;
  std::vector<bool> joined_ = std::vector<bool>(size_, false);
  int joined_count_ = 0;
  int last_joined_ = -1;
  std::optional<int> join_result_;
  std::map<std::string, Entry> table_;
  std::map<std::string, Group> groups_;  // groups with members still waiting
};

}  // namespace ringlet::core::runtime
