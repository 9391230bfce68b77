#include "plan.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace soak {
namespace {

constexpr DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                                DataType::kInt32,   DataType::kInt64,   DataType::kInt16,
                                DataType::kUInt16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

// Names come from a small pool so that the same name returns batch after
// batch, often with the same parameters: the response cache is hit, and
// invalidated when the parameters change.
constexpr int kNamePool = 48;

template <class T, size_t N>
T pick(std::mt19937_64& rng, const T (&items)[N]) {
  return items[std::uniform_int_distribution<size_t>(0, N - 1)(rng)];
}

bool chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// Powers of two keep scaled values exact. 8-bit integers are never scaled:
// their range leaves no room.
double draw_scale(std::mt19937_64& rng, DataType t) {
  if (t == DataType::kInt8 || t == DataType::kUInt8 || chance(rng, 0.5)) return 1.0;
  const bool floating = ringlet::is_floating(t);
  return floating ? (chance(rng, 0.5) ? 0.5 : 2.0) : 2.0;
}

}  // namespace

const char* to_string(Kind k) {
  switch (k) {
    case Kind::kAllreduce: return "allreduce";
    case Kind::kGroupedAllreduce: return "grouped_allreduce";
    case Kind::kAllgather: return "allgather";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kReducescatter: return "reducescatter";
    case Kind::kAlltoall: return "alltoall";
    case Kind::kBarrier: return "barrier";
  }
  return "?";
}

int Collective::index_of(int rank) const {
  auto it = std::lower_bound(members.begin(), members.end(), rank);
  return it != members.end() && *it == rank ? static_cast<int>(it - members.begin()) : -1;
}

uint64_t Collective::input_bytes() const {
  int64_t most = 0;
  if (kind == Kind::kGroupedAllreduce || (kind == Kind::kReducescatter && synchronous)) {
    for (int64_t r : rows) most += r;
  } else {
    for (int64_t r : rows) most = std::max(most, r);
  }
  return static_cast<uint64_t>(most * width) * ringlet::dtype_size(dtype);
}

Planner::Planner(uint64_t seed, PlanOptions options) : rng_(seed), opt_(options) {}

void Planner::set_added(int id, std::vector<int> ranks) {
  sets_.push_back({id, std::move(ranks)});
}

// Log-uniform from 1 byte to max_bytes; now and then exactly 0.
uint64_t Planner::draw_bytes() {
  if (chance(rng_, 0.03)) return 0;
  const double top = std::log(static_cast<double>(opt_.max_bytes));
  return static_cast<uint64_t>(std::exp(std::uniform_real_distribution<double>(0, top)(rng_)));
}

// Turns a byte budget into {rows, width} with odd counts half of the time.
void Planner::draw_shape(Collective& c, uint64_t bytes) {
  const auto es = static_cast<int64_t>(ringlet::dtype_size(c.dtype));
  int64_t elements = static_cast<int64_t>(bytes) / es;
  if (elements > 1 && chance(rng_, 0.5)) elements |= 1;
  c.width = c.synchronous || chance(rng_, 0.5) ? 1 : uniform(rng_, 1, 7);
  const int64_t rows = elements / c.width;
  const int m = static_cast<int>(c.members.size());
  c.rows.clear();
  switch (c.kind) {
    case Kind::kAllgather:
      // Each member contributes its own first dimension, about rows/m.
      for (int i = 0; i < m; ++i) c.rows.push_back(uniform(rng_, 0, 2 * rows / m + 1));
      break;
    case Kind::kAlltoall:
      c.even_split = !c.synchronous && chance(rng_, 0.25);
      c.splits.assign(static_cast<size_t>(m), {});
      for (int i = 0; i < m; ++i) {
        int64_t mine = c.even_split ? rows / m * m : uniform(rng_, 0, rows);
        if (!c.even_split) {
          // Random splits: m-1 cut points in [0, mine].
          std::vector<int64_t> cuts{0, mine};
          for (int j = 1; j < m; ++j) cuts.push_back(uniform(rng_, 0, mine));
          std::sort(cuts.begin(), cuts.end());
          for (int j = 0; j < m; ++j) c.splits[i].push_back(cuts[j + 1] - cuts[j]);
        } else {
          c.splits[i].assign(static_cast<size_t>(m), mine / m);
        }
        c.rows.push_back(mine);
      }
      break;
    case Kind::kGroupedAllreduce: {
      const int tensors = static_cast<int>(uniform(rng_, 2, 5));
      for (int i = 0; i < tensors; ++i) c.rows.push_back(uniform(rng_, 0, rows / tensors + 1));
      break;
    }
    case Kind::kReducescatter:
      // The blocking call takes any recv_counts; Horovod's even split (which
      // the asynchronous call always uses) half of the time.
      if (c.synchronous && m > 1 && chance(rng_, 0.5)) {
        for (int i = 0; i < m; ++i) c.rows.push_back(uniform(rng_, 0, 2 * rows / m + 1));
      } else if (c.synchronous) {
        for (int i = 0; i < m; ++i) c.rows.push_back(rows / m + (i < rows % m ? 1 : 0));
      } else {
        c.rows.push_back(rows);
      }
      break;
    case Kind::kBarrier: c.rows.push_back(0); break;
    default: c.rows.push_back(rows); break;
  }
}

