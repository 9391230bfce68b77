// Ranks on other hosts: ringletrun starts them through the remote shell
// (here tests/tools/as_host.sh, which runs them on this machine under another
// host name), hands them their command, directory and environment without a
// command line, names them with their host when they fail, and leaves none
// running when it stops or dies.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "launcher_run.h"

namespace {

using namespace launcher_test;

std::vector<std::string> remote(std::vector<std::string> args) {
  args.insert(args.begin(), {"--rsh", AS_HOST_PATH});
  return args;
}

TEST(RemoteLaunch, RanksOnOtherHostsGetTheirPlaceDirectoryAndJob) {
  const std::string dir = std::filesystem::current_path().string();
  RunOptions opt = with_env("RINGLET_HOSTNAME", "launcherhost");  // names this host alone
  Result r =
      run_ringletrun(remote({"-np", "4", "-H", "localhost:1,nodeA:2,nodeB:1", "sh", "-c",
                             "echo \"$RINGLET_RANK $RINGLET_LOCAL_RANK/$RINGLET_LOCAL_SIZE "
                             "$RINGLET_CROSS_RANK/$RINGLET_CROSS_SIZE $RINGLET_HOSTNAME $(pwd) "
                             "${RINGLET_RENDEZVOUS%:*} ${#RINGLET_SECRET} $RINGLET_JOB_ID\""}),
                     opt);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> got;
  std::set<std::string> jobs;
  std::string rendezvous_host;
  for (int rank = 0; rank < 4; ++rank) {
    auto lines = rank_lines(r.out, rank);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    std::istringstream in(lines[0]);
    std::string id, local, cross, host, cwd, rdv, secret_size, job;
    in >> id >> local >> cross >> host >> cwd >> rdv >> secret_size >> job;
    got.push_back(id + " " + local + " " + cross + " " + host);
    EXPECT_EQ(cwd, dir);
    EXPECT_EQ(secret_size, "64");
    jobs.insert(job);
    rendezvous_host = rdv;
  }
  // horovodrun's numbering: ranks fill the hosts in order; the cross rank
  // counts the hosts that have a rank of the same local rank.
  EXPECT_EQ(got, (std::vector<std::string>{"0 0/1 0/3 launcherhost", "1 0/2 1/3 nodeA",
                                           "2 1/2 0/1 nodeA", "3 0/1 2/3 nodeB"}));
  EXPECT_EQ(jobs.size(), 1u) << "one job id for every host";
  // Rank 0 is here and the others are not: the store must be reachable from them.
  EXPECT_NE(rendezvous_host, "127.0.0.1");
}

// Without --rsh the remote shell is ssh, whose connect gets the start
// timeout as its deadline. An ssh of the test's on PATH records its words and
// runs the command as the host it names.
TEST(RemoteLaunch, DefaultSshConnectsWithinTheStartTimeout) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ringlet-ssh-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string words = (dir / "words").string();
  {
    std::ofstream ssh(dir / "ssh");
    ssh << "#!/bin/sh\n"
        << "echo \"$*\" >> " << words << "\n"
        << "while [ \"${1#-}\" != \"$1\" ]; do shift 2; done\n"
        << "host=$1; shift\n"
        << "exec " << AS_HOST_PATH << " \"$host\" sh -c \"$*\"\n";
  }
  std::filesystem::permissions(dir / "ssh", std::filesystem::perms::owner_all);
  const std::string path = dir.string() + ":" + std::getenv("PATH");
  for (const auto& [flag, expected] : std::vector<std::pair<std::string, std::string>>{
           {"", "ConnectTimeout=30"}, {"12", "ConnectTimeout=12"}}) {
    std::filesystem::remove(words);
    std::vector<std::string> args = {"-np", "2", "-H", "localhost:1,nodeA:1", "true"};
    if (!flag.empty()) args.insert(args.begin(), {"--start-timeout", flag});
    RunOptions opt = with_env("PATH", path);
    opt.env.push_back({"RINGLET_RSH", ""});
    opt.env.push_back({"RINGLET_START_TIMEOUT_SECONDS", ""});
    Result r = run_ringletrun(args, opt);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(words);
    std::string line;
    ASSERT_TRUE(std::getline(in, line)) << "ssh was not run";
    EXPECT_EQ(line.rfind("-o BatchMode=yes -o " + expected + " nodeA ", 0), 0u) << line;
    EXPECT_NE(line.find("--remote-agent"), std::string::npos) << line;
  }
  std::filesystem::remove_all(dir);
}

