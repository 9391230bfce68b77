// Runs the built ringletrun on small shell jobs and checks what a user of
// horovodrun would rely on: the ranks' environment, prefixed and unbroken
// output, exit codes, signal forwarding, stopping the survivors of a failure,
// and that nothing is left behind (processes, /dev/shm segments).
//
// Every run has a deadline: a hung launcher fails its test instead of the suite.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "launcher_run.h"

namespace {

using namespace launcher_test;

const char* kPrintEnv =
    "echo \"$RINGLET_RANK $RINGLET_SIZE $RINGLET_LOCAL_RANK $RINGLET_LOCAL_SIZE "
    "$RINGLET_CROSS_RANK $RINGLET_CROSS_SIZE|$HOROVOD_RANK $HOROVOD_SIZE $HOROVOD_LOCAL_RANK "
    "$HOROVOD_LOCAL_SIZE $HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE|$RINGLET_RENDEZVOUS|"
    "$RINGLET_SECRET|$RINGLET_JOB_ID\"";

struct RankEnv {
  std::string ids, horovod_ids, rendezvous, secret, job_id;
};

std::map<int, RankEnv> parse_env_lines(const std::string& out, int np) {
  std::map<int, RankEnv> m;
  for (int r = 0; r < np; ++r) {
    auto lines = rank_lines(out, r);
    if (lines.size() != 1) continue;
    std::vector<std::string> f;
    std::stringstream ss(lines[0]);
    for (std::string x; std::getline(ss, x, '|');) f.push_back(x);
    if (f.size() == 5) m[r] = RankEnv{f[0], f[1], f[2], f[3], f[4]};
  }
  return m;
}

TEST(Launcher, OneRankGetsItsEnvironment) {
  Result r = run_ringletrun({"-np", "1", "sh", "-c", kPrintEnv});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = parse_env_lines(r.out, 1);
  ASSERT_EQ(env.size(), 1u) << r.out;
  EXPECT_EQ(env[0].ids, "0 1 0 1 0 1");
  EXPECT_EQ(env[0].horovod_ids, "0 1 0 1 0 1");
}

TEST(Launcher, ThreeRanksShareOneJobAndEachKnowsItsRank) {
  Result r = run_ringletrun({"-np", "3", "sh", "-c", kPrintEnv});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = parse_env_lines(r.out, 3);
  ASSERT_EQ(env.size(), 3u) << r.out;
  for (int i = 0; i < 3; ++i) {
    std::string n = std::to_string(i);
    EXPECT_EQ(env[i].ids, n + " 3 " + n + " 3 0 1");
    EXPECT_EQ(env[i].horovod_ids, n + " 3 " + n + " 3 0 1");
    EXPECT_EQ(env[i].rendezvous, env[0].rendezvous);
    EXPECT_EQ(env[i].secret, env[0].secret);
    EXPECT_EQ(env[i].job_id, env[0].job_id);
  }
  EXPECT_TRUE(std::regex_match(env[0].rendezvous, std::regex(R"(127\.0\.0\.1:[1-9][0-9]*)")))
      << env[0].rendezvous;
  EXPECT_TRUE(std::regex_match(env[0].secret, std::regex("[0-9a-f]{64}"))) << env[0].secret;
  EXPECT_TRUE(std::regex_match(env[0].job_id, std::regex("[a-z0-9]{6,16}"))) << env[0].job_id;

  Result again = run_ringletrun({"-np", "1", "sh", "-c", kPrintEnv});
  auto env2 = parse_env_lines(again.out, 1);
  ASSERT_EQ(env2.size(), 1u);
  EXPECT_NE(env2[0].secret, env[0].secret) << "the secret must be fresh per job";
  EXPECT_NE(env2[0].job_id, env[0].job_id);
}

TEST(Launcher, FlagsBecomeTheRanksSettings) {
  Result r = run_ringletrun({"--timeline-filename", "/tmp/tl.json", "--network-interface", "lo",
                             "--start-timeout", "7", "-np", "2", "sh", "-c",
                             "echo \"$HOROVOD_TIMELINE $RINGLET_NETWORK_INTERFACE "
                             "$RINGLET_START_TIMEOUT_SECONDS\""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rank_lines(r.out, i), std::vector<std::string>{"/tmp/tl.json lo 7"}) << r.out;
  }
}

// As horovodrun: NCCL's sockets between hosts take the named interface too,
// but a NCCL_SOCKET_IFNAME of the user's stays.
TEST(Launcher, NetworkInterfaceIsNcclsTooUnlessTheUserNamedOne) {
  ::unsetenv("NCCL_SOCKET_IFNAME");
  const std::vector<std::string> job = {"-np", "2", "sh", "-c",
                                        "echo \"[$RINGLET_NETWORK_INTERFACE] "
                                        "[$NCCL_SOCKET_IFNAME]\""};
  std::vector<std::string> named = {"--network-interface", "lo"};
  named.insert(named.end(), job.begin(), job.end());
  Result r = run_ringletrun(named);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rank_lines(r.out, i), std::vector<std::string>{"[lo] [lo]"}) << r.out;
  }
  Result users = run_ringletrun(named, with_env("NCCL_SOCKET_IFNAME", "=eth9"));
  ASSERT_EQ(users.exit_code, 0) << users.err;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rank_lines(users.out, i), std::vector<std::string>{"[lo] [=eth9]"}) << users.out;
  }
  // Without the flag, ringletrun sets neither.
  Result none = run_ringletrun(job);
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(rank_lines(none.out, 0), std::vector<std::string>{"[] []"}) << none.out;
}