Collective Planner::draw(bool synchronous, bool allow_group) {
  Collective c;
  c.synchronous = synchronous;
  c.seed = rng_();
  // The world most of the time; a live set otherwise (sets are async only,
  // apart from barrier(set)).
  if (!sets_.empty() && chance(rng_, 0.35)) {
    const auto& s = sets_[static_cast<size_t>(uniform(rng_, 0, sets_.size() - 1))];
    c.set = s.id;
    c.members = s.ranks;
  } else {
    for (int r = 0; r < opt_.world; ++r) c.members.push_back(r);
  }
  const int64_t k = uniform(rng_, 0, 99);
  if (k < 28) {
    c.kind = Kind::kAllreduce;
  } else if (k < 36) {
    c.kind = allow_group && !synchronous ? Kind::kGroupedAllreduce : Kind::kAllreduce;
  } else if (k < 52) {
    c.kind = Kind::kAllgather;
  } else if (k < 66) {
    c.kind = Kind::kBroadcast;
  } else if (k < 80) {
    c.kind = Kind::kReducescatter;
  } else if (k < 95) {
    c.kind = Kind::kAlltoall;
  } else {
    c.kind = Kind::kBarrier;
  }
  // There is no asynchronous barrier: it is called after the submissions.
  if (c.kind == Kind::kBarrier) c.synchronous = synchronous = true;
  if (synchronous && c.set != 0 && c.kind != Kind::kBarrier) {
    // The blocking calls serve the world only (barrier excepted).
    c.set = 0;
    c.members.clear();
    for (int r = 0; r < opt_.world; ++r) c.members.push_back(r);
  }
  c.dtype = pick(rng_, kDtypes);
  if (reduces(c.kind)) {
    c.op = pick(rng_, kOps);
    // The blocking calls take no scales.
    if (!synchronous) {
      c.prescale = draw_scale(rng_, c.dtype);
      c.postscale = draw_scale(rng_, c.dtype);
    }
  }
  c.in_place = (c.kind == Kind::kAllreduce || c.kind == Kind::kGroupedAllreduce) &&
               chance(rng_, 0.5);
  c.root = c.members[static_cast<size_t>(uniform(rng_, 0, c.members.size() - 1))];
  draw_shape(c, draw_bytes());
  return c;
}

Batch Planner::next(bool asynchronous) {
  Batch b;
  asynchronous = asynchronous && opt_.asynchronous;
  if (asynchronous && opt_.world > 1) {
    // Process sets come and go between batches: at most four live, never the
    // whole world (that set exists), never one twice.
    if (sets_.size() < 4 && chance(rng_, 0.08)) {
      std::vector<int> ranks;
      for (int r = 0; r < opt_.world; ++r) {
        if (chance(rng_, 0.5)) ranks.push_back(r);
      }
      const bool whole = static_cast<int>(ranks.size()) == opt_.world;
      const bool known = std::any_of(sets_.begin(), sets_.end(),
                                     [&](const LiveSet& s) { return s.ranks == ranks; });
      if (!ranks.empty() && !whole && !known) b.set_changes.push_back({true, ranks, 0});
    }
    if (!sets_.empty() && chance(rng_, 0.05)) {
      const size_t i = static_cast<size_t>(uniform(rng_, 0, sets_.size() - 1));
      b.set_changes.push_back({false, {}, sets_[i].id});
      sets_.erase(sets_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  uint64_t bytes = 0;
  const int async_count = asynchronous ? static_cast<int>(uniform(rng_, 0, opt_.max_in_flight)) : 0;
  const int sync_count = static_cast<int>(uniform(rng_, asynchronous ? 0 : 1, 2));
  std::vector<std::string> names;
  for (int i = 0; i < kNamePool; ++i) names.push_back("soak." + std::to_string(i));
  std::shuffle(names.begin(), names.end(), rng_);
  size_t next_name = 0;
  bool grouped = false;
  for (int i = 0; i < async_count + sync_count; ++i) {
    const bool synchronous = i >= async_count;
    Collective c;
    // A name drawn again with the parameters it had (on a set still alive)
    // hits the response cache; otherwise its entry is replaced.
    auto again = synchronous ? last_.end() : last_.find(names[next_name]);
    const bool reuse = again != last_.end() && chance(rng_, 0.4) &&
                       (again->second.set == 0 ||
                        std::any_of(sets_.begin(), sets_.end(),
                                    [&](const LiveSet& s) { return s.id == again->second.set; }));
    if (reuse) {
      c = again->second;
      c.seed = rng_();
    } else {
      c = draw(synchronous, !grouped);
      // Keep the batch within its memory budget: shrink what does not fit.
      while (bytes + c.input_bytes() > opt_.batch_bytes) draw_shape(c, c.input_bytes() / 16);
      if (!c.synchronous) {
        const size_t tensors = c.kind == Kind::kGroupedAllreduce ? c.rows.size() : 1;
        for (size_t t = 0; t < tensors; ++t) c.names.push_back(names[next_name + t]);
      }
    }
    if (bytes + c.input_bytes() > opt_.batch_bytes) continue;  // a reused one that does not fit
    bytes += c.input_bytes();
    next_name += c.names.size();
    grouped = grouped || c.kind == Kind::kGroupedAllreduce;
    if (!c.synchronous && c.kind != Kind::kGroupedAllreduce) last_[c.names[0]] = c;
    b.collectives.push_back(std::move(c));
  }
  return b;
}

}  // namespace soak
