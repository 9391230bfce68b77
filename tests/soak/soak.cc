// ringlet-soak: random collectives through the public C++ API, each result
// checked against a reference computed independently on this rank.
//
//   ringletrun -np 4 ringlet-soak [--seconds S | --iterations N] [--seed X]
//
// Every rank draws the same plan from the shared seed (printed; --seed
// replays a run): batches of up to --in-flight named asynchronous collectives
// (allreduce, grouped allreduce, allgather with per-rank first dimensions,
// broadcast from random roots, reducescatter, alltoall with random splits)
// submitted and synchronized in an order shuffled per rank, beside blocking
// calls (the same five and barrier), on the world and on process sets added
// and removed as the run goes. Every dtype and op, sizes log-uniform from 0 to
// --max-bytes with odd counts, in and out of place. The first tenth of the
// run uses blocking calls only, which take the direct path before the
// runtime starts.
//
// At the end the ranks compare a checksum of the plan and of every result
// that all ranks must share; it prints the collectives run, the bytes checked
// and the wrong elements, and exits 1 on any wrong element, error or
// disagreement.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "checker.h"
#include "plan.h"
#include "reference.h"
#include "ringlet/ringlet.h"
#include "values.h"

namespace soak {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  uint64_t seed = 0;
  bool seed_given = false;
  double seconds = 0;
  int64_t iterations = 0;
  PlanOptions plan;
  bool verbose = false;
};

class Soak {
 public:
  Soak(Options o, int rank, int size)
      : opt_(o),
        rank_(rank),
        size_(size),
        planner_(o.seed, with_world(o.plan, size)),
        checker_(rank),
        totals_(checker_.totals()),
        digest_(checker_.digest()) {}

  int run();

 private:
  static PlanOptions with_world(PlanOptions p, int size) {
    p.world = size;
    return p;
  }
  int decide_phase(int64_t batch, Clock::time_point start);
  void apply(const SetChange& s);
  void prepare(Live& l);
  void submit(Live& l);
  void call_blocking(Live& l);

  Options opt_;
  int rank_;
  int size_;
  Planner planner_;
  Checker checker_;
  Totals& totals_;
  Digest& digest_;
};

ringlet::Tensor tensor_of(const Collective& c, void* data, int64_t rows) {
  return ringlet::Tensor{data, c.dtype, {rows, c.width}, -1};
}

// Phase 0: blocking calls only; 1: everything; 2: stop. Every rank takes the
// most advanced phase any rank asks for, so that they stop together.
int Soak::decide_phase(int64_t batch, Clock::time_point start) {
  int32_t phase;
  if (opt_.iterations > 0) {
    phase = batch >= opt_.iterations ? 2 : batch >= opt_.iterations / 10 ? 1 : 0;
  } else {
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    phase = s >= opt_.seconds ? 2 : s >= opt_.seconds / 10 ? 1 : 0;
  }
  int32_t agreed = 0;
  ringlet::allreduce(&phase, &agreed, 1, ringlet::DataType::kInt32, ringlet::ReduceOp::kMax);
  ++totals_.collectives;
  return agreed;
}

void Soak::apply(const SetChange& s) {
  if (!s.add) {
    ringlet::remove_process_set(s.remove_id);
    digest_.add(0x52454d ^ static_cast<uint64_t>(s.remove_id));
    return;
  }
  const int id = ringlet::add_process_set(s.ranks);
  planner_.set_added(id, s.ranks);
  digest_.add(0x414444 ^ static_cast<uint64_t>(id));
  const auto it = std::find(s.ranks.begin(), s.ranks.end(), rank_);
  const int expected_rank = it == s.ranks.end() ? -1 : static_cast<int>(it - s.ranks.begin());
  if (ringlet::process_set_ranks(id) != s.ranks ||
      ringlet::process_set_size(id) != static_cast<int>(s.ranks.size()) ||
      ringlet::process_set_rank(id) != expected_rank) {
    std::fprintf(stderr, "soak rank %d: process set %d does not report the ranks it was made of\n",
                 rank_, id);
    ++totals_.wrong;
  }
}

