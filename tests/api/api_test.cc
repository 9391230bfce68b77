// The C ABI's error paths and a single-process life cycle, in one process.
// The tests share Ringlet's process-global state, so each leaves it shut down.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"
#include "ringlet/ringlet_c.h"

namespace {

std::string last_error() { return ringlet_last_error(); }

// Makes this process a lone rank whatever the environment ctest inherited,
// restoring nothing: every test wants the same clean slate.
class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"RINGLET_RANK", "RINGLET_SIZE", "RINGLET_LOCAL_RANK", "RINGLET_LOCAL_SIZE",
                             "RINGLET_CROSS_RANK", "RINGLET_CROSS_SIZE", "RINGLET_RENDEZVOUS",
                             "RINGLET_SECRET", "RINGLET_JOB_ID", "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                             "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
                             "SLURM_NTASKS", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_FUSION_THRESHOLD"}) {
      unsetenv(name);
    }
  }
  void TearDown() override { ringlet_shutdown(); }
};

TEST_F(ApiTest, CallsBeforeInitSayNotInitialized) {
  ASSERT_EQ(ringlet_is_initialized(), 0);
  float x = 1;
  EXPECT_EQ(ringlet_allreduce(&x, &x, 1, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_NE(last_error().find("allreduce called before init()"), std::string::npos) << last_error();

  size_t counts[1] = {1};
  EXPECT_EQ(ringlet_allgather(&x, &x, counts, RINGLET_FLOAT32), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_NE(last_error().find("allgather called before init()"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_alltoall(&x, nullptr, &x, nullptr, RINGLET_FLOAT32), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_NE(last_error().find("alltoall called before init()"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_broadcast(&x, 1, RINGLET_FLOAT32, 0), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_barrier(), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_NE(last_error().find("barrier called before init()"), std::string::npos) << last_error();

  EXPECT_EQ(ringlet_rank(), -1);
  EXPECT_EQ(ringlet_size(), -1);
  EXPECT_EQ(ringlet_local_rank(), -1);
  EXPECT_EQ(ringlet_cross_size(), -1);
  // Shutting down what never started is harmless.
  EXPECT_EQ(ringlet_shutdown(), RINGLET_OK);
}

TEST_F(ApiTest, CppApiThrowsRingletErrorBeforeInit) {
  float x = 1;
  try {
    ringlet::allreduce(&x, &x, 1, ringlet::DataType::kFloat32);
    FAIL() << "allreduce before init did not throw";
  } catch (const ringlet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce called before init()"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ringlet::rank(), ringlet::Error);
  EXPECT_FALSE(ringlet::is_initialized());
}

TEST_F(ApiTest, BadEnvironmentValueIsAConfigErrorNamingTheVariable) {
  setenv("HOROVOD_FUSION_THRESHOLD", "abc", 1);
  EXPECT_EQ(ringlet_init(), RINGLET_ERR_CONFIG);
  EXPECT_NE(last_error().find("HOROVOD_FUSION_THRESHOLD"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_is_initialized(), 0);
  unsetenv("HOROVOD_FUSION_THRESHOLD");
}

TEST_F(ApiTest, SeveralRanksWithoutRendezvousIsAConfigError) {
  setenv("RINGLET_RANK", "0", 1);
  setenv("RINGLET_SIZE", "2", 1);
  EXPECT_EQ(ringlet_init(), RINGLET_ERR_CONFIG);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(ringlet_is_initialized(), 0);
}

TEST_F(ApiTest, SingleProcessLifeCycle) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  EXPECT_EQ(ringlet_is_initialized(), 1);
  EXPECT_EQ(ringlet_rank(), 0);
  EXPECT_EQ(ringlet_size(), 1);
  EXPECT_EQ(ringlet_local_size(), 1);
  EXPECT_EQ(ringlet_cross_size(), 1);

  EXPECT_EQ(ringlet_init(), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("init called twice"), std::string::npos) << last_error();

  std::vector<float> in{1, 2, 3, 4}, out(4, 0);
  ASSERT_EQ(ringlet_allreduce(in.data(), out.data(), 4, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_OK)
      << last_error();
  EXPECT_EQ(out, in);
  ASSERT_EQ(ringlet_allreduce(in.data(), out.data(), 4, RINGLET_FLOAT32, RINGLET_AVG), RINGLET_OK)
      << last_error();
  EXPECT_EQ(out, in);

  ASSERT_EQ(ringlet_shutdown(), RINGLET_OK);
  EXPECT_EQ(ringlet_is_initialized(), 0);
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << "init after shutdown: " << last_error();
  std::vector<int32_t> ints{5, -6, 7}, got(3, 0);
  ASSERT_EQ(ringlet_allreduce(ints.data(), got.data(), 3, RINGLET_INT32, RINGLET_MAX), RINGLET_OK)
      << last_error();
  EXPECT_EQ(got, ints);
  size_t counts[1] = {3};
  ASSERT_EQ(ringlet_allgather(ints.data(), got.data(), counts, RINGLET_INT32), RINGLET_OK) << last_error();
  EXPECT_EQ(got, ints);
  EXPECT_EQ(ringlet_barrier(), RINGLET_OK) << last_error();
}

TEST_F(ApiTest, InvalidArgumentsAreRefusedWithTheirName) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  float x[2] = {1, 2};
  size_t counts[1] = {2};

  EXPECT_EQ(ringlet_allreduce(x, x, 2, static_cast<ringlet_dtype>(42), RINGLET_SUM),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown dtype 42"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("rank 0"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allreduce(x, x, 2, static_cast<ringlet_dtype>(-1), RINGLET_SUM),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_allreduce(x, x, 2, RINGLET_FLOAT32, static_cast<ringlet_op>(9)),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown reduce op 9"), std::string::npos) << last_error();

  EXPECT_EQ(ringlet_allreduce(nullptr, x, 2, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("send is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allreduce(nullptr, nullptr, 0, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_OK)
      << "count 0 needs no buffers: " << last_error();

  EXPECT_EQ(ringlet_broadcast(x, 2, RINGLET_FLOAT32, 1), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("root 1 is out of range"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_broadcast(x, 2, RINGLET_FLOAT32, -1), RINGLET_ERR_INVALID_ARGUMENT);

  EXPECT_EQ(ringlet_allgather(x, x, nullptr, RINGLET_FLOAT32), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("recv_counts is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_reducescatter(x, x, nullptr, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_alltoall(x, nullptr, x, counts, RINGLET_FLOAT32), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("send_counts is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allgather(x, nullptr, counts, RINGLET_FLOAT32), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("recv is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_reducescatter(x, x, counts, RINGLET_FLOAT32, static_cast<ringlet_op>(77)),
            RINGLET_ERR_INVALID_ARGUMENT);

  // A refused call leaves the communicator usable.
  EXPECT_EQ(ringlet_allreduce(x, x, 2, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_OK) << last_error();
}

TEST_F(ApiTest, CppSpansMustHaveOneCountPerRank) {
  ringlet::init();
  float x[2] = {1, 2};
  std::vector<size_t> two_ranks{1, 1};
  EXPECT_THROW(ringlet::allgather(x, x, two_ranks, ringlet::DataType::kFloat32), ringlet::Error);
  ringlet::shutdown();
  EXPECT_NO_THROW(ringlet::shutdown());
}

// ------------------------------------------------------------ asynchronous

TEST_F(ApiTest, AsyncCallsBeforeInitSayNotInitialized) {
  float x = 1;
  int64_t h = 7;
  EXPECT_EQ(ringlet_allreduce_async("a", &x, &x, 1, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h),
            RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_NE(last_error().find("allreduce_async called before init()"), std::string::npos) << last_error();
  EXPECT_EQ(h, 0);
  int done = 0;
  EXPECT_EQ(ringlet_poll(1, &done), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_wait(1, 0.1), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_synchronize(1), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_join(nullptr), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_start_timeline("t.json", 0), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_stop_timeline(), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_THROW(ringlet::allgather_async("g", {&x, ringlet::DataType::kFloat32, {1}}), ringlet::Error);
}

TEST_F(ApiTest, AsyncAllreduceSingleRank) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  std::vector<float> in{1, 2, 3, 4}, out(4, 0);
  int64_t h = 0;
  ASSERT_EQ(ringlet_allreduce_async("t", in.data(), out.data(), 4, RINGLET_FLOAT32, RINGLET_SUM, 2.0, 0.5, &h),
            RINGLET_OK)
      << last_error();
  EXPECT_GT(h, 0);
  EXPECT_EQ(ringlet_wait(h, 30.0), RINGLET_OK) << last_error();
  int done = 0;
  EXPECT_EQ(ringlet_poll(h, &done), RINGLET_OK) << last_error();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  EXPECT_EQ(out, in);  // x2 then x0.5 on one rank
  // Released: the handle is gone.
  EXPECT_EQ(ringlet_synchronize(h), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("handle"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_poll(h, &done), RINGLET_ERR_INVALID_ARGUMENT);

  // The C++ API: Horovod's default op is Average; outputs of allgather come back.
  std::vector<float> a{2, 4};
  ringlet::Tensor t{a.data(), ringlet::DataType::kFloat32, {2}};
  ringlet::synchronize(ringlet::allreduce_async("cpp", t, t));
  EXPECT_EQ(a, (std::vector<float>{2, 4}));
  ringlet::Result g = ringlet::synchronize(ringlet::allgather_async("gather", t));
  ASSERT_EQ(g.data.size(), 2 * sizeof(float));
  EXPECT_EQ(g.shape, (std::vector<int64_t>{2}));
  std::vector<float> b(2);
  std::memcpy(b.data(), g.data.data(), g.data.size());
  EXPECT_EQ(b, a);
  ringlet::synchronize(ringlet::broadcast_async("bcast", t, 0));
  ringlet::Result rs = ringlet::synchronize(ringlet::reducescatter_async("rs", t, ringlet::ReduceOp::kSum));
  EXPECT_EQ(rs.shape, (std::vector<int64_t>{2}));
  ringlet::Result aa = ringlet::synchronize(ringlet::alltoall_async("a2a", t));
  EXPECT_EQ(aa.received_splits, (std::vector<int64_t>{2}));
  std::vector<float> c(2, 0), d(3, 0), e{1, 1, 1};
  auto hs = ringlet::grouped_allreduce_async({"g1", "g2"}, {t, {e.data(), ringlet::DataType::kFloat32, {3}}},
                                             {{c.data(), ringlet::DataType::kFloat32, {2}},
                                              {d.data(), ringlet::DataType::kFloat32, {3}}});
  ASSERT_EQ(hs.size(), 2u);
  for (int64_t x : hs) ringlet::synchronize(x);
  EXPECT_EQ(c, a);
  EXPECT_EQ(d, e);
  EXPECT_EQ(ringlet::join(), 0);
}

TEST_F(ApiTest, AsyncInvalidArgumentsAreRefused) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  float x[2] = {1, 2};
  int64_t h = 0;
  EXPECT_EQ(ringlet_allreduce_async(nullptr, x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("name is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allreduce_async("x", x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, nullptr),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("handle is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allreduce_async("x", x, x, 2, static_cast<ringlet_dtype>(42), RINGLET_SUM, 1, 1, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown dtype 42"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allreduce_async("x", x, x, 2, RINGLET_FLOAT32, static_cast<ringlet_op>(9), 1, 1, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown reduce op 9"), std::string::npos) << last_error();
  EXPECT_NE(ringlet_allreduce_async("", x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h), RINGLET_OK);
  EXPECT_NE(last_error().find("non-empty name"), std::string::npos) << last_error();
  EXPECT_NE(ringlet_allreduce_async("x", nullptr, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h), RINGLET_OK);
  EXPECT_NE(last_error().find("null"), std::string::npos) << last_error();
  int done = 0;
  EXPECT_EQ(ringlet_poll(12345, &done), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("12345"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_poll(12345, nullptr), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_wait(12345, -1.0), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_start_timeline(nullptr, 0), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("file is null"), std::string::npos) << last_error();

  // C++: mismatched input and output, a group of unequal lists.
  float y[3] = {0, 0, 0};
  EXPECT_THROW(ringlet::allreduce_async("m", {x, ringlet::DataType::kFloat32, {2}},
                                        {y, ringlet::DataType::kFloat32, {3}}),
               ringlet::Error);
  EXPECT_THROW(ringlet::allreduce_async("m", {x, ringlet::DataType::kFloat32, {2}},
                                        {y, ringlet::DataType::kInt32, {2}}),
               ringlet::Error);
  EXPECT_THROW(ringlet::grouped_allreduce_async({"a", "b"}, {{x, ringlet::DataType::kFloat32, {2}}}, {}),
               ringlet::Error);
  EXPECT_THROW(ringlet::broadcast_async("b", {x, ringlet::DataType::kFloat32, {2}}, 3), ringlet::Error);
  // A refused call leaves the runtime usable.
  EXPECT_EQ(ringlet_allreduce(x, x, 2, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_OK) << last_error();
}

TEST_F(ApiTest, AsyncGroupNamingATensorTwiceIsRefused) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  // (A name in flight twice needs another rank to hold the first back: see
  // c_abi_async.c.)
  float x[2] = {1, 2};
  try {
    ringlet::grouped_allreduce_async({"dup", "dup"}, {{x, ringlet::DataType::kFloat32, {2}},
                                                      {x, ringlet::DataType::kFloat32, {2}}},
                                     {{x, ringlet::DataType::kFloat32, {2}}, {x, ringlet::DataType::kFloat32, {2}}});
    FAIL() << "a group naming one tensor twice was accepted";
  } catch (const ringlet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'dup'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
  }
}

TEST_F(ApiTest, WaitOnACompletedAndAReleasedHandle) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  float x[2] = {1, 2};
  const int64_t h = ringlet::allreduce_async("w", {x, ringlet::DataType::kFloat32, {2}},
                                             {x, ringlet::DataType::kFloat32, {2}});
  EXPECT_NO_THROW(ringlet::wait(h, std::chrono::seconds(30)));
  EXPECT_TRUE(ringlet::poll(h));
  EXPECT_NO_THROW(ringlet::synchronize(h));
  EXPECT_THROW(ringlet::wait(h, std::chrono::milliseconds(1)), ringlet::Error);  // released
}

TEST_F(ApiTest, TimelineStartsAndStopsAtRunTime) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  const std::string file = testing::TempDir() + "ringlet_api_timeline.json";
  ASSERT_EQ(ringlet_start_timeline(file.c_str(), 1), RINGLET_OK) << last_error();
  float x[2] = {1, 2};
  int64_t h = 0;
  ASSERT_EQ(ringlet_allreduce_async("traced", x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h), RINGLET_OK);
  ASSERT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  ASSERT_EQ(ringlet_stop_timeline(), RINGLET_OK) << last_error();
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("traced"), std::string::npos) << text.str();
}

TEST(BuildInfo, ListsEveryFeature) {
  std::string info = ringlet::build_info();
  for (const char* key : {"cuda: ", "nccl: ", "ucx: ", "mpi: ", "python: ", "transports: "}) {
    EXPECT_NE(info.find(key), std::string::npos) << key << " missing from\n" << info;
  }
  EXPECT_NE(info.find("transports: shm tcp"), std::string::npos) << info;
}

}  // namespace
