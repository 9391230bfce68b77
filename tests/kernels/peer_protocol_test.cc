// The protocol of the allreduce whose kernels synchronise among themselves
// (ringlet/kernels/peer_protocol.h), on the CPU: its arithmetic, and its
// block program run on threads, one per block of every rank, each rank
// going on to its next round as soon as its own blocks are done, as a GPU
// stream would. Every element a block reads or writes is checked against
// the round it belongs to, so a step that lets a peer read data of another
// round, or write an output its owner has already moved on from, fails the
// test with the element and the rounds.
#include "ringlet/kernels/peer_protocol.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ringlet::kernels::peer {
namespace {

TEST(PeerSplit, PiecesTileTheExtentEachStartingOn16Bytes) {
  for (size_t es : {1, 2, 4, 8, 16}) {
    for (int pieces = 1; pieces <= 9; ++pieces) {
      for (size_t count = 0; count <= 200; ++count) {
        size_t next = 0;
        for (int i = 0; i < pieces; ++i) {
          const Range r = split(count, es, pieces, i);
          ASSERT_EQ(r.begin, next) << "count " << count << " es " << es << " piece " << i;
          if (r.length > 0) {
            EXPECT_EQ(r.begin * es % 16, 0u);
          }
          next = r.begin + r.length;
        }
        EXPECT_EQ(next, count) << "count " << count << " es " << es << " pieces " << pieces;
      }
    }
  }
}

TEST(PeerSplit, KernelBlocksGrowWithTheWorkAndStayWithinTheCap) {
  // One block for anything up to a chunk; a chunk more, a block more.
  EXPECT_EQ(kernel_blocks(1, 4, 2, false, 64), 1);
  EXPECT_EQ(kernel_blocks(kChunkBytes / 4, 4, 2, false, 64), 1);
  EXPECT_EQ(kernel_blocks(kChunkBytes / 4 + 1, 4, 2, false, 64), 2);
  // Two-shot: the work is a rank's part (here half the message).
  EXPECT_EQ(kernel_blocks(2 * kChunkBytes / 4, 4, 2, true, 64), 1);
  EXPECT_EQ(kernel_blocks(size_t{1} << 30, 4, 4, true, 66), kMaxBlocks);
  EXPECT_EQ(kernel_blocks(size_t{1} << 30, 4, 4, true, 33), 33);
  EXPECT_EQ(kernel_blocks(size_t{1} << 30, 4, 4, false, 0), 1);
  EXPECT_EQ(kernel_blocks(0, 4, 4, false, 8), 1);
}

TEST(PeerFlags, ValuesGrowWithRoundAndStepAndSlotsAreDistinct) {
  EXPECT_LT(flag_value(7, kArrived), flag_value(7, kDone));
  EXPECT_LT(flag_value(7, kDone), flag_value(8, kArrived));
  std::vector<bool> used(kMaxBlocks * kMaxRanks, false);
  for (int b = 0; b < kMaxBlocks; ++b) {
    for (int r = 0; r < kMaxRanks; ++r) {
      const size_t s = flag_slot(b, r);
      ASSERT_LT(s * sizeof(uint64_t), kFlagBytes);
      EXPECT_FALSE(used[s]);
      used[s] = true;
    }
  }
  const uint64_t code = failure_code(5, 123456, kDone);
  EXPECT_NE(code, 0u);
  EXPECT_EQ(failed_peer(code), 5);
  EXPECT_EQ(failed_step(code), kDone);
  EXPECT_EQ(failed_round(code), 123456u);
  EXPECT_EQ(failed_peer(failure_code(0, 1, kArrived)), 0);
}

// One rank's memory, as every rank reaches it: its flag area, its input
// (what its pack wrote before the kernel), its output, and for each element
// the round whose data it holds.
struct RankMemory {
  explicit RankMemory(size_t capacity)
      : flags(kFlagBytes / sizeof(uint64_t), 0),
        input(capacity),
        input_round(capacity),
        output(capacity),
        output_round(capacity) {}
  std::vector<uint64_t> flags;
  std::vector<int64_t> input;
  std::vector<std::atomic<uint64_t>> input_round;
  std::vector<int64_t> output;
  std::vector<std::atomic<uint64_t>> output_round;
};

int64_t input_value(int rank, uint64_t round, size_t i) {
  return (rank + 1) * 1000003 + static_cast<int64_t>(round) * 7919 + static_cast<int64_t>(i % 97);
}

struct Job {
  explicit Job(int ranks) : ranks(ranks) {}
  int ranks;
  std::vector<std::unique_ptr<RankMemory>> memory;
  std::chrono::milliseconds timeout{20000};
  std::mutex mu;
  std::vector<std::string> faults;
  std::atomic<uint64_t> failure{0};
  int absent = -1;  // a rank that never runs its kernels

  void fault(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (faults.size() < 10) faults.push_back(what);
  }
};

// The host's platform for run_block: block `block` of rank `me`, which
// yields at random points so that the ranks' blocks interleave in many
// orders.
struct HostBlock {
  Job& job;
  const Round& round;
  int me;
  std::minstd_rand rng;

