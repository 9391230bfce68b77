// The handle table's deadline: once the runtime has stopped, a handle that is
// still pending fails after the grace period instead of blocking forever; and
// take_then(), the continuation that ends a handle without a waiting thread.
#include "core/runtime/handle_table.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace ringlet::core::runtime {
namespace {

using namespace std::chrono_literals;

TEST(HandleTable, TakeOfAPendingHandleFailsAfterTheTableCloses) {
  HandleTable t;
  const Handle h = t.create();
  std::thread closer([&] {
    std::this_thread::sleep_for(20ms);
    t.close("ringlet was shut down (requested by rank 1)");
  });
  const auto start = std::chrono::steady_clock::now();
  try {
    t.take(h, 200ms);
    ADD_FAILURE() << "take() returned a handle nothing completed";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShutdown);
    EXPECT_EQ(std::string(e.what()),
              "handle 1 was still pending 0.2 s after the runtime stopped (ringlet was shut down "
              "(requested by rank 1)); nothing will complete it");
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 5s);
  closer.join();
}

TEST(HandleTable, ACompletionWithinTheGraceStillCounts) {
  HandleTable t;
  const Handle h = t.create();
  t.close("stopped");
  std::thread late([&] {
    std::this_thread::sleep_for(20ms);
    t.complete(h, Result{{}, {7}, {}});
  });
  EXPECT_EQ(t.take(h, 10s).shape, std::vector<int64_t>{7});
  late.join();
  // Completed before the close: no wait at all.
  const Handle done = t.create();
  t.complete(done, Result{});
  EXPECT_NO_THROW(t.take(done, 0ms));
}

// wait() says when take() would not block, and why: at the completion, or
// once a closed table's grace has run out, when the handle is abandoned
// (take() then fails it with abandoned()'s failure), which is not a
// completion; a wait that times out leaves the handle as it was.
TEST(HandleTable, WaitSaysWhetherTheHandleCompletedOrWasAbandoned) {
  using Waited = HandleTable::Waited;
  HandleTable t;
  const Handle h = t.create();
  EXPECT_EQ(t.wait(h, 20ms, 50ms), Waited::kTimedOut);
  std::thread done([&] {
    std::this_thread::sleep_for(20ms);
    t.complete(h, Result{{}, {3}, {}});
  });
  EXPECT_EQ(t.wait(h, 10s, 50ms), Waited::kCompleted);
  done.join();
  EXPECT_EQ(t.take(h, 50ms).shape, std::vector<int64_t>{3});

  const Handle stranded = t.create();
  const Handle failed = t.create();
  // The grace counts from the close, so the time is taken before it.
  const auto start = std::chrono::steady_clock::now();
  t.close("stopped");
  t.fail(failed, ErrorKind::kShutdown, "failed at the stop");
  EXPECT_EQ(t.wait(stranded, 10ms, 200ms), Waited::kTimedOut);  // within the grace
  EXPECT_EQ(t.wait(stranded, 10s, 200ms), Waited::kAbandoned);  // woken when it ran out
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 5s);
  EXPECT_FALSE(t.poll(stranded));  // the wait left it
  const std::string expected =
      "handle 2 was still pending 0.2 s after the runtime stopped (stopped); nothing will "
      "complete it";
  EXPECT_EQ(std::string(t.abandoned(stranded, 200ms).what()), expected);
  EXPECT_EQ(t.abandoned(stranded, 200ms).kind(), ErrorKind::kShutdown);
  try {
    t.take(stranded, 200ms);
    ADD_FAILURE() << "take() returned an abandoned handle";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
  // A handle that failed is complete: its failure is take()'s to throw.
  EXPECT_EQ(t.wait(failed, 10ms, 200ms), Waited::kCompleted);
  EXPECT_THROW(t.take(failed, 200ms), RuntimeError);
}

TEST(HandleTable, TakeThenRunsOnceWithTheOutcomeAndReleasesTheHandle) {
  HandleTable t;
  std::vector<std::string> seen;
  auto record = [&](HandleTable::Outcome o) {
    seen.push_back(o.failure ? std::string("failed: ") + o.failure->what()
                             : "shape " + std::to_string(o.result.shape.at(0)));
  };

  const Handle done_first = t.create();  // completed before: runs at once, here
  t.complete(done_first, Result{{}, {3}, {}});
  t.take_then(done_first, record);
  EXPECT_EQ(seen, std::vector<std::string>{"shape 3"});
  EXPECT_THROW(t.poll(done_first), common::Failure);  // released

  const Handle later = t.create();  // completed later: runs on the completing thread
  t.take_then(later, record);
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_THROW(t.take_then(later, record), common::Failure);  // one continuation only
  std::thread completer([&] { t.complete(later, Result{{}, {5}, {}}); });
  completer.join();
  t.complete(later, Result{{}, {6}, {}});  // a second completion is ignored
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], "shape 5");
  EXPECT_EQ(t.size(), 0u);

  const Handle failed = t.create();
  t.take_then(failed, record);
  t.fail(failed, ErrorKind::kMismatch, "'grad' has shape [2] on rank 0 and [3] on rank 1");
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2], "failed: 'grad' has shape [2] on rank 0 and [3] on rank 1");
}

TEST(HandleTable, AContinuedHandleStillPendingEndsAtTheClose) {
  HandleTable t;
  std::vector<ErrorKind> kinds;
  auto record = [&](HandleTable::Outcome o) {
    ASSERT_TRUE(o.failure.has_value());
    kinds.push_back(o.failure->kind());
    EXPECT_NE(std::string(o.failure->what()).find("(peer lost)"), std::string::npos)
        << o.failure->what();
  };
  const Handle pending = t.create();
  const Handle waited = t.create();  // taken the ordinary way: keeps its grace
  t.take_then(pending, record);
  t.close("peer lost");
  EXPECT_EQ(kinds, std::vector<ErrorKind>{ErrorKind::kShutdown});
  EXPECT_FALSE(t.poll(waited));
  // Continued after the close: nothing will complete it, so it ends at once.
  t.take_then(waited, record);
  EXPECT_EQ(kinds.size(), 2u);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace ringlet::core::runtime