TEST(RemoteLaunch, TheStoreIsOnRankZerosHostWhenThatHostIsRemote) {
  Result r = run_ringletrun(
      remote({"-np", "2", "-H", "nodeA:1,localhost:1", "sh", "-c", "echo $RINGLET_RENDEZVOUS"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    auto lines = rank_lines(r.out, rank);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(lines[0].rfind("nodeA:", 0), 0u) << lines[0];
  }
}

TEST(RemoteLaunch, TheSecretIsOnNoCommandLine) {
  // Every rank looks through every process's command line for the secret,
  // while the other ranks, their remote shells and their agents run. The
  // secret goes to grep through a file, so that grep's own line is clean.
  const char* scan =
      "umask 077; f=$(mktemp); printf %s \"$RINGLET_SECRET\" > $f; sleep 0.5; "
      "for c in /proc/[0-9]*/cmdline; do grep -qaF -f $f $c 2>/dev/null && echo found $c; done; "
      "rm -f $f; echo scanned";
  Result r = run_ringletrun(remote({"-np", "3", "-H", "localhost:1,nodeA:2", "sh", "-c", scan}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "<stdout>:scanned"), 3u) << r.out;
  EXPECT_EQ(count_of(r.out, "found"), 0u) << r.out;
}

TEST(RemoteLaunch, ARemoteRanksFailureNamesItsHost) {
  Result r =
      run_ringletrun(remote({"-np", "3", "-H", "localhost:1,nodeA:2", "sh", "-c",
                             "if [ \"$RINGLET_RANK\" = 2 ]; then exit 3; fi; exec sleep 100"}),
                     with_env("RINGLET_ABORT_GRACE_SECONDS", "0.2"));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("ringletrun: rank 2 (on nodeA) exited with status 3"), std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(RemoteLaunch, ARemoteRankKilledByASignalIsNamedWithIt) {
  Result r =
      run_ringletrun(remote({"-np", "2", "-H", "nodeA:2", "sh", "-c",
                             "if [ \"$RINGLET_RANK\" = 1 ]; then kill -9 $$; fi; exec sleep 100"}),
                     with_env("RINGLET_ABORT_GRACE_SECONDS", "0.2"));
  EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
  EXPECT_NE(r.err.find("ringletrun: rank 1 (on nodeA) was killed by signal 9"), std::string::npos)
      << r.err;
}

TEST(RemoteLaunch, SigtermReachesRemoteRanks) {
  const char* script =
      "trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done";
  Result r = run_ringletrun(remote({"-np", "2", "-H", "nodeA:2", "sh", "-c", script}),
                            with_steps({{"ready", 2, SIGTERM}}));
  EXPECT_FALSE(r.timed_out);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rank_lines(r.out, i), (std::vector<std::string>{"ready", "got-term"})) << r.out;
  }
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
}

TEST(RemoteLaunch, RanksStopWhenTheLauncherIsGone) {
  // As over ssh: the remote command outlives a killed remote shell, and only
  // the end of its input tells it the launcher is gone.
  RunOptions opt = with_steps({{"pid ", 2, SIGKILL}});
  opt.env = {{"AS_HOST_DETACHED", "1"}};
  Result r = run_ringletrun(
      remote({"-np", "2", "-H", "nodeA:2", "sh", "-c", "echo pid $$; exec sleep 100"}), opt);
  EXPECT_EQ(r.term_signal, SIGKILL);
  auto pids = pids_in(r.out, 2);
  ASSERT_EQ(pids.size(), 2u) << r.out;
  EXPECT_TRUE(all_gone_within(pids, std::chrono::seconds(10)))
      << "the agents stop their ranks once the launcher's pipe closes";
}

TEST(RemoteLaunch, WhatARankLeavesInItsGroupGoesWithIt) {
  Result r = run_ringletrun(
      remote({"-np", "1", "-H", "nodeA:1", "sh", "-c", "sleep 100 & echo pid $!; exit 0"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto pids = pids_in(r.out, 1);
  ASSERT_EQ(pids.size(), 1u) << r.out;
  EXPECT_TRUE(all_gone_within(pids, std::chrono::seconds(5)));
}

TEST(RemoteLaunch, AFailingRemoteShellIsNamed) {
  Result r = run_ringletrun(
      {"--rsh", "false", "-np", "2", "-H", "localhost:1,nodeA:1", "sh", "-c", "exec sleep 100"},
      with_env("RINGLET_ABORT_GRACE_SECONDS", "0.2"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("ringletrun: rank 1 (on nodeA) exited with status 1"), std::string::npos)
      << r.err;
}

TEST(RemoteLaunch, RemoteShellFromTheEnvironment) {
  Result r = run_ringletrun({"-np", "1", "-H", "nodeA:1", "sh", "-c", "echo $RINGLET_HOSTNAME"},
                            with_env("RINGLET_RSH", AS_HOST_PATH));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(rank_lines(r.out, 0), (std::vector<std::string>{"nodeA"})) << r.err;
}

TEST(RemoteLaunch, AMissingInterfaceIsNamedWithTheOthers) {
  Result r = run_ringletrun(
      remote({"--network-interface", "nosuch0", "-np", "2", "-H", "localhost:1,nodeA:1", "true"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("'nosuch0'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lo"), std::string::npos) << "the interfaces this host has: " << r.err;
}

TEST(RemoteLaunch, TheAgentRefusesWhatIsNotALaunchBlock) {
  Result r = run_process(
      {"/bin/sh", "-c", std::string("echo hello | ") + RINGLETRUN_PATH + " --remote-agent"}, {});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("does not start with a launch block"), std::string::npos) << r.err;
}

}  // namespace
