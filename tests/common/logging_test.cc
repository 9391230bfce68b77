// The logger: which levels pass, what a line looks like, whole lines from
// many threads, and nothing allocated for a message that is filtered out.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/common/logging.h"

// Counts allocations on this thread while `g_counting` is set. The global
// new and delete are replaced as a pair (malloc/free), which GCC cannot see
// through at each call site.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
thread_local bool g_counting = false;
thread_local int g_allocations = 0;
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace ringlet::common {
namespace {

// Points the logger at a pipe for the test's lifetime and reads what came.
class Captured {
 public:
  explicit Captured(LogSettings s) : saved_(log_settings()) {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK) != 0) std::abort();
    read_ = fds[0];
    write_ = fds[1];
    s.fd = write_;
    configure_log(s);
  }
  ~Captured() {
    configure_log(saved_);
    ::close(read_);
    ::close(write_);
  }
  std::string text() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(read_, buf, sizeof buf)) > 0;) out.append(buf, n);
    return out;
  }

 private:
  LogSettings saved_;
  int read_ = -1, write_ = -1;
};

LogSettings at(LogLevel level, int rank = 3, bool timestamp = false) {
  LogSettings s;
  s.level = level;
  s.rank = rank;
  s.timestamp = timestamp;
  return s;
}

TEST(Logging, ParsesHorovodsLevelsInAnyCase) {
  EXPECT_EQ(parse_log_level("trace"), LogLevel::kTrace);
  EXPECT_EQ(parse_log_level("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("Info"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("warning"), LogLevel::kWarning);
  EXPECT_EQ(parse_log_level("ERROR"), LogLevel::kError);
  EXPECT_EQ(parse_log_level("fatal"), LogLevel::kFatal);
  EXPECT_EQ(parse_log_level("warn"), std::nullopt);
  EXPECT_EQ(parse_log_level(""), std::nullopt);
  EXPECT_EQ(parse_log_level("warnings"), std::nullopt);
  EXPECT_EQ(LogSettings{}.level, LogLevel::kWarning);  // Horovod's default
}

TEST(Logging, PrintsTheLevelAndAboveOnly) {
  Captured out(at(LogLevel::kWarning));
  log(LogLevel::kTrace, "t");
  log(LogLevel::kDebug, "d");
  log(LogLevel::kInfo, "i");
  log(LogLevel::kWarning, "w %d", 1);
  log(LogLevel::kError, "e %s", "two");
  log(LogLevel::kFatal, "f");
  EXPECT_EQ(out.text(),
            "[ringlet rank 3] warning: w 1\n"
            "[ringlet rank 3] error: e two\n"
            "[ringlet rank 3] fatal: f\n");
  EXPECT_FALSE(log_enabled(LogLevel::kInfo));
  EXPECT_TRUE(log_enabled(LogLevel::kWarning));
}

TEST(Logging, NamesTheHostOnceItIsKnown) {
  LogSettings s = at(LogLevel::kInfo, 5);
  s.host = "node7";
  Captured out(s);
  log(LogLevel::kInfo, "transport tcp");
  EXPECT_EQ(out.text(), "[ringlet rank 5 on node7] info: transport tcp\n");
  EXPECT_EQ(log_settings().host, "node7");
}

TEST(Logging, TraceShowsEverythingFatalOnlyFatal) {
  {
    Captured out(at(LogLevel::kTrace, 0));
    log(LogLevel::kTrace, "t");
    log(LogLevel::kInfo, "i");
    EXPECT_EQ(out.text(), "[ringlet rank 0] trace: t\n[ringlet rank 0] info: i\n");
  }
  {
    Captured out(at(LogLevel::kFatal));
    log(LogLevel::kError, "e");
    log(LogLevel::kFatal, "f");
    EXPECT_EQ(out.text(), "[ringlet rank 3] fatal: f\n");
  }
}

TEST(Logging, NoRankYetSaysSo) {
  Captured out(at(LogLevel::kWarning, -1));
  log(LogLevel::kWarning, "early");
  EXPECT_EQ(out.text(), "[ringlet] warning: early\n");
}

TEST(Logging, TimestampLeadsTheLine) {
  Captured out(at(LogLevel::kWarning, 12, true));
  log(LogLevel::kError, "late");
  const std::string line = out.text();
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} ringlet rank 12\] error: late\n)")))
      << line;
}

TEST(Logging, LongMessagesStayWhole) {
  Captured out(at(LogLevel::kWarning));
  const std::string big(5000, 'x');
  log(LogLevel::kWarning, "%s|end", big.c_str());
  EXPECT_EQ(out.text(), "[ringlet rank 3] warning: " + big + "|end\n");
}

TEST(Logging, FilteredMessagesAllocateNothing) {
  Captured out(at(LogLevel::kError));
  const std::string arg = "some text";
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 100; ++i) log(LogLevel::kDebug, "%s %d", arg.c_str(), i);
  const int filtered = g_allocations;
  const std::string counted(100, 'x');  // the counter sees allocations
  g_counting = false;
  EXPECT_EQ(filtered, 0);
  EXPECT_GE(g_allocations, 1);
  EXPECT_EQ(out.text(), "");
}

TEST(Logging, ThreadsWriteWholeLines) {
  Captured out(at(LogLevel::kInfo));
  constexpr int kThreads = 4, kLines = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLines; ++i) log(LogLevel::kInfo, "thread %d line %d", t, i);
    });
  }
  for (auto& th : threads) th.join();
  std::istringstream lines(out.text());
  std::string line;
  int count = 0;
  const std::regex whole(R"(\[ringlet rank 3\] info: thread \d line \d+)");
  while (std::getline(lines, line)) {
    EXPECT_TRUE(std::regex_match(line, whole)) << line;
    ++count;
  }
  EXPECT_EQ(count, kThreads * kLines);
}

}  // namespace
}  // namespace ringlet::common