TEST(Launcher, HorovodrunTuningFlagsBecomeTheirVariables) {
  Result r = run_ringletrun(
      {"--fusion-threshold-mb", "32", "--cycle-time-ms", "2.5", "--cache-capacity", "0",
       "--timeline-mark-cycles", "--log-level", "debug", "--no-hierarchical-allreduce", "-np",
       "1", "sh", "-c",
       "echo \"$HOROVOD_FUSION_THRESHOLD $HOROVOD_CYCLE_TIME $HOROVOD_CACHE_CAPACITY "
       "$HOROVOD_TIMELINE_MARK_CYCLES $HOROVOD_LOG_LEVEL $HOROVOD_HIERARCHICAL_ALLREDUCE\""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(rank_lines(r.out, 0), std::vector<std::string>{"33554432 2.5 0 1 debug 0"}) << r.out;
  // Without the flags, what the environment says reaches the ranks untouched.
  Result untouched = run_ringletrun(
      {"-np", "1", "sh", "-c", "echo \"$HOROVOD_HIERARCHICAL_ALLREDUCE $HOROVOD_CACHE_CAPACITY\""},
      with_env("HOROVOD_HIERARCHICAL_ALLREDUCE", "1"));
  EXPECT_EQ(rank_lines(untouched.out, 0), std::vector<std::string>{"1 "}) << untouched.err;
  Result on = run_ringletrun({"--hierarchical-allreduce", "--hierarchical-allgather", "-np", "1",
                              "sh", "-c",
                              "echo \"$HOROVOD_HIERARCHICAL_ALLREDUCE "
                              "$HOROVOD_HIERARCHICAL_ALLGATHER\""});
  EXPECT_EQ(rank_lines(on.out, 0), std::vector<std::string>{"1 1"}) << on.err;
  Result off = run_ringletrun({"--no-hierarchical-allgather", "-np", "1", "sh", "-c",
                               "echo \"$HOROVOD_HIERARCHICAL_ALLGATHER\""});
  EXPECT_EQ(rank_lines(off.out, 0), std::vector<std::string>{"0"}) << off.err;
  Result bad = run_ringletrun({"--log-level", "LOUD", "-np", "1", "true"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--log-level"), std::string::npos) << bad.err;
}

TEST(Launcher, StartTimeoutDefaultsToThirtyUnlessTheEnvironmentSaysOtherwise) {
  const char* script = "echo \"$RINGLET_START_TIMEOUT_SECONDS\"";
  Result r = run_ringletrun({"-np", "1", "sh", "-c", script});
  EXPECT_EQ(rank_lines(r.out, 0), std::vector<std::string>{"30"}) << r.err;
  Result env = run_ringletrun({"-np", "1", "sh", "-c", script},
                              with_env("RINGLET_START_TIMEOUT_SECONDS", "45"));
  EXPECT_EQ(rank_lines(env.out, 0), std::vector<std::string>{"45"}) << env.err;
  Result flag = run_ringletrun({"--start-timeout", "9", "-np", "1", "sh", "-c", script},
                               with_env("RINGLET_START_TIMEOUT_SECONDS", "45"));
  EXPECT_EQ(rank_lines(flag.out, 0), std::vector<std::string>{"9"}) << flag.err;
}

TEST(Launcher, TheCommandsOwnFlagsPassThroughUntouched) {
  Result r = run_ringletrun({"-np", "1", "sh", "-c", "echo \"$*\"", "sh", "--verbose", "-np", "5",
                             "--check-build", "-H", "x"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(rank_lines(r.out, 0), std::vector<std::string>{"--verbose -np 5 --check-build -H x"});
  Result dashdash = run_ringletrun({"-np", "1", "--", "echo", "-n", "x"});
  EXPECT_EQ(dashdash.exit_code, 0) << dashdash.err;
  EXPECT_EQ(dashdash.out, "[0]<stdout>:x\n");
}

TEST(Launcher, PrefixesEveryLineAndNeverBreaksOne) {
  // Four ranks write long lines as fast as they can into the same launcher.
  const int np = 4, lines = 2000;
  std::string payload(150, 'x');
  std::string script = "i=0; while [ $i -lt " + std::to_string(lines) +
                       " ]; do echo \"r$RINGLET_RANK l$i " + payload +
                       "\"; echo \"e$RINGLET_RANK l$i\" >&2; i=$((i+1)); done";
  Result r = run_ringletrun({"-np", std::to_string(np), "sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::regex out_line(R"(\[(\d)\]<stdout>:r(\d) l(\d+) x{150})");
  std::vector<int> next(np, 0);
  for (const auto& l : lines_of(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, out_line)) << "broken line: " << l.substr(0, 200);
    int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[2]), rank);
    ASSERT_EQ(std::stoi(m[3]), next[rank]++) << "lines of one rank stay in order";
  }
  for (int i = 0; i < np; ++i) {
    EXPECT_EQ(next[i], lines);
    EXPECT_EQ(rank_lines(r.err, i, "stderr").size(), static_cast<std::size_t>(lines));
  }
}

TEST(Launcher, KeepsLinesLongerThanAPipeWholeAcrossRanks) {
  // 20000 bytes per line: each arrives in several reads, interleaved with the
  // other ranks' pieces, and must still come out as one line.
  const std::string script =
      "line=$(head -c 20000 /dev/zero | tr '\\0' \"$RINGLET_RANK\"); "
      "for i in 1 2 3 4 5 6 7 8; do echo \"$line\"; done";
  Result r = run_ringletrun({"-np", "3", "sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 3; ++i) {
    auto lines = rank_lines(r.out, i);
    ASSERT_EQ(lines.size(), 8u);
    for (const auto& l : lines) EXPECT_EQ(l, std::string(20000, static_cast<char>('0' + i)));
  }
  EXPECT_EQ(lines_of(r.out).size(), 24u);
}

TEST(Launcher, JoinsPartialWritesAndEndsAnUnfinishedLastLine) {
  Result r = run_ringletrun(
      {"-np", "2", "sh", "-c", "printf 'ab'; sleep 0.2; printf 'c\\nta'; sleep 0.1; printf il"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rank_lines(r.out, i), (std::vector<std::string>{"abc", "tail"})) << r.out;
  }
  EXPECT_EQ(r.out.back(), '\n');
}

TEST(Launcher, AFailingRankIsNamedAndTheOthersAreStopped) {
  Result r = run_ringletrun({"-np", "3", "sh", "-c",
                             "echo pid $$; if [ \"$RINGLET_RANK\" = 1 ]; then sleep 0.3; "
                             "echo bye >&2; exit 3; fi; exec sleep 100"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(count_of(r.err, "ringletrun: rank 1 exited with status 3\n"), 1u) << r.err;
  EXPECT_EQ(count_of(r.err, "ringletrun: rank "), 1u)
      << "only the first failure is named: " << r.err;
  // The rank's last words come before the launcher's verdict.
  EXPECT_LT(r.err.find("[1]<stderr>:bye"), r.err.find("ringletrun: rank 1"));
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_GT(r.seconds, 2.5) << "the others get RINGLET_ABORT_GRACE_SECONDS (3 s) first";
  auto pids = pids_in(r.out, 3);
  EXPECT_EQ(pids.size(), 3u);
  EXPECT_TRUE(all_gone_within(pids, std::chrono::seconds(2))) << "no rank may outlive ringletrun";
}

TEST(Launcher, TheAbortGraceCanBeShortened) {
  Result r = run_ringletrun(
      {"-np", "2", "sh", "-c", "if [ \"$RINGLET_RANK\" = 0 ]; then exit 5; fi; exec sleep 100"},
      with_env("RINGLET_ABORT_GRACE_SECONDS", "0.2"));
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_LT(r.seconds, 2.5);
  Result bad =
      run_ringletrun({"-np", "1", "true"}, with_env("RINGLET_ABORT_GRACE_SECONDS", "soon"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("RINGLET_ABORT_GRACE_SECONDS"), std::string::npos) << bad.err;
}

TEST(Launcher, ARankKilledByASignalIsNamedWithIt) {
  Result r = run_ringletrun(
      {"-np", "2", "sh", "-c", "if [ \"$RINGLET_RANK\" = 1 ]; then kill -9 $$; fi; exec sleep 100"},
      with_env("RINGLET_ABORT_GRACE_SECONDS", "0.5"));
  EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
  EXPECT_NE(r.err.find("ringletrun: rank 1 was killed by signal 9 (Killed)"), std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(Launcher, AllRanksSucceedingMeansSuccess) {
  Result r = run_ringletrun({"-np", "3", "sh", "-c", "exit 0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(Launcher, SigtermReachesEveryRank) {
  const char* script =
      "trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done";
  Result r = run_ringletrun({"-np", "3", "sh", "-c", script}, with_steps({{"ready", 3, SIGTERM}}));
  EXPECT_FALSE(r.timed_out);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rank_lines(r.out, i), (std::vector<std::string>{"ready", "got-term"})) << r.out;
  }
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(Launcher, SigintIsForwardedAndASecondOneKills) {
  // The ranks note SIGINT and carry on; the second SIGINT must end them anyway.
  const char* script =
      "echo pid $$; trap 'echo got-int' INT; echo ready; while :; do sleep 0.05; done";
  Result r = run_ringletrun({"-np", "2", "sh", "-c", script},
                            with_steps({{"ready", 2, SIGINT}, {"got-int", 2, SIGINT}}));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.err;
  EXPECT_LT(r.seconds, 5.0) << "the second SIGINT kills at once";
  EXPECT_TRUE(all_gone_within(pids_in(r.out, 2), std::chrono::seconds(2)));
}

TEST(Launcher, ASignalIgnoredOnEntryStaysIgnored) {
  // nohup ringletrun ...: a hang-up must neither stop the job nor reach the ranks.
  RunOptions opt = with_steps({{"ready", 2, SIGHUP}});
  opt.ignored_signals = {SIGHUP};
  Result r = run_ringletrun({"-np", "2", "sh", "-c", "echo ready; sleep 0.5; echo done"}, opt);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rank_lines(r.out, i), (std::vector<std::string>{"ready", "done"})) << r.out;
  }
}

TEST(Launcher, ExitCodesSurviveAnIgnoredSigchld) {
  RunOptions opt;
  opt.ignored_signals = {SIGCHLD};
  Result r = run_ringletrun(
      {"-np", "2", "sh", "-c", "[ $RINGLET_RANK = 0 ] || sleep 0.5; exit $((RINGLET_RANK + 6))"},
      opt);
  EXPECT_EQ(r.exit_code, 6) << r.err;
  EXPECT_NE(r.err.find("ringletrun: rank 0 exited with status 6"), std::string::npos) << r.err;
}

TEST(Launcher, KeepsRunningWhenNobodyReadsItsOutput) {
  // `ringletrun ... | head -1`: once the reader is gone, writes to stdout fail,
  // and the job must still run to its end with its exit code intact.
  std::string script = std::string("( '") + RINGLETRUN_PATH +
                       "' -np 2 sh -c 'sleep 0.3; echo a; echo b; echo done >&2; exit 4'; "
                       "echo rc=$? >&2 ) | true";
  Result r = run_process({"/bin/sh", "-c", script}, {});
  EXPECT_EQ(count_of(r.err, "<stderr>:done"), 2u) << r.err;
  EXPECT_NE(r.err.find("rc=4"), std::string::npos) << r.err;
}

TEST(Launcher, VerboseSaysWhatItDoes) {
  Result r = run_ringletrun({"--verbose", "-np", "2", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("ringletrun: job [0-9a-f]{12}, 2 ranks, "
                                                  "rendezvous 127\\.0\\.0\\.1:[0-9]+")))
      << r.err;
  EXPECT_NE(r.err.find("ringletrun: rank 1 exited with status 0"), std::string::npos) << r.err;
}

TEST(Launcher, RanksDieWithAKilledLauncher) {
  Result r = run_ringletrun({"-np", "2", "sh", "-c", "echo pid $$; exec sleep 100"},
                            with_steps({{"pid ", 2, SIGKILL}}));
  EXPECT_EQ(r.term_signal, SIGKILL);
  auto pids = pids_in(r.out, 2);
  ASSERT_EQ(pids.size(), 2u) << r.out;
  EXPECT_TRUE(all_gone_within(pids, std::chrono::seconds(5)));
}

TEST(Launcher, RemovesThisJobsLeftoverSharedMemory) {
  Result r = run_ringletrun({"-np", "2", "sh", "-c",
                             "f=/dev/shm/ringlet-$RINGLET_JOB_ID-$RINGLET_RANK; : > $f; "
                             "test -e $f && echo made $f"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = rank_lines(r.out, 0);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  std::string path = lines[0].substr(std::string("made ").size());
  EXPECT_EQ(path.rfind("/dev/shm/ringlet-", 0), 0u);
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << path << " was left behind";
}

TEST(Launcher, UsageErrorsExitWithTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  std::vector<Case> cases = {
      {{"sh", "-c", "true"}, "-np N is required"},
      {{"-np", "0", "true"}, "at least 1"},
      {{"-np", "2"}, "no command"},
      {{"-np", "2", "no-such-command-ringlet"}, "command not found"},
      {{"-np", "2", "--bogus", "true"}, "unknown option --bogus"},
      {{"-np", "x", "true"}, "np"},
      {{"-np", "2", "--start-timeout", "-3", "true"}, "start-timeout"},
      {{"-np", "2", "-H", "localhost:1", "true"}, "slots"},
      {{"-np", "2", "-H", "localhost:2", "--hostfile", "/dev/null", "true"}, "excludes"},
  };
  for (const auto& c : cases) {
    Result r = run_ringletrun(c.args);
    std::string shown;
    for (const auto& a : c.args) shown += a + " ";
    EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << shown << "\n" << r.err;
    EXPECT_EQ(r.out, "") << shown;
  }
}

TEST(Launcher, ThisHostWithEnoughSlotsIsAccepted) {
  Result r = run_ringletrun({"-np", "3", "-H", "localhost:2,127.0.0.1:1", "sh", "-c", "echo ok"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "<stdout>:ok"), 3u);

  std::string hostfile = ::testing::TempDir() + "ringletrun_localhosts";
  std::ofstream(hostfile) << "# local only\nlocalhost slots=4\n";
  Result f = run_ringletrun({"-np", "4", "--hostfile", hostfile, "true"});
  EXPECT_EQ(f.exit_code, 0) << f.err;
  std::remove(hostfile.c_str());
}

TEST(Launcher, CheckBuildListsWhatWasBuiltIn) {
  Result r = run_ringletrun({"--check-build"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Ringlet v", 0), 0u) << r.out;
  for (const char* want : {"Available Frameworks:", "] TensorFlow", "] PyTorch", "] Keras",
                           "Available Controllers:", "    [X] Ringlet store (TCP)",
                           "Available Tensor Operations:", "    [X] Ringlet ring (CPU)", "NCCL",
                           "Available Transports:", "[X] shm  [X] tcp  ",
                           "Available Launchers:", "    [X] ringletrun (this host)",
                           "] ringletrun -H over ssh", "] srun (Slurm", "] mpirun (--mpi"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  // A build with CUDA says what HOROVOD_GPU_OPERATIONS could use here.
  if (r.out.find("Ringlet ring (CUDA") != std::string::npos &&
      r.out.find("[ ] Ringlet ring (CUDA)\n") == std::string::npos) {
    for (const char* want : {"\nGPU:\n", "    CUDA kernels for architectures ", "    this machine: "}) {
      EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
    }
  }
}

TEST(Launcher, CheckBuildMarksOnlyWhatThisBuildCanRun) {
  // MPI's tensor operations are marked exactly where MPI was built in (the
  // controllers' [X] MPI says so); the GPU operations only where CUDA and
  // NCCL are both built in; the ucx transport where UCX was.
  Result r = run_ringletrun({"--check-build"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t ops = r.out.find("Available Tensor Operations:");
  const size_t transports = r.out.find("Available Transports:");
  ASSERT_NE(ops, std::string::npos) << r.out;
  ASSERT_NE(transports, std::string::npos) << r.out;
  const std::string op_section = r.out.substr(ops, transports - ops);
  const std::string transport_section = r.out.substr(transports);
  const bool mpi = r.out.substr(0, ops).find("[X] MPI") != std::string::npos;
  EXPECT_EQ(op_section.find("[X] MPI") != std::string::npos, mpi) << r.out;
  if (mpi) {
    EXPECT_NE(op_section.find("[X] MPI (host collectives, HOROVOD_CPU_OPERATIONS=MPI under mpirun)"),
              std::string::npos)
        << r.out;
  }
  // NCCL and the ring over CUDA IPC are marked together, only where the
  // build has CUDA too, and then say what they serve.
  const bool cuda = r.out.find("\nGPU:\n") != std::string::npos;
  const bool nccl = op_section.find("[X] NCCL") != std::string::npos;
  EXPECT_EQ(op_section.find("[X] Ringlet ring (CUDA") != std::string::npos, nccl) << r.out;
  if (nccl) {
    EXPECT_TRUE(cuda) << r.out;
    // As core/gpu serves them (device_refusal): RING every collective, NCCL
    // all but the reductions of the 16-bit integers it has no type for.
    EXPECT_NE(op_section.find(
                  "[X] NCCL (every collective of device tensors but int16/uint16 reductions)"),
              std::string::npos)
        << r.out;
    EXPECT_NE(op_section.find("[X] Ringlet ring (CUDA IPC within a host, staged through host "
                              "memory between hosts: every collective of device tensors)"),
              std::string::npos)
        << r.out;
  }
  EXPECT_NE(op_section.find("[X] Ringlet ring (CPU)"), std::string::npos) << r.out;
  // The UCX carrier is built wherever UCX was found.
  EXPECT_EQ(transport_section.find("[X] ucx") != std::string::npos, RINGLET_TEST_UCX != 0) << r.out;
  EXPECT_EQ(transport_section.find("[ ] ucx") != std::string::npos, RINGLET_TEST_UCX == 0) << r.out;
}

bool mpirun_present() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

TEST(Launcher, MpiModeWithoutMpirunSaysSo) {
  if (mpirun_present()) GTEST_SKIP() << "mpirun is installed here, so --mpi cannot lack it";
  Result r = run_ringletrun({"--mpi", "-np", "2", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mpirun"), std::string::npos) << r.err;
}

TEST(Launcher, MpiModeHandsTheJobToMpirun) {
  if (!mpirun_present()) GTEST_SKIP() << "mpirun is not installed: --mpi has nothing to hand the job to";
  // mpirun is here, so the job must run: a launch that fails is a failure of
  // --mpi, not a reason to skip.
  RunOptions slow;
  slow.timeout = std::chrono::seconds(60);
  Result r = run_ringletrun({"--mpi", "-np", "2", "--timeline-filename", "/tmp/tl", "sh", "-c",
                             "echo \"mpi $OMPI_COMM_WORLD_RANK $HOROVOD_TIMELINE\""},
                            slow);
  ASSERT_EQ(r.exit_code, 0) << "mpirun could not run the job\nstdout:\n" << r.out << "\nstderr:\n"
                            << r.err;
  EXPECT_EQ(count_of(r.out, "mpi 0 /tmp/tl"), 1u) << r.out;
  EXPECT_EQ(count_of(r.out, "mpi 1 /tmp/tl"), 1u) << r.out;
}

// Ranks on other hosts get only the variables mpirun's -x names: the job's
// settings and NCCL's interface are named, and MPI's TCP takes the interface.
TEST(Launcher, MpiModeNamesTheJobsVariablesForOtherHosts) {
  if (!mpirun_present()) GTEST_SKIP() << "mpirun is not installed: --mpi has nothing to hand the job to";
  RunOptions slow;
  slow.timeout = std::chrono::seconds(60);
  Result r = run_ringletrun({"--mpi", "--verbose", "-np", "2", "--network-interface", "lo",
                             "--timeline-filename", "/tmp/tl", "sh", "-c",
                             "echo \"nic $NCCL_SOCKET_IFNAME\""},
                            slow);
  ASSERT_EQ(r.exit_code, 0) << "mpirun could not run the job\nstdout:\n" << r.out << "\nstderr:\n"
                            << r.err;
  EXPECT_EQ(count_of(r.out, "nic lo"), 2u) << r.out;
  for (const char* named : {" -x HOROVOD_TIMELINE ", " -x NCCL_SOCKET_IFNAME ",
                            " -x RINGLET_NETWORK_INTERFACE ", " --mca btl_tcp_if_include lo "}) {
    EXPECT_NE(r.err.find(named), std::string::npos) << named << " missing from: " << r.err;
  }
}

}  // namespace
