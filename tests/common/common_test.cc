// The small helpers of common/: file-descriptor ownership, duration text,
// Horovod's even split, the host name.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "ringlet/common/duration_text.h"
#include "ringlet/common/even_split.h"
#include "ringlet/common/fd.h"
#include "ringlet/common/host_name.h"

namespace ringlet::common {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFd, ClosesOnceWhenTheOwnerGoes) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    UniqueFd a(fds[0]);
    UniqueFd b(fds[1]);
    EXPECT_TRUE(a.valid());
    EXPECT_TRUE(static_cast<bool>(b));
    UniqueFd moved = std::move(a);
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(moved.get(), fds[0]);
    moved = std::move(b);  // closes fds[0], takes fds[1]
    EXPECT_FALSE(is_open(fds[0]));
    EXPECT_TRUE(is_open(fds[1]));
  }
  EXPECT_FALSE(is_open(fds[1]));
}

TEST(UniqueFd, ReleaseGivesUpAndResetCloses) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd a(fds[0]);
  const int raw = a.release();
  EXPECT_EQ(raw, fds[0]);
  EXPECT_FALSE(a.valid());
  a.reset(fds[1]);
  EXPECT_TRUE(is_open(fds[0]));  // released: not ours to close
  a.reset();
  EXPECT_FALSE(is_open(fds[1]));
  ::close(raw);
}

TEST(DurationText, SetDurationsAsWrittenMeasuredOnesInTenths) {
  using namespace std::chrono;
  EXPECT_EQ(seconds_text(seconds(30)), "30 s");
  EXPECT_EQ(seconds_text(milliseconds(500)), "0.5 s");
  EXPECT_EQ(seconds_text(milliseconds(1)), "0.001 s");
  EXPECT_EQ(elapsed_text(milliseconds(3249)), "3.2 s");
  EXPECT_EQ(elapsed_text(seconds(0)), "0.0 s");
}

TEST(EvenSplit, FirstRanksTakeTheRemainder) {
  // 10 over 4: 3 3 2 2, starting at 0 3 6 8 (Horovod's reducescatter split).
  const std::vector<size_t> shares = {3, 3, 2, 2}, offsets = {0, 3, 6, 8};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(even_share(10, 4, i), shares[i]);
    EXPECT_EQ(even_offset(10, 4, i), offsets[i]);
  }
  // Fewer items than parts: the last parts are empty.
  EXPECT_EQ(even_share(2, 5, 1), 1u);
  EXPECT_EQ(even_share(2, 5, 2), 0u);
  EXPECT_EQ(even_offset(2, 5, 4), 2u);
  EXPECT_EQ(even_offset(2, 5, 5), 2u);  // one past the last part: the whole count
}

TEST(HostName, IsTheKernelsName) {
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_EQ(host_name(), name);
}

}  // namespace
}  // namespace ringlet::common
