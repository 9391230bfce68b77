// The soak's plan: what every rank runs, batch after batch, drawn from one
// shared seed so that every rank draws the same collectives (kind, dtype, op,
// shapes, roots, splits, process set) and can compute every rank's input.
// What differs per rank is drawn from (seed, batch, rank): the order in which
// it submits and synchronizes.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ringlet/types.h"

namespace soak {

using ringlet::DataType;
using ringlet::ReduceOp;

enum class Kind {
  kAllreduce,
  kGroupedAllreduce,
  kAllgather,
  kBroadcast,
  kReducescatter,
  kAlltoall,
  kBarrier,
};
const char* to_string(Kind k);
// True for the collectives that reduce (and so take an op).
inline bool reduces(Kind k) {
  return k == Kind::kAllreduce || k == Kind::kGroupedAllreduce || k == Kind::kReducescatter;
}

// One collective. Shapes are {rows, width}; `rows` has one entry per member
// for allgather, alltoall and the blocking reducescatter (its recv_counts),
// one entry otherwise. A grouped allreduce has one entry of `rows` per member
// tensor, all of `width` columns. The blocking calls take flat buffers
// (width 1).
struct Collective {
  Kind kind = Kind::kAllreduce;
  bool synchronous = false;  // the blocking call (world only) instead of *_async
  std::vector<std::string> names;  // async: one per tensor, the same on every rank
  uint64_t seed = 0;         // of the input values
  int set = 0;               // process set id (0: the world)
  std::vector<int> members;  // global ranks, ascending
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  bool in_place = false;
  int64_t width = 1;
  std::vector<int64_t> rows;
  int root = 0;                              // broadcast: a global rank, a member
  bool even_split = false;                   // alltoall: no splits given
  std::vector<std::vector<int64_t>> splits;  // alltoall: splits[sender][receiver index]

  int64_t rows_of(int member_index) const {
    return rows.size() == 1 ? rows[0] : rows[static_cast<size_t>(member_index)];
  }
  int index_of(int rank) const;  // among the members, -1 when not one
  // Bytes one rank puts in (the largest over members).
  uint64_t input_bytes() const;
};

struct SetChange {
  bool add = false;
  std::vector<int> ranks;  // add: the new set's ranks
  int remove_id = 0;       // remove: which set
};

struct Batch {
  std::vector<SetChange> set_changes;  // applied in order before the collectives
  std::vector<Collective> collectives;
};

struct PlanOptions {
  int world = 1;
  uint64_t max_bytes = 16u << 20;        // one tensor, per rank
  uint64_t batch_bytes = 48u << 20;      // every tensor of a batch together, per rank
  int max_in_flight = 8;                 // async collectives per batch
  bool asynchronous = true;              // false: synchronous world collectives only
};

// Draws batches; the live process sets are tracked here, so that collectives
// are only drawn on sets that exist.
class Planner {
 public:
  Planner(uint64_t seed, PlanOptions options);
  Batch next(bool asynchronous);
  // Set ids are given by the library in creation order; the planner learns
  // each one after the add.
  void set_added(int id, std::vector<int> ranks);

 private:
  Collective draw(bool synchronous, bool allow_group);
  void draw_shape(Collective& c, uint64_t bytes);
  uint64_t draw_bytes();

  std::mt19937_64 rng_;
  PlanOptions opt_;
  struct LiveSet {
    int id;
    std::vector<int> ranks;
  };
  std::vector<LiveSet> sets_;
  // The last collective drawn under each name, to draw it again.
  std::map<std::string, Collective> last_;
};

}  // namespace soak
