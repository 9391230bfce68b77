// Unit tests of ringletrun's parts: line splitting, host lists, the rank
// environment and the clean-up of leftover shared-memory segments.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "agent_wire.h"
#include "child.h"
#include "hosts.h"
#include "job.h"
#include "job_env.h"
#include "output_mux.h"

namespace ringletrun {
namespace {

TEST(LineSplitter, HoldsPartialLinesUntilTheirNewline) {
  LineSplitter s("[1]<stdout>:");
  std::string out;
  s.feed("ab", out);
  EXPECT_EQ(out, "");
  s.feed("c\nde", out);
  EXPECT_EQ(out, "[1]<stdout>:abc\n");
  out.clear();
  s.feed("f\n\nlast", out);
  EXPECT_EQ(out, "[1]<stdout>:def\n[1]<stdout>:\n");
  out.clear();
  s.finish(out);
  EXPECT_EQ(out, "[1]<stdout>:last\n");
  out.clear();
  s.finish(out);  // nothing pending: nothing to add
  EXPECT_EQ(out, "");
}

TEST(LineSplitter, BoundsAnEndlessLine) {
  LineSplitter s("[0]<stderr>:");
  std::string out;
  s.feed(std::string(LineSplitter::kMaxPending + 10, 'x'), out);
  EXPECT_EQ(out.size(), LineSplitter::kMaxPending + 10 + 12 + 1);
  EXPECT_EQ(out.back(), '\n');
}

TEST(OutputMux, WritesWholePrefixedLinesToTheRightFd) {
  int out[2], err[2];
  ASSERT_EQ(::pipe(out), 0);
  ASSERT_EQ(::pipe(err), 0);
  {
    OutputMux mux(out[1], err[1]);
    int a = mux.add(0, OutputMux::Stream::kStdout);
    int b = mux.add(3, OutputMux::Stream::kStderr);
    mux.feed(a, "one\ntw");
    mux.feed(b, "oops\n");
    mux.finish(a);
  }
  ::close(out[1]);
  ::close(err[1]);
  auto slurp = [](int fd) {
    std::string s;
    char buf[256];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return s;
  };
  EXPECT_EQ(slurp(out[0]), "[0]<stdout>:one\n[0]<stdout>:tw\n");
  EXPECT_EQ(slurp(err[0]), "[3]<stderr>:oops\n");
}

TEST(Hosts, ParsesHostLists) {
  auto h = parse_host_list("localhost:4,node2,[::1]:2");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].host, "localhost");
  EXPECT_EQ(h[0].slots, 4);
  EXPECT_EQ(h[1].host, "node2");
  EXPECT_EQ(h[1].slots, 1);
  EXPECT_EQ(h[2].host, "::1");
  EXPECT_EQ(h[2].slots, 2);
  EXPECT_THROW(parse_host_list("localhost:x"), std::invalid_argument);
  EXPECT_THROW(parse_host_list("localhost:0"), std::invalid_argument);
  EXPECT_THROW(parse_host_list("a,,b"), std::invalid_argument);
  EXPECT_THROW(parse_host_list(":3"), std::invalid_argument);
}

TEST(Hosts, ParsesHostfiles) {
  std::istringstream in("# the cluster\nlocalhost slots=2\n\n127.0.0.1:3  # trailing\nbox\n");
  auto h = parse_hostfile(in);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_EQ(h[1].host, "127.0.0.1");
  EXPECT_EQ(h[1].slots, 3);
  EXPECT_EQ(h[2].host, "box");
  EXPECT_EQ(h[2].slots, 1);
  std::istringstream bad("localhost max_slots=2\n");
  EXPECT_THROW(parse_hostfile(bad), std::invalid_argument);
  std::istringstream empty("# nothing\n");
  EXPECT_THROW(parse_hostfile(empty), std::invalid_argument);
}

TEST(Hosts, KnowsWhichNamesAreThisHost) {
  EXPECT_TRUE(is_local_host("localhost", "node7.example"));
  EXPECT_TRUE(is_local_host("127.0.0.1", "node7.example"));
  EXPECT_TRUE(is_local_host("node7", "node7.example"));
  EXPECT_TRUE(is_local_host("node7.example", "node7"));
  EXPECT_TRUE(is_local_host("node7.example", "node7.example"));
  EXPECT_FALSE(is_local_host("node8", "node7.example"));
  EXPECT_FALSE(is_local_host("node7.other", "node7.example"));
  EXPECT_FALSE(is_local_host("10.0.0.7", "10"));
  EXPECT_TRUE(is_local_host(this_hostname(), this_hostname()));
}

