// common::Failure: fields filled in layer by layer, each once, and the
// message built from them.
#include "ringlet/common/failure.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ringlet::common {
namespace {

TEST(Failure, TheCauseAloneWhenNothingElseIsKnown) {
  const Failure f(FailureKind::kInternal, "out of slots");
  EXPECT_EQ(f.rank(), -1);
  EXPECT_EQ(f.peer(), -1);
  EXPECT_EQ(f.body(), "out of slots");
  EXPECT_STREQ(f.what(), "out of slots");
}

TEST(Failure, RankPrefixesWhatButNotTheBody) {
  const Failure f(FailureKind::kPeerLost, 1, 2, "rank 2 (pid 77) died");
  EXPECT_EQ(f.kind(), FailureKind::kPeerLost);
  EXPECT_EQ(f.peer(), 2);
  EXPECT_EQ(f.body(), "rank 2 (pid 77) died");
  EXPECT_STREQ(f.what(), "rank 1: rank 2 (pid 77) died");
}

TEST(Failure, EachLayerFillsOnlyWhatIsUnset) {
  Failure f(FailureKind::kPeerLost, -1, 2, "connection to rank 2 closed");
  f.at_rank(0).in_collective("allgather");
  // A layer further up knows the same things, less precisely: ignored.
  f.at_rank(5).in_collective("allreduce").with_peer(4);
  EXPECT_EQ(f.rank(), 0);
  EXPECT_EQ(f.peer(), 2);
  EXPECT_EQ(f.collective(), "allgather");
  EXPECT_STREQ(f.what(), "rank 0: connection to rank 2 closed in allgather");
}

TEST(Failure, TheCollectiveIsNamedOnceWithTheTensor) {
  Failure f(FailureKind::kTimeout, 0, 2, "timed out after 2 s waiting for rank 2");
  f.in_collective("allgather").for_tensor("grad.0").for_tensor("other");
  EXPECT_EQ(f.tensors(), std::vector<std::string>{"grad.0"});
  EXPECT_EQ(f.body(), "allgather of 'grad.0' failed: timed out after 2 s waiting for rank 2");
  EXPECT_EQ(std::string(f.what()).find("in allgather"), std::string::npos) << f.what();
}

TEST(Failure, AFusedCollectiveHoldsEveryNameAndShowsFour) {
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  Failure f(FailureKind::kPeerLost, 0, 1, "connection to rank 1 closed");
  f.in_collective("allreduce").for_tensors(names).for_tensor("g");
  EXPECT_EQ(f.tensors(), names) << "the fields keep every name, the text shows four";
  EXPECT_EQ(f.body(),
            "allreduce of 'a', 'b', 'c', 'd' and 2 more failed: connection to rank 1 closed");
  const std::vector<std::string> two = {"x", "y"};
  EXPECT_EQ(names_text(two), "'x', 'y'");
  EXPECT_EQ(names_text({}), "");
}

TEST(Failure, ASecondHandReportTakesTheLostPeer) {
  Failure f(FailureKind::kTimeout, 1, 0, "timed out after 10 s waiting for rank 0");
  f.add_cause("rank 0: rank 2 (pid 9) died in allgather");
  f.set_kind(FailureKind::kPeerLost).set_peer(2);
  EXPECT_EQ(f.kind(), FailureKind::kPeerLost);
  EXPECT_EQ(f.peer(), 2);
  EXPECT_STREQ(f.what(),
               "rank 1: timed out after 10 s waiting for rank 0; rank 0: rank 2 (pid 9) died in "
               "allgather");
}

TEST(Failure, WhatOtherRanksAreToldLeavesTheCollectiveOut) {
  Failure f(FailureKind::kTimeout, 2, 0, "timed out after 2 s waiting for rank 0");
  f.in_collective("allgather").for_tensor("grad.0");
  EXPECT_EQ(f.told(), "rank 2: timed out after 2 s waiting for rank 0");
  EXPECT_EQ(Failure(FailureKind::kPeerLost, "link closed").told(), "link closed");
}

TEST(Failure, IsARuntimeErrorForCodeThatOnlyLogs) {
  try {
    throw Failure(FailureKind::kConfig, 3, -1, "HOROVOD_CYCLE_TIME=x is not a number");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 3: HOROVOD_CYCLE_TIME=x is not a number");
  }
}

TEST(Failure, KindsHaveNames) {
  EXPECT_EQ(to_string(FailureKind::kPeerLost), "peer lost");
  EXPECT_EQ(to_string(FailureKind::kTimeout), "timeout");
  EXPECT_EQ(to_string(FailureKind::kConfig), "configuration error");
}

}  // namespace
}  // namespace ringlet::common
