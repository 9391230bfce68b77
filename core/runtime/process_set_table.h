// The process-set table: which sets exist and which global ranks each holds,
// the ids they get, and the changes the ranks ask for, met in order.
//
// Ids follow Horovod: 0 is the world, then 1, 2, ... in creation order, never
// reused (not even when creating a set failed after its id was given). Adding
// and removing are collective over the world: each rank's n-th change meets
// the others' n-th, and every rank applies it at the same cycle, so the table
// is the same on every rank. Building a set's communicator is the runtime's;
// this table is bookkeeping only and needs no communicator.
//
// Callers' threads read it (a collective names its set) while the runtime's
// loop changes it: reads and writes take the table's own lock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/negotiation.h"

namespace ringlet::core::runtime {

// "[0, 2, 3]"
std::string set_text(const std::vector<int>& ranks);
// "add_process_set([0, 2])", "remove_process_set(3)"
std::string describe(const SetChange& change);

class ProcessSetTable {
 public:
  // Holds the world, set 0, of `world_size` ranks. `rank` names this rank in errors.
  ProcessSetTable(int world_size, int rank);
  int world_size() const { return world_size_; }

  // Sorted, checked against the world; RuntimeError kInvalidArgument naming
  // `call` on an empty list, an unknown rank or a rank listed twice.
  std::vector<int> checked(std::vector<int> ranks, const std::string& call) const;
  // Sets given at start-up: ids 1, 2, ... in this order. Throws
  // kInvalidArgument for bad ranks or two sets of the same ranks.
  void add_static(std::vector<std::vector<int>> sets);

  std::optional<std::vector<int>> ranks(int32_t id) const;
  std::vector<int32_t> ids() const;  // ascending: the world first

  // The id for a new set of `ranks` (checked); throws kInvalidArgument when a
  // set already holds exactly these ranks. The id is used up either way of
  // what follows: add() once the set is built.
  int32_t reserve(const std::vector<int>& ranks);
  void add(int32_t id, std::vector<int> ranks);
  void erase(int32_t id);

  // A change every rank asked for, in order. `mismatch` is non-empty when the
  // ranks asked for different changes (nothing happens then).
  struct Agreed {
    SetChange change;  // rank 0's
    std::string mismatch;
  };
  // Queues the changes in this cycle's world messages (index = rank).
  void receive(const std::vector<RankMessage>& world_messages);
  // The next change that every rank has asked for, if any.
  std::optional<Agreed> next_agreed();

 private:
  const int world_size_;
  const int rank_;
  mutable std::mutex mu_;
  std::map<int32_t, std::vector<int>> ranks_;  // every set that exists
  int32_t next_id_ = 1;
  std::vector<std::deque<SetChange>> inbox_;  // per rank: asked for, not yet met (loop only)
};

}  // namespace ringlet::core::runtime
