// The handle table's deadline: once the runtime has stopped, a handle that is
// still pending fails after the grace period instead of blocking forever.
#include "core/runtime/handle_table.h"

#include <gtest/gtest.h>

#include <thread>

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

}  // namespace
}  // namespace ringlet::core::runtime
