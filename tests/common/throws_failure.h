// Asserts that a call fails with a common::Failure of a given kind: the kind,
// not the exception's type or text, is what callers and bindings act on.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "ringlet/common/failure.h"

namespace ringlet::test {

// EXPECT_TRUE(throws_failure(common::FailureKind::kInvalidArgument, [&] { ... }));
template <class Call>
::testing::AssertionResult throws_failure(common::FailureKind kind, Call&& call) {
  try {
    call();
  } catch (const common::Failure& f) {
    if (f.kind() == kind) return ::testing::AssertionSuccess() << f.what();
    return ::testing::AssertionFailure() << "failed as " << common::to_string(f.kind()) << ", not "
                                         << common::to_string(kind) << ": " << f.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-Failure: " << e.what();
  }
  return ::testing::AssertionFailure()
         << "did not throw (expected " << common::to_string(kind) << ")";
}

}  // namespace ringlet::test