void Soak::prepare(Live& l) {
  const Collective& c = *l.c;
  const int me = c.index_of(rank_);
  const size_t es = ringlet::dtype_size(c.dtype);
  std::mt19937_64 offsets(mix(c.seed ^ static_cast<uint64_t>(rank_)));
  auto offset = [&] { return es * (offsets() % 4); };
  auto add_input = [&](int tensor, uint64_t elements) {
    l.inputs.emplace_back(elements * es, offset());
    fill_input(c, tensor, rank_, l.inputs.back().data(), elements);
  };
  switch (c.kind) {
    case Kind::kAllreduce:
    case Kind::kGroupedAllreduce:
      for (size_t t = 0; t < c.rows.size(); ++t) {
        const uint64_t n = static_cast<uint64_t>(c.rows[t] * c.width);
        add_input(static_cast<int>(t), n);
        if (!c.in_place) l.outputs.emplace_back(n * es, offset());
      }
      break;
    case Kind::kBroadcast:
      // The others' buffers hold their own values until the root's arrive.
      add_input(0, static_cast<uint64_t>(c.rows[0] * c.width));
      break;
    case Kind::kAllgather:
    case Kind::kAlltoall:
      add_input(0, static_cast<uint64_t>(c.rows_of(me) * c.width));
      break;
    case Kind::kReducescatter: {
      int64_t rows = c.rows[0];
      if (c.synchronous) {
        rows = 0;
        for (int64_t r : c.rows) rows += r;
      }
      add_input(0, static_cast<uint64_t>(rows * c.width));
      break;
    }
    case Kind::kBarrier: break;
  }
  if (c.synchronous && c.kind != Kind::kAllreduce && c.kind != Kind::kBroadcast &&
      c.kind != Kind::kBarrier) {
    l.outputs.emplace_back(Expected(c, 0, rank_).elements * es, offset());
  }
}

void Soak::submit(Live& l) {
  const Collective& c = *l.c;
  const int me = c.index_of(rank_);
  switch (c.kind) {
    case Kind::kAllreduce: {
      void* out = c.in_place ? l.inputs[0].data() : l.outputs[0].data();
      l.handles.push_back(ringlet::allreduce_async(
          c.names[0], tensor_of(c, l.inputs[0].data(), c.rows[0]), tensor_of(c, out, c.rows[0]),
          c.op, c.prescale, c.postscale, c.set));
      break;
    }
    case Kind::kGroupedAllreduce: {
      std::vector<ringlet::Tensor> ins, outs;
      for (size_t t = 0; t < c.rows.size(); ++t) {
        ins.push_back(tensor_of(c, l.inputs[t].data(), c.rows[t]));
        outs.push_back(tensor_of(c, c.in_place ? l.inputs[t].data() : l.outputs[t].data(),
                                 c.rows[t]));
      }
      l.handles = ringlet::grouped_allreduce_async(c.names, ins, outs, c.op, c.prescale,
                                                   c.postscale, c.set);
      break;
    }
    case Kind::kAllgather:
      l.handles.push_back(ringlet::allgather_async(
          c.names[0], tensor_of(c, l.inputs[0].data(), c.rows_of(me)), c.set));
      break;
    case Kind::kBroadcast:
      l.handles.push_back(ringlet::broadcast_async(
          c.names[0], tensor_of(c, l.inputs[0].data(), c.rows[0]), c.root, c.set));
      break;
    case Kind::kReducescatter:
      l.handles.push_back(ringlet::reducescatter_async(
          c.names[0], tensor_of(c, l.inputs[0].data(), c.rows[0]), c.op, c.prescale, c.postscale,
          c.set));
      break;
    case Kind::kAlltoall:
      l.handles.push_back(ringlet::alltoall_async(
          c.names[0], tensor_of(c, l.inputs[0].data(), c.rows_of(me)),
          c.even_split ? std::vector<int64_t>{} : c.splits[static_cast<size_t>(me)], c.set));
      break;
    case Kind::kBarrier: break;
  }
}