TEST(JobEnv, GivesEachRankItsIdentity) {
  Environment base;
  base.set("PATH", "/bin");
  base.set("RINGLET_RANK", "99");  // a stale value from the outside is replaced
  JobIdentity job{"0123456789ab", std::string(64, 'f'), "127.0.0.1:4242"};
  RankPlace place;
  place.local_rank = 2;
  place.local_size = 3;
  auto env = rank_environment(base, job, 2, 3, place);
  std::set<std::string> got(env.begin(), env.end());
  for (const char* want : {"PATH=/bin", "RINGLET_RANK=2", "RINGLET_SIZE=3", "RINGLET_LOCAL_RANK=2",
                           "RINGLET_LOCAL_SIZE=3", "RINGLET_CROSS_RANK=0", "RINGLET_CROSS_SIZE=1",
                           "HOROVOD_RANK=2", "HOROVOD_SIZE=3", "HOROVOD_LOCAL_RANK=2",
                           "HOROVOD_LOCAL_SIZE=3", "HOROVOD_CROSS_RANK=0", "HOROVOD_CROSS_SIZE=1",
                           "RINGLET_RENDEZVOUS=127.0.0.1:4242", "RINGLET_JOB_ID=0123456789ab"}) {
    EXPECT_TRUE(got.count(want)) << want;
  }
  EXPECT_FALSE(got.count("RINGLET_RANK=99"));
}

TEST(Hosts, RanksFillTheHostsInOrderAsHorovodrunNumbersThem) {
  auto places = place_ranks(parse_host_list("a:2,b:2,c:1"), 4, "me");
  ASSERT_EQ(places.size(), 4u);
  std::vector<std::tuple<std::string, int, int, int, int, int>> got;
  for (const auto& p : places) {
    got.emplace_back(p.host, p.host_index, p.local_rank, p.local_size, p.cross_rank,
                     p.cross_size);
  }
  // c gets no rank; b's second slot holds rank 3, the only local rank 1 besides a's.
  EXPECT_EQ(got, (std::vector<std::tuple<std::string, int, int, int, int, int>>{
                     {"a", 0, 0, 2, 0, 2}, {"a", 0, 1, 2, 0, 2},
                     {"b", 1, 0, 2, 1, 2}, {"b", 1, 1, 2, 1, 2}}));
}

TEST(Hosts, EveryNameOfThisMachineIsOneHost) {
  auto places = place_ranks(parse_host_list("localhost:1,nodeA:1,127.0.0.1:1,me:1"), 4, "me");
  std::vector<std::pair<std::string, int>> got;
  for (const auto& p : places) got.emplace_back(p.host, p.local_rank);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int>>{
                     {"", 0}, {"nodeA", 0}, {"", 1}, {"", 2}}));
  EXPECT_EQ(places[0].local_size, 3);
  EXPECT_EQ(places[1].cross_rank, 1);
  EXPECT_EQ(places[1].cross_size, 2);
  EXPECT_TRUE(places[0].local());
  EXPECT_THROW(place_ranks(parse_host_list("a:1,b:1"), 3, "me"), std::invalid_argument);
}

TEST(Hosts, AnInterfaceWithoutAnAddressIsNamedWithTheOthers) {
  EXPECT_EQ(interface_address("lo"), "127.0.0.1");
  try {
    interface_address("nosuch0");
    FAIL() << "nosuch0 has no address";
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("'nosuch0'"), std::string::npos) << what;
    EXPECT_NE(what.find("lo"), std::string::npos) << what;
  }
}

TEST(AgentWire, ALaunchBlockRoundTripsAndArrivesInPieces) {
  AgentLaunch launch{"/work dir", {"python3", "-c", "print('a b')", ""}, {"A=1", "B=x=y", "C="}};
  const std::string block = encode_agent_launch(launch);
  for (std::size_t cut = 0; cut < block.size(); ++cut) {
    EXPECT_FALSE(decode_agent_launch(std::string_view(block).substr(0, cut))) << cut;
  }
  auto got = decode_agent_launch(block);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->cwd, launch.cwd);
  EXPECT_EQ(got->argv, launch.argv);
  EXPECT_EQ(got->env, launch.env);
}

TEST(AgentWire, AMalformedBlockIsRefused) {
  // Fields joined with their NUL terminators.
  auto block = [](std::initializer_list<std::string> fields) {
    std::string out;
    for (const auto& f : fields) out += f + '\0';
    return out;
  };
  EXPECT_THROW(decode_agent_launch("hello\n"), std::invalid_argument);
  EXPECT_THROW(decode_agent_launch(block({"RINGLET-AGENT/1", "/", "x"})), std::invalid_argument);
  EXPECT_THROW(decode_agent_launch(block({"RINGLET-AGENT/1", "/", "0"})), std::invalid_argument)
      << "an empty command";
  EXPECT_THROW(decode_agent_launch(block({"RINGLET-AGENT/1", "/", "1", "sh", "1", "NOEQUALS"})),
               std::invalid_argument);
  EXPECT_TRUE(decode_agent_launch(block({"RINGLET-AGENT/1", "/", "1", "sh", "1", "A=b"})));
}

