#include "core/bootstrap/launch_info.h"

#include <gtest/gtest.h>

#include <regex>

#include "core/config.h"

namespace ringlet::core {
namespace {

using Env = std::map<std::string, std::string>;

LaunchInfo detect(const Env& env) { return detect_launch(&env); }

std::string error_of(const Env& env) {
  try {
    detect(env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

bool valid_job_id(const std::string& id) {
  return !id.empty() && id.size() <= 32 && std::regex_match(id, std::regex("[A-Za-z0-9_-]+"));
}

TEST(LaunchInfo, SingleProcess) {
  const LaunchInfo a = detect({});
  EXPECT_EQ(a.launcher, "single");
  EXPECT_EQ(a.rank, 0);
  EXPECT_EQ(a.size, 1);
  EXPECT_FALSE(a.local_rank);
  EXPECT_TRUE(valid_job_id(a.job_id)) << a.job_id;
  // Two single processes must not share segment names.
  EXPECT_NE(a.job_id, detect({}).job_id);
}

TEST(LaunchInfo, Ringletrun) {
  const LaunchInfo i = detect({{"RINGLET_RANK", "3"},
                               {"RINGLET_SIZE", "8"},
                               {"RINGLET_LOCAL_RANK", "1"},
                               {"RINGLET_LOCAL_SIZE", "2"},
                               {"RINGLET_RENDEZVOUS", "node1:29500"},
                               {"RINGLET_SECRET", "00ff"},
                               {"RINGLET_JOB_ID", "job/42 x"},
                               // Lower precedence launchers are ignored.
                               {"OMPI_COMM_WORLD_RANK", "0"},
                               {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_EQ(i.launcher, "ringletrun");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.size, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.local_size, 2);
  EXPECT_EQ(i.rendezvous, "node1:29500");
  EXPECT_EQ(i.secret, "00ff");
  EXPECT_EQ(i.job_id, "job_42_x");
}

TEST(LaunchInfo, HorovodNames) {
  const LaunchInfo i = detect({{"HOROVOD_RANK", "1"},
                               {"HOROVOD_SIZE", "2"},
                               {"HOROVOD_LOCAL_RANK", "1"},
                               {"HOROVOD_LOCAL_SIZE", "2"},
                               {"SLURM_PROCID", "0"},
                               {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(i.launcher, "horovod");
  EXPECT_EQ(i.rank, 1);
  EXPECT_EQ(i.local_size, 2);
  EXPECT_TRUE(valid_job_id(i.job_id)) << i.job_id;
}

TEST(LaunchInfo, OpenMpiWinsOverSlurm) {
  const LaunchInfo i = detect({{"OMPI_COMM_WORLD_RANK", "5"},
                               {"OMPI_COMM_WORLD_SIZE", "6"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                               {"OMPI_MCA_ess_base_jobid", "123456789"},
                               {"SLURM_PROCID", "0"},
                               {"SLURM_NTASKS", "1"},
                               {"RINGLET_RENDEZVOUS", "h:1"},
                               {"RINGLET_SECRET", "s3cret"}});
  EXPECT_EQ(i.launcher, "mpirun");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.size, 6);
  EXPECT_EQ(i.local_rank, 2);
  EXPECT_EQ(i.local_size, 3);
  EXPECT_EQ(i.rendezvous, "h:1");
  EXPECT_EQ(i.secret, "s3cret");
}

// Job ids name /dev/shm segments: one derived from a launcher's job number
// (or a process id) could be predicted and squatted on by another user.
TEST(LaunchInfo, JobIdsWithoutRingletJobIdAreRandom) {
  const Env ompi = {{"OMPI_COMM_WORLD_RANK", "0"},
                    {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"OMPI_MCA_ess_base_jobid", "7700123499"}};
  const Env slurm = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "9915551234"}};
  for (const Env& env : {ompi, slurm, Env{}}) {
    const std::string a = detect(env).job_id;
    const std::string b = detect(env).job_id;
    EXPECT_TRUE(valid_job_id(a)) << a;
    EXPECT_NE(a, b) << "two draws gave the same id";
    // Ten-digit job numbers: a random id holds one by chance about once in 10^11 draws.
    EXPECT_EQ(a.find("7700123499"), std::string::npos) << a;
    EXPECT_EQ(a.find("9915551234"), std::string::npos) << a;
    // 64 random bits, as hex, behind the launcher's name.
    EXPECT_TRUE(std::regex_match(a, std::regex("[a-z]+-[0-9a-f]{16}"))) << a;
  }
}

TEST(LaunchInfo, RendezvousWithoutSecretIsRefusedNamingBoth) {
  const std::string msg = error_of({{"RINGLET_RANK", "0"},
                                    {"RINGLET_SIZE", "2"},
                                    {"RINGLET_RENDEZVOUS", "127.0.0.1:29500"}});
  EXPECT_NE(msg.find("RINGLET_RENDEZVOUS"), std::string::npos) << msg;
  EXPECT_NE(msg.find("RINGLET_SECRET"), std::string::npos) << msg;
  // Under any launcher: the variables are Ringlet's own.
  EXPECT_NE(error_of({{"OMPI_COMM_WORLD_RANK", "0"},
                      {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"RINGLET_RENDEZVOUS", "h:1"},
                      {"RINGLET_SECRET", ""}})
                .find("RINGLET_SECRET"),
            std::string::npos);
}

TEST(LaunchInfo, Slurm) {
  const LaunchInfo i = detect({{"SLURM_PROCID", "7"},
                               {"SLURM_NTASKS", "16"},
                               {"SLURM_LOCALID", "3"},
                               {"SLURM_JOB_ID", "9915551234"},
                               {"SLURM_STEP_ID", "2"}});
  EXPECT_EQ(i.launcher, "slurm");
  EXPECT_EQ(i.rank, 7);
  EXPECT_EQ(i.size, 16);
  EXPECT_EQ(i.local_rank, 3);
  EXPECT_FALSE(i.local_size);
  EXPECT_TRUE(valid_job_id(i.job_id)) << i.job_id;
}

TEST(LaunchInfo, LongJobIdsStayShortAndDistinct) {
  const std::string base(40, 'a');
  const auto a = detect({{"RINGLET_JOB_ID", base + "1"}}).job_id;
  const auto b = detect({{"RINGLET_JOB_ID", base + "2"}}).job_id;
  EXPECT_TRUE(valid_job_id(a)) << a;
  EXPECT_TRUE(valid_job_id(b)) << b;
  EXPECT_NE(a, b);
}

struct BadLaunch {
  Env env;
  std::string must_name;
};

class LaunchInfoBad : public ::testing::TestWithParam<BadLaunch> {};

TEST_P(LaunchInfoBad, NamesTheVariable) {
  const std::string msg = error_of(GetParam().env);
  ASSERT_FALSE(msg.empty());
  EXPECT_NE(msg.find(GetParam().must_name), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LaunchInfoBad,
    ::testing::Values(
        BadLaunch{{{"RINGLET_RANK", "1x"}, {"RINGLET_SIZE", "2"}}, "RINGLET_RANK='1x'"},
        BadLaunch{{{"RINGLET_RANK", "2"}, {"RINGLET_SIZE", "2"}}, "RINGLET_RANK=2"},
        BadLaunch{{{"RINGLET_RANK", "-1"}, {"RINGLET_SIZE", "2"}}, "RINGLET_RANK"},
        BadLaunch{{{"RINGLET_RANK", "0"}, {"RINGLET_SIZE", "0"}}, "RINGLET_SIZE"},
        BadLaunch{{{"RINGLET_RANK", "0"}}, "RINGLET_SIZE"},
        BadLaunch{{{"HOROVOD_SIZE", "4"}}, "HOROVOD_RANK"},
        BadLaunch{{{"RINGLET_RANK", "0"},
                   {"RINGLET_SIZE", "4"},
                   {"RINGLET_LOCAL_RANK", "2"},
                   {"RINGLET_LOCAL_SIZE", "2"}},
                  "RINGLET_LOCAL_RANK=2"},
        BadLaunch{{{"RINGLET_RANK", "0"}, {"RINGLET_SIZE", "4"}, {"RINGLET_LOCAL_SIZE", "5"}},
                  "RINGLET_LOCAL_SIZE=5"},
        BadLaunch{{{"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "99999999999999999999"}},
                  "OMPI_COMM_WORLD_SIZE"},
        BadLaunch{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "abc"}},
                  "SLURM_LOCALID='abc'"}));

}  // namespace
}  // namespace ringlet::core