void Soak::call_blocking(Live& l) {
  const Collective& c = *l.c;
  const int me = c.index_of(rank_);
  const auto counts = [&] {
    std::vector<size_t> v;
    for (size_t i = 0; i < c.members.size(); ++i) v.push_back(static_cast<size_t>(c.rows_of(static_cast<int>(i))));
    return v;
  };
  switch (c.kind) {
    case Kind::kAllreduce: {
      void* in = l.inputs[0].data();
      ringlet::allreduce(in, c.in_place ? in : l.outputs[0].data(),
                         static_cast<size_t>(c.rows[0]), c.dtype, c.op);
      break;
    }
    case Kind::kAllgather:
      ringlet::allgather(l.inputs[0].data(), l.outputs[0].data(), counts(), c.dtype);
      break;
    case Kind::kBroadcast:
      ringlet::broadcast(l.inputs[0].data(), static_cast<size_t>(c.rows[0]), c.dtype, c.root);
      break;
    case Kind::kReducescatter:
      ringlet::reducescatter(l.inputs[0].data(), l.outputs[0].data(), counts(), c.dtype, c.op);
      break;
    case Kind::kAlltoall: {
      std::vector<size_t> send, recv;
      for (size_t j = 0; j < c.members.size(); ++j) {
        send.push_back(static_cast<size_t>(c.splits[static_cast<size_t>(me)][j]));
        recv.push_back(static_cast<size_t>(c.splits[j][static_cast<size_t>(me)]));
      }
      ringlet::alltoall(l.inputs[0].data(), send, l.outputs[0].data(), recv, c.dtype);
      break;
    }
    case Kind::kBarrier:
      if (c.set == 0) {
        ringlet::barrier();
      } else {
        ringlet::barrier(c.set);
      }
      break;
    case Kind::kGroupedAllreduce: break;  // never blocking
  }
}