TEST(JobEnv, OtherHostsGetAllButWhatNamesThisOne) {
  EXPECT_TRUE(forwarded_to_other_hosts("PATH=/bin"));
  EXPECT_TRUE(forwarded_to_other_hosts("RINGLET_SECRET=ab"));
  EXPECT_TRUE(forwarded_to_other_hosts("HOROVOD_FUSION_THRESHOLD=1"));
  for (const char* own : {"HOSTNAME=me", "RINGLET_HOSTNAME=me", "PWD=/x", "SSH_CONNECTION=a b",
                          "BASH_FUNC_f%%=() { :; }"}) {
    EXPECT_FALSE(forwarded_to_other_hosts(own)) << own;
  }
}

TEST(JobEnv, MakesFreshIdentities) {
  JobIdentity a = make_job_identity();
  JobIdentity b = make_job_identity();
  EXPECT_EQ(a.secret.size(), 64u);
  EXPECT_EQ(a.job_id.size(), 12u);
  EXPECT_EQ(a.secret.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a.secret, b.secret);
  EXPECT_NE(a.job_id, b.job_id);
  EXPECT_EQ(a.rendezvous.rfind("127.0.0.1:", 0), 0u);
  EXPECT_GT(pick_free_port(), 0);
}

TEST(ShmLeftovers, RemovesOnlyThisJobsSegments) {
  std::string id = random_hex(6);
  std::string mine = "/dev/shm/ringlet-" + id + "-seg0";
  std::string other = "/dev/shm/ringlet-" + id + "x-seg0";  // another job's id
  for (const auto& p : {mine, other}) {
    int fd = ::open(p.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << p;
    ::close(fd);
  }
  EXPECT_EQ(remove_shm_leftovers(id), 1);
  EXPECT_NE(::access(mine.c_str(), F_OK), 0);
  EXPECT_EQ(::access(other.c_str(), F_OK), 0);
  ::unlink(other.c_str());
  EXPECT_EQ(remove_shm_leftovers(""), 0);
}

std::string read_to_eof(Fd& fd) {
  std::string s;
  char buf[256];
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      s.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the pipe is non-blocking
    }
  }
  return s;
}

int wait_for(Child& c) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!c.try_reap() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return c.wait_status().value_or(-1);
}

TEST(Child, AnExecFailureIsAMessageAndStatus127) {
  ChildSpec spec;
  spec.argv = {"/nonexistent/ringlet-rank"};
  spec.env = {"PATH=/bin"};
  Child c = Child::spawn(spec);
  std::string err = read_to_eof(c.stderr_pipe());
  EXPECT_NE(err.find("cannot execute '/nonexistent/ringlet-rank'"), std::string::npos) << err;
  int status = wait_for(c);
  EXPECT_EQ(exit_code_of(status), 127);
  EXPECT_EQ(describe_wait_status(status), "exited with status 127");
}

TEST(Child, GetsExactlyTheGivenEnvironment) {
  ChildSpec spec;
  spec.argv = {"sh", "-c", "echo \"$ONLY|$HOME\""};
  spec.env = {"PATH=/usr/bin:/bin", "ONLY=this"};
  Child c = Child::spawn(spec);
  EXPECT_EQ(read_to_eof(c.stdout_pipe()), "this|\n");
  EXPECT_EQ(exit_code_of(wait_for(c)), 0);
}

TEST(Child, DestroyingARunningChildKillsAndReapsIt) {
  pid_t pid;
  {
    ChildSpec spec;
    spec.argv = {"sleep", "100"};
    spec.env = {"PATH=/usr/bin:/bin"};
    Child c = Child::spawn(spec);
    pid = c.pid();
    EXPECT_TRUE(c.running());
  }
  // Reaped, not merely killed: no zombie is left under this process.
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(Child, DescribesSignals) {
  ChildSpec spec;
  spec.argv = {"sh", "-c", "kill -TERM $$"};
  spec.env = {"PATH=/usr/bin:/bin"};
  Child c = Child::spawn(spec);
  int status = wait_for(c);
  EXPECT_EQ(describe_wait_status(status), "was killed by signal 15 (Terminated)");
  EXPECT_EQ(exit_code_of(status), 143);
}

}  // namespace
}  // namespace ringletrun
