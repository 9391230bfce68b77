// The timeline writer when the disk refuses a write: the failure is reported
// once, flush() says so, and the file stays strict JSON.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/timeline/timeline.h"

namespace ringlet::core::timeline {
namespace {

using namespace std::chrono_literals;

TEST(TimelineWriter, AFailedWriteIsReportedOnceAndTheFileStaysValid) {
  const std::string path = "/tmp/ringlet_tl_full_" + std::to_string(::getpid()) + ".json";
  // In a child: the file-size limit would hit this test process too.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int reports = 0;
    std::string reported;
    bool flush_threw = false;
    {
      Timeline tl(path, false, 5s, [&](const std::string& e) {
        ++reports;
        reported = e;
      });
      for (int i = 0; i < 400; ++i) {
        tl.negotiate_start("tensor." + std::to_string(i), "ALLREDUCE");
        if (i == 2 || i % 50 == 49) {  // a first small batch fits
          try {
            tl.flush();
          } catch (const std::runtime_error&) {
            flush_threw = true;
          }
        }
      }
    }
    const bool ok = reports == 1 && flush_threw &&
                    reported.find(path) != std::string::npos &&
                    reported.find("File too large") != std::string::npos;
    if (!ok) std::fprintf(stderr, "reports %d, flush threw %d, error '%s'\n", reports, flush_threw, reported.c_str());
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "see the child's stderr";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_LE(text.str().size(), 4096u);
  nlohmann::json events;
  ASSERT_NO_THROW(events = nlohmann::json::parse(text.str())) << text.str();
  EXPECT_GT(events.size(), 0u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ringlet::core::timeline
