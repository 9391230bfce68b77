// What the multi-rank gtest programs of this folder share: only rank 0 prints
// gtest's report (the others print their failures, each line prefixed with
// the rank), the ranks leave together at the end, and a recorder of the
// phases an algorithm reports.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "core/collectives/workspace.h"
#include "core/communicator.h"

namespace ringlet::test {

// Non-zero ranks print only their failures, each line prefixed with the rank.
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed()) {
      std::cerr << "[rank " << rank_ << "] " << (r.file_name() ? r.file_name() : "") << ":"
                << r.line_number() << ": " << r.summary() << std::endl;
    }
  }

 private:
  int rank_;
};

// Leaves gtest's full report to rank 0.
inline void report_on_rank_zero(int rank) {
  if (rank == 0) return;
  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new FailurePrinter(rank));
}

// Leave together: a rank that closes its links while a peer is still
// finishing the last collective can make that peer see it as lost. Rank 0
// serves the store, so it leaves last. `program` names the store's keys.
inline void leave_together(core::Communicator& comm, const std::string& program) {
  if (comm.size() <= 1) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  comm.store().barrier(program + "/exit", comm.size(), deadline);
  if (comm.rank() != 0) {
    comm.store().add(program + "/left", 1);
    return;
  }
  while (comm.store().add(program + "/left", 0) < comm.size() - 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The phases an algorithm reports, in order; a nested phase or an end
// without a begin fails the test.
struct PhaseRecorder final : core::collectives::PhaseObserver {
  std::vector<std::string> seen;
  int open = 0;
  void begin(const char* phase, size_t first, size_t end) override {
    EXPECT_EQ(open++, 0) << "nested phase " << phase;
    EXPECT_LE(first, end);
    seen.push_back(phase);
  }
  void end() override { EXPECT_EQ(--open, 0); }
};

}  // namespace ringlet::test