  void maybe_yield() {
    if (rng() % 4 == 0) std::this_thread::yield();
  }
  void arrive(int block, uint64_t value) {
    for (int peer = 0; peer < job.ranks; ++peer) {
      if (peer == me) continue;
      maybe_yield();
      std::atomic_ref<uint64_t>(job.memory[peer]->flags[flag_slot(block, me)])
          .store(value, std::memory_order_release);
    }
  }
  bool wait(int block, uint64_t value) {
    const auto deadline = std::chrono::steady_clock::now() + job.timeout;
    for (int peer = 0; peer < job.ranks; ++peer) {
      if (peer == me) continue;
      std::atomic_ref<uint64_t> flag(job.memory[me]->flags[flag_slot(block, peer)]);
      while (flag.load(std::memory_order_acquire) < value) {
        if (std::chrono::steady_clock::now() > deadline) {
          uint64_t none = 0;
          job.failure.compare_exchange_strong(
              none, failure_code(peer, round.round, static_cast<Step>(value & 3)));
          return false;
        }
        std::this_thread::yield();
      }
    }
    return true;
  }
  void work(Range range) {
    for (size_t i = range.begin; i < range.begin + range.length; ++i) {
      if (i % 7 == 0) maybe_yield();
      int64_t sum = 0;
      for (int r = 0; r < job.ranks; ++r) {
        RankMemory& m = *job.memory[r];
        const uint64_t had = m.input_round[i].load(std::memory_order_acquire);
        if (had != round.round) {
          job.fault("rank " + std::to_string(me) + " round " + std::to_string(round.round) +
                    " read element " + std::to_string(i) + " of rank " + std::to_string(r) +
                    "'s input holding round " + std::to_string(had));
        }
        sum += m.input[i];
      }
      for (int r = 0; r < job.ranks; ++r) {
        if (!round.two_shot && r != me) continue;
        RankMemory& m = *job.memory[r];
        const uint64_t had = m.output_round[i].load(std::memory_order_acquire);
        if (had >= round.round) {
          job.fault("rank " + std::to_string(me) + " round " + std::to_string(round.round) +
                    " wrote element " + std::to_string(i) + " of rank " + std::to_string(r) +
                    "'s output already holding round " + std::to_string(had));
        }
        m.output[i] = sum;
        m.output_round[i].store(round.round, std::memory_order_release);
      }
    }
  }
};

// What every rank agrees on for round g: its size, shape and blocks.
Round round_of(uint64_t g, int ranks, int me, size_t capacity) {
  std::minstd_rand shared(static_cast<uint32_t>(g) * 2654435761u + 1);
  Round r{};
  r.round = g;
  r.ranks = ranks;
  r.me = me;
  r.element_bytes = sizeof(int64_t);
  r.count = shared() % capacity;
  r.two_shot = shared() % 2 == 0;
  r.blocks = 1 + static_cast<int>(shared() % 4);
  return r;
}

// Rank `me` runs `rounds` rounds: pack, launch its blocks, wait for them
// (its stream reaching the kernel's end), check its output, go on.
void run_rank(Job& job, int me, uint64_t first, uint64_t rounds, size_t capacity) {
  RankMemory& mine = *job.memory[me];
  std::minstd_rand rng(static_cast<uint32_t>(me) * 7 + 3);
  for (uint64_t g = first; g < first + rounds; ++g) {
    const Round r = round_of(g, job.ranks, me, capacity);
    for (size_t i = 0; i < r.count; ++i) {
      mine.input[i] = input_value(me, g, i);
      mine.input_round[i].store(g, std::memory_order_release);
    }
    if (me == job.absent) return;
    std::vector<std::thread> blocks;
    for (int b = 0; b < r.blocks; ++b) {
      blocks.emplace_back([&job, &r, me, b, seed = rng()] {
        HostBlock block{job, r, me, std::minstd_rand(seed)};
        run_block(block, r, b);
      });
    }
    for (std::thread& t : blocks) t.join();
    if (job.failure.load() != 0) return;
    for (size_t i = 0; i < r.count; ++i) {
      int64_t want = 0;
      for (int q = 0; q < job.ranks; ++q) want += input_value(q, g, i);
      if (mine.output_round[i].load() != g || mine.output[i] != want) {
        job.fault("rank " + std::to_string(me) + " round " + std::to_string(g) + " element " +
                  std::to_string(i) + ": " + std::to_string(mine.output[i]) + " (round " +
                  std::to_string(mine.output_round[i].load()) + "), want " + std::to_string(want));
        return;
      }
    }
  }
}

class PeerProtocol : public ::testing::TestWithParam<int> {};

TEST_P(PeerProtocol, EveryRankGetsEachRoundsSumAndNoBlockTouchesAnotherRoundsData) {
  const int ranks = GetParam();
  const size_t capacity = 300;
  Job job(ranks);
  for (int r = 0; r < ranks; ++r) job.memory.push_back(std::make_unique<RankMemory>(capacity));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&job, r, capacity] { run_rank(job, r, 1, 150, capacity); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(job.failure.load(), 0u) << "a wait gave up, on peer " << failed_peer(job.failure);
  for (const std::string& f : job.faults) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, PeerProtocol, ::testing::Values(2, 3, 4));

TEST(PeerProtocolFailure, ARankThatNeverLaunchesIsNamedByEveryWaitThatGivesUp) {
  const size_t capacity = 64;
  Job job(3);
  job.timeout = std::chrono::milliseconds(200);
  job.absent = 2;
  for (int r = 0; r < 3; ++r) job.memory.push_back(std::make_unique<RankMemory>(capacity));
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&job, r, capacity] { run_rank(job, r, 40, 5, capacity); });
  }
  for (std::thread& t : threads) t.join();
  const uint64_t code = job.failure.load();
  ASSERT_NE(code, 0u);
  EXPECT_EQ(failed_peer(code), 2);
  EXPECT_EQ(failed_step(code), kArrived);
  EXPECT_EQ(failed_round(code), 40u);
}

}  // namespace
}  // namespace ringlet::kernels::peer
