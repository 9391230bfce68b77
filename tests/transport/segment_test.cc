// Named shared-memory segments: created exclusively and privately, never
// replacing a segment someone else made, and removed when the process that
// made them is ended by SIGTERM or SIGINT before it unlinked them.
#include "shm/segment.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "ringlet/common/random.h"
#include "ringlet/transport/transport.h"

namespace ringlet::transport::shm {
namespace {

using namespace std::chrono_literals;

std::string fresh_name() { return "/ringlet-segtest-" + common::random_hex(8); }

bool exists(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

TEST(Segment, CreatedPrivately) {
  const std::string name = fresh_name();
  Segment s = Segment::create(name, 4096);
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Segment, AnExistingNameIsNeitherReplacedNorUnlinked) {
  const std::string name = fresh_name();
  Segment first = Segment::create(name, 4096);
  std::memcpy(first.data(), "mine", 5);
  try {
    Segment second = Segment::create(name, 4096);
    FAIL() << "a second segment of the same name was created";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_NE(msg.find("already exists"), std::string::npos) << msg;
  }
  // The first is intact and still reachable by name.
  ASSERT_TRUE(exists(name));
  Segment again = Segment::open(name, 4096);
  EXPECT_STREQ(reinterpret_cast<const char*>(again.data()), "mine");
}

// A child creates a segment and waits to be killed: the registry's handler
// (async-signal-safe) must unlink it before the process ends.
void killed_by(int sig) {
  const std::string name = fresh_name();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    try {
      Segment s = Segment::create(name, 4096);
      const char ok = 1;
      if (::write(ready[1], &ok, 1) != 1) ::_exit(3);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(2);
    }
  }
  ::close(ready[1]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1) << "the child did not create its segment";
  ::close(ready[0]);
  ASSERT_TRUE(exists(name));
  ASSERT_EQ(::kill(pid, sig), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  // The handler chains to the default action: the child still dies of the signal.
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
  EXPECT_FALSE(exists(name)) << "left in /dev/shm after signal " << sig;
}

TEST(Segment, RemovedWhenTheCreatorGetsSigterm) { killed_by(SIGTERM); }
TEST(Segment, RemovedWhenTheCreatorGetsSigint) { killed_by(SIGINT); }

}  // namespace
}  // namespace ringlet::transport::shm
