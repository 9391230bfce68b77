// Inside a Slurm allocation ringletrun hands the ranks to srun (here
// tests/tools/fake_srun/srun, which starts the tasks on this machine with the
// variables srun sets), and the ranks meet through Slurm's variables and the
// rendezvous ringletrun names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "launcher_run.h"
#include "slurm.h"

namespace {

using namespace launcher_test;
using ringletrun::first_slurm_host;

RunOptions in_allocation() {
  RunOptions opt;
  opt.env = {{"PATH", std::string(FAKE_SRUN_DIR) + ":" + std::getenv("PATH")},
             {"SLURM_JOB_ID", "4242"},
             {"SLURM_JOB_NODELIST", "localhost"},
             {"SLURM_STEP_ID", ""}};
  opt.timeout = std::chrono::seconds(120);
  return opt;
}

TEST(SlurmHosts, TheFirstHostOfANodeList) {
  EXPECT_EQ(first_slurm_host("node7"), "node7");
  EXPECT_EQ(first_slurm_host("node[07-09,12],gpu3"), "node07");
  EXPECT_EQ(first_slurm_host("gpu3,node[07-09]"), "gpu3");
  EXPECT_EQ(first_slurm_host("rack[2-3]-node[010,011]"), "rack2-node010");
  EXPECT_THROW(first_slurm_host("node[07-09"), std::invalid_argument);
  EXPECT_THROW(first_slurm_host("node]07["), std::invalid_argument);
  EXPECT_THROW(first_slurm_host("node[a-b]"), std::invalid_argument);
  EXPECT_THROW(first_slurm_host(""), std::invalid_argument);
}

TEST(SlurmLaunch, AnAllocationsRanksAreStartedBySrun) {
  RunOptions opt = in_allocation();
  const std::string log = ::testing::TempDir() + "fake_srun_args";
  opt.env.emplace_back("FAKE_SRUN_LOG", log);
  Result r = run_ringletrun(
      {"-np", "2", "sh", "-c",
       "echo \"$SLURM_PROCID ${RINGLET_RANK:-unset} ${RINGLET_RENDEZVOUS%:*} ${#RINGLET_SECRET}\""},
      opt);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // srun's labels, and Slurm's variables rather than ringletrun's.
  EXPECT_NE(r.out.find("0: 0 unset localhost 64\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1: 1 unset localhost 64\n"), std::string::npos) << r.out;
  std::ifstream in(log);
  std::string args((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(args.rfind("--ntasks=2 --kill-on-bad-exit=1 --label sh -c", 0), 0u) << args;
  std::remove(log.c_str());
}

TEST(SlurmLaunch, RanksMeetThroughSlurmsVariables) {
  Result r = run_ringletrun({"-np", "3", COLLECTIVES_TEST_PATH, "--gtest_filter=Allreduce.*"},
                            in_allocation());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0: [  PASSED  ]"), std::string::npos) << r.out;
}

TEST(SlurmLaunch, AFailingTaskFailsTheJob) {
  Result r = run_ringletrun({"-np", "2", "sh", "-c", "exit $((SLURM_PROCID + 3))"},
                            in_allocation());
  EXPECT_EQ(r.exit_code, 3) << r.err;
}

TEST(SlurmLaunch, InsideAStepOrWithHostsRingletrunStartsTheRanksItself) {
  RunOptions step = in_allocation();
  step.env.back() = {"SLURM_STEP_ID", "0"};
  Result r = run_ringletrun({"-np", "2", "sh", "-c", "echo rank $RINGLET_RANK"}, step);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(rank_lines(r.out, 1), (std::vector<std::string>{"rank 1"})) << r.out;

  Result here = run_ringletrun({"-np", "2", "-H", "localhost:2", "sh", "-c", "echo rank $RINGLET_RANK"},
                               in_allocation());
  EXPECT_EQ(here.exit_code, 0) << here.err;
  EXPECT_EQ(rank_lines(here.out, 0), (std::vector<std::string>{"rank 0"})) << here.out;
}

}  // namespace
