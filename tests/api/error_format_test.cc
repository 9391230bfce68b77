// The public error made from an internal failure: the code from its kind and
// the message formatted once from its fields, at the API boundary.
#include <gtest/gtest.h>

#include <string>

#include "ringlet/common/failure.h"
#include "status_error.h"

namespace ringlet::api {
namespace {

using common::Failure;
using common::FailureKind;

TEST(ErrorFormat, APeerLostInACollectiveOfATensor) {
  Failure f(FailureKind::kPeerLost, 0, 2, "rank 2 (pid 77) died");
  f.in_collective("allreduce").for_tensor("grad.0");
  const Error e = error_of(f, "synchronize", 0);
  EXPECT_EQ(e.code(), ErrorCode::kPeerLost);
  EXPECT_STREQ(
      e.what(),
      "ringlet: synchronize on rank 0: allreduce of 'grad.0' failed: rank 2 (pid 77) died");
}

TEST(ErrorFormat, ABlockingCallNamesTheCollectiveOnce) {
  Failure f(FailureKind::kTimeout, 1, 2, "timed out after 2 s waiting for rank 2");
  f.in_collective("allgather");
  f.in_collective("allgather");  // a second layer that knows it too
  const Error e = error_of(f, "allgather", 1);
  EXPECT_EQ(e.code(), ErrorCode::kTimeout);
  EXPECT_STREQ(e.what(),
               "ringlet: allgather on rank 1: timed out after 2 s waiting for rank 2 in allgather");
}

TEST(ErrorFormat, TheRankIsSaidOnceWhateverTheLayersKnew) {
  const Error unknown = error_of(Failure(FailureKind::kMismatch, "dtype differs"), "allreduce", 3);
  EXPECT_STREQ(unknown.what(), "ringlet: allreduce on rank 3: dtype differs");
  const Error known =
      error_of(Failure(FailureKind::kMismatch, 3, -1, "dtype differs"), "allreduce", 3);
  EXPECT_STREQ(known.what(), "ringlet: allreduce on rank 3: dtype differs");
  // Before init the API knows no rank: the failure's own is used.
  const Error early =
      error_of(Failure(FailureKind::kConfig, 4, -1, "bad RINGLET_RANK"), "init", -1);
  EXPECT_STREQ(early.what(), "ringlet: init on rank 4: bad RINGLET_RANK");
}

TEST(ErrorFormat, CodesFollowTheKind) {
  auto code = [](FailureKind k) { return error_of(Failure(k, 0, -1, "x"), "call", 0).code(); };
  EXPECT_EQ(code(FailureKind::kInvalidArgument), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(FailureKind::kMismatch), ErrorCode::kMismatch);
  EXPECT_EQ(code(FailureKind::kPeerLost), ErrorCode::kPeerLost);
  EXPECT_EQ(code(FailureKind::kTimeout), ErrorCode::kTimeout);
  EXPECT_EQ(code(FailureKind::kShutdown), ErrorCode::kAborted);
  EXPECT_EQ(code(FailureKind::kStalled), ErrorCode::kAborted);
  EXPECT_EQ(code(FailureKind::kConfig), ErrorCode::kConfig);
  EXPECT_EQ(code(FailureKind::kTransport), ErrorCode::kInternal);
  EXPECT_EQ(code(FailureKind::kInternal), ErrorCode::kInternal);
}

TEST(ErrorFormat, ATransportErrorSaysSo) {
  const Error e = error_of(Failure(FailureKind::kTransport, 0, 1, "corrupt message from rank 1"),
                           "broadcast", 0);
  EXPECT_STREQ(e.what(),
               "ringlet: broadcast on rank 0: transport error: corrupt message from rank 1");
}

TEST(ErrorFormat, RethrowFormatsAFailureTheSameWay) {
  Failure f(FailureKind::kPeerLost, 1, 2, "connection to rank 2 closed");
  f.in_collective("alltoall");
  try {
    try {
      throw f;
    } catch (...) {
      rethrow_as_error("alltoall", 1);
    }
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPeerLost);
    EXPECT_STREQ(e.what(), error_of(f, "alltoall", 1).what());
  }
}

}  // namespace
}  // namespace ringlet::api