int Soak::run() {
  const auto start = Clock::now();
  auto last_report = start;
  int64_t batch = 0;
  for (;; ++batch) {
    const int phase = decide_phase(batch, start);
    if (phase == 2) break;
    Batch b = planner_.next(phase == 1);
    for (const SetChange& s : b.set_changes) apply(s);
    std::vector<Live> live;
    for (const Collective& c : b.collectives) {
      checker_.fold_plan(c);
      if (c.index_of(rank_) < 0) continue;  // a set this rank is not in
      live.push_back(Live{&c, {}, {}, {}, {}});
      prepare(live.back());
    }
    // Each rank submits and synchronizes in its own order.
    std::mt19937_64 order(mix(opt_.seed ^ mix(static_cast<uint64_t>(batch) << 8 |
                                              static_cast<uint64_t>(rank_))));
    std::vector<Live*> async;
    for (Live& l : live) {
      if (!l.c->synchronous) async.push_back(&l);
    }
    std::shuffle(async.begin(), async.end(), order);
    for (Live* l : async) submit(*l);
    for (Live& l : live) {
      if (l.c->synchronous) call_blocking(l);
    }
    std::vector<std::pair<Live*, size_t>> pending;
    for (Live* l : async) {
      l->results.resize(l->handles.size());
      for (size_t h = 0; h < l->handles.size(); ++h) pending.emplace_back(l, h);
    }
    std::shuffle(pending.begin(), pending.end(), order);
    for (auto [l, h] : pending) {
      if (order() % 4 == 0) ringlet::wait(l->handles[h], std::chrono::minutes(5));
      if (order() % 4 == 0) (void)ringlet::poll(l->handles[h]);
      l->results[h] = ringlet::synchronize(l->handles[h]);
    }
    for (const Live& l : live) checker_.check(l, batch);
    if (opt_.verbose || (rank_ == 0 && Clock::now() - last_report > std::chrono::seconds(10))) {
      last_report = Clock::now();
      std::printf("soak rank %d: batch %" PRId64 ", %" PRId64 " collectives, %" PRId64
                  " bytes checked, %" PRId64 " wrong so far\n",
                  rank_, batch, totals_.collectives, totals_.bytes_checked, totals_.wrong);
      std::fflush(stdout);
    }
  }

  // Every rank must have drawn the same plan and seen the same shared results.
  std::vector<uint64_t> digests(static_cast<size_t>(size_));
  const std::vector<size_t> ones(static_cast<size_t>(size_), 1);
  ringlet::allgather(&digest_.h, digests.data(), ones, ringlet::DataType::kInt64);
  bool agree = true;
  for (uint64_t d : digests) agree = agree && d == digests[0];
  if (!agree) {
    std::string all;
    for (uint64_t d : digests) all += " " + std::to_string(d);
    std::fprintf(stderr, "soak rank %d: the ranks' checksums differ:%s\n", rank_, all.c_str());
  }
  int64_t mine[3] = {totals_.collectives, totals_.bytes_checked, totals_.wrong};
  int64_t sum[3];
  ringlet::allreduce(mine, sum, 3, ringlet::DataType::kInt64, ringlet::ReduceOp::kSum);
  std::printf("soak rank %d: %" PRId64 " batches, %" PRId64 " collectives run, %" PRId64
              " bytes checked, %" PRId64 " wrong elements\n",
              rank_, batch, totals_.collectives, totals_.bytes_checked, totals_.wrong);
  if (rank_ == 0) {
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("soak: seed %" PRIu64 ", %d ranks, %.1f s: %" PRId64 " collectives run, %" PRId64
                " bytes checked, %" PRId64 " wrong elements, checksum %016" PRIx64 " %s\n",
                opt_.seed, size_, s, sum[0], sum[1], sum[2], digest_.h,
                agree ? "agreed by every rank" : "NOT AGREED");
  }
  std::fflush(stdout);
  return sum[2] == 0 && agree ? 0 : 1;
}

}  // namespace
}  // namespace soak

int main(int argc, char** argv) {
  soak::Options o;
  CLI::App app{"ringlet-soak: random collectives, every result checked"};
  app.add_option("--seconds", o.seconds, "run for about this long (default 20)");
  app.add_option("--iterations", o.iterations, "run this many batches instead");
  app.add_option("--seed", o.seed, "the plan's seed (default: drawn and printed)");
  app.add_option("--max-bytes", o.plan.max_bytes, "the largest tensor, in bytes (default 16 MiB)");
  app.add_option("--in-flight", o.plan.max_in_flight,
                 "most asynchronous collectives per batch (default 8)");
  app.add_flag("--verbose", o.verbose, "report every batch");
  CLI11_PARSE(app, argc, argv);
  o.seed_given = app.count("--seed") > 0;
  if (o.seconds <= 0 && o.iterations <= 0) o.seconds = 20;
  if (o.plan.max_bytes < 1 || o.plan.max_in_flight < 0) {
    std::fprintf(stderr, "soak: --max-bytes must be at least 1 and --in-flight at least 0\n");
    return 2;
  }
  int rank = -1;
  try {
    ringlet::init();
    rank = ringlet::rank();
    // Rank 0's seed, drawn or given, is everyone's.
    uint64_t seed = o.seed_given ? o.seed : std::random_device{}() * 0x100000001ULL ^ std::random_device{}();
    ringlet::broadcast(&seed, 1, ringlet::DataType::kInt64, 0);
    o.seed = seed;
    if (rank == 0) {
      std::printf("soak: seed %" PRIu64 " (replay with --seed %" PRIu64 "), %d ranks\n", seed, seed,
                  ringlet::size());
      std::fflush(stdout);
    }
    const int code = soak::Soak(o, rank, ringlet::size()).run();
    ringlet::shutdown();
    return code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak rank %d: error (replay with --seed %" PRIu64 "): %s\n", rank, o.seed,
                 e.what());
    return 1;
  }
}
