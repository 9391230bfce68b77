// The C ABI's error paths and a single-process life cycle, in one process.
// The tests share Ringlet's process-global state, so each leaves it shut down.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/store.h"
#include "ringlet/ringlet.h"
#include "ringlet/ringlet_c.h"

namespace {

std::string last_error() { return ringlet_last_error(); }

// Makes this process a lone rank whatever the environment ctest inherited,
// restoring nothing: every test wants the same clean slate.
class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"RINGLET_RANK",
                             "RINGLET_SIZE",
                             "RINGLET_LOCAL_RANK",
                             "RINGLET_LOCAL_SIZE",
                             "RINGLET_CROSS_RANK",
                             "RINGLET_CROSS_SIZE",
                             "RINGLET_RENDEZVOUS",
                             "RINGLET_SECRET",
                             "RINGLET_JOB_ID",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK",
                             "OMPI_COMM_WORLD_LOCAL_SIZE",
                             "PMI_RANK",
                             "PMI_SIZE",
                             "SLURM_PROCID",
                             "SLURM_NTASKS",
                             "HOROVOD_RANK",
                             "HOROVOD_SIZE",
                             "HOROVOD_FUSION_THRESHOLD",
                             "RINGLET_TRANSPORT",
                             "HOROVOD_CPU_OPERATIONS",
                             "HOROVOD_GPU_OPERATIONS",
                             "HOROVOD_HIERARCHICAL_ALLREDUCE",
                             "HOROVOD_HIERARCHICAL_ALLGATHER"}) {
      unsetenv(name);
    }
  }
  void TearDown() override { ringlet_shutdown(); }
};

TEST_F(ApiTest, CallsBeforeInitSayNotInitialized) {
  ASSERT_EQ(ringlet_is_initialized(), 0);
  float x = 1;
  EXPECT_EQ(ringlet_allreduce(&x, &x, 1, RINGLET_FLOAT32, RINGLET_SUM),
            RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_NE(last_error().find("allreduce called before init()"), std::string::npos) << last_error();

  size_t counts[1] = {1};
  EXPECT_EQ(ringlet_allgather(&x, &x, counts, RINGLET_FLOAT32), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_NE(last_error().find("allgather called before init()"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_alltoall(&x, nullptr, &x, nullptr, RINGLET_FLOAT32),
            RINGLET_ERR_NOT_INITIALIZED);
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
    EXPECT_NE(std::string(e.what()).find("allreduce called before init()"), std::string::npos)
        << e.what();
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

// What this version does not serve is refused at init, naming the variable,
// the value and what is accepted, through both the C ABI and the C++ API.
struct Unserved {
  const char* name;
  const char* value;
  std::vector<std::string> said;  // pieces the message must hold
};

TEST_F(ApiTest, UnservedSettingsAreRefusedAtInitByName) {
  std::vector<Unserved> cases;
  // RINGLET_TRANSPORT=ucx is served where the build has the UCX carrier.
  if (ringlet::build_info().find("transports: shm tcp ucx") == std::string::npos) {
    cases.push_back(
        {"RINGLET_TRANSPORT", "ucx", {"RINGLET_TRANSPORT=ucx", "no UCX carrier", "auto|shm|tcp"}});
  }
  for (const Unserved& c : cases) {
    setenv(c.name, c.value, 1);
    EXPECT_EQ(ringlet_init(), RINGLET_ERR_CONFIG) << c.name << "=" << c.value;
    for (const std::string& piece : c.said) {
      EXPECT_NE(last_error().find(piece), std::string::npos)
          << piece << " missing from: " << last_error();
    }
    EXPECT_EQ(ringlet_is_initialized(), 0);
    try {
      ringlet::init();
      ADD_FAILURE() << c.name << "=" << c.value << " was accepted by ringlet::init()";
      ringlet::shutdown();
    } catch (const ringlet::Error& e) {
      EXPECT_EQ(e.code(), ringlet::ErrorCode::kConfig) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.said.front()), std::string::npos) << e.what();
    }
    unsetenv(c.name);
  }
  // The refusals leave nothing behind: the defaults start.
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
}

// HOROVOD_CPU_OPERATIONS=MPI: MPI runs the host collectives of a job that
// mpirun launched (tests/collectives, tests/runtime and tests/api under
// mpirun). A job of one process needs no MPI: its collectives are local
// copies. A job of several ranks launched otherwise, and RINGLET_ALGORITHM
// naming one of Ringlet's host algorithms beside it, are refused at init by
// name, before the ranks meet.
TEST_F(ApiTest, MpiOperationsServeOneProcessAndRefuseOtherLaunchers) {
  unsetenv("RINGLET_ALGORITHM");
  setenv("HOROVOD_CPU_OPERATIONS", "MPI", 1);
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  int32_t x[3] = {7, -3, 5}, y[3] = {0, 0, 0};
  ASSERT_EQ(ringlet_allreduce(x, y, 3, RINGLET_INT32, RINGLET_AVG), RINGLET_OK) << last_error();
  EXPECT_EQ(std::vector<int32_t>(y, y + 3), (std::vector<int32_t>{7, -3, 5}));
  ASSERT_EQ(ringlet_shutdown(), RINGLET_OK);

  setenv("RINGLET_ALGORITHM", "direct", 1);
  EXPECT_EQ(ringlet_init(), RINGLET_ERR_CONFIG);
  for (const char* piece : {"RINGLET_ALGORITHM=direct", "HOROVOD_CPU_OPERATIONS=MPI", "auto"}) {
    EXPECT_NE(last_error().find(piece), std::string::npos)
        << piece << " missing from: " << last_error();
  }
  unsetenv("RINGLET_ALGORITHM");

  // Two ranks as ringletrun starts them; the refusal comes before rank 0's
  // store is needed.
  setenv("RINGLET_RANK", "1", 1);
  setenv("RINGLET_SIZE", "2", 1);
  setenv("RINGLET_RENDEZVOUS", "127.0.0.1:9", 1);
  setenv("RINGLET_SECRET", "00", 1);
  EXPECT_EQ(ringlet_init(), RINGLET_ERR_CONFIG);
  for (const char* piece : {"on rank 1", "HOROVOD_CPU_OPERATIONS=MPI", "started by ringletrun",
                            "started by mpirun", "accepted here: RING"}) {
    EXPECT_NE(last_error().find(piece), std::string::npos)
        << piece << " missing from: " << last_error();
  }
  EXPECT_EQ(ringlet_is_initialized(), 0);
  for (const char* name : {"RINGLET_RANK", "RINGLET_SIZE", "RINGLET_RENDEZVOUS", "RINGLET_SECRET",
                           "HOROVOD_CPU_OPERATIONS"}) {
    unsetenv(name);
  }
}

// HOROVOD_GPU_OPERATIONS is accepted at init, whatever it says (CPU-only jobs
// run with Horovod's build-time setting in their environment); a tensor on a
// CUDA device that the chosen operations cannot serve is refused at its
// submission, naming the setting, and the refusal leaves the runtime usable.
// (What NCCL and RING serve runs where built and a device is present:
// tests/gpu covers it.)
TEST_F(ApiTest, DeviceTensorsAreRefusedNamingTheGpuOperations) {
  for (const char* gpu_ops : {"NCCL", "RING", "MPI"}) {
    setenv("HOROVOD_GPU_OPERATIONS", gpu_ops, 1);
    ASSERT_EQ(ringlet_init(), RINGLET_OK) << gpu_ops << ": " << last_error();
    float x[2] = {1, 2}, y[2] = {0, 0};
    if (std::string(gpu_ops) == "MPI") {
      const ringlet::Tensor in{x, ringlet::DataType::kFloat32, {2}, 0};
      const ringlet::Tensor out{y, ringlet::DataType::kFloat32, {2}, 0};
      try {
        ringlet::allreduce_async("on.device", in, out);
        ADD_FAILURE() << "a cuda:0 tensor was accepted with HOROVOD_GPU_OPERATIONS=MPI";
      } catch (const ringlet::Error& e) {
        EXPECT_EQ(e.code(), ringlet::ErrorCode::kInvalidArgument) << e.what();
        const std::string what = e.what();
        EXPECT_NE(what.find("'on.device'"), std::string::npos) << what;
        EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
        EXPECT_NE(what.find("HOROVOD_GPU_OPERATIONS=MPI"), std::string::npos) << what;
      }
    }
    try {
      ringlet::allgather_async("on.device.too", {x, ringlet::DataType::kFloat32, {2}, 1});
      ADD_FAILURE() << "a cuda:1 allgather was accepted";
    } catch (const ringlet::Error& e) {
      EXPECT_EQ(e.code(), ringlet::ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("cuda:1"), std::string::npos) << e.what();
    }
    // Host tensors still run, through the runtime the refused call started.
    auto h = ringlet::allreduce_async("on.host", {x, ringlet::DataType::kFloat32, {2}},
                                      {y, ringlet::DataType::kFloat32, {2}});
    ringlet::synchronize(h);
    EXPECT_EQ(y[0], 1);
    EXPECT_EQ(y[1], 2);
    ringlet_shutdown();
    unsetenv("HOROVOD_GPU_OPERATIONS");
  }
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
  ASSERT_EQ(ringlet_allgather(ints.data(), got.data(), counts, RINGLET_INT32), RINGLET_OK)
      << last_error();
  EXPECT_EQ(got, ints);
  EXPECT_EQ(ringlet_barrier(), RINGLET_OK) << last_error();
}

TEST_F(ApiTest, InvalidArgumentsAreRefusedWithTheirName) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  float x[2] = {1, 2};
  size_t counts[1] = {2};

  EXPECT_EQ(ringlet_allreduce(x, x, 2, 42, RINGLET_SUM), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown dtype 42"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("rank 0"), std::string::npos) << last_error();
  // Every dtype the C ABI names, in the order of its values.
  EXPECT_NE(last_error().find("(expected 0..9: float32, float64, float16, bfloat16, int8, uint8, "
                              "int32, int64, int16, uint16)"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(ringlet_allreduce(x, x, 2, -1, RINGLET_SUM), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_allreduce(x, x, 2, RINGLET_FLOAT32, 9), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown reduce op 9"), std::string::npos) << last_error();

  EXPECT_EQ(ringlet_allreduce(nullptr, x, 2, RINGLET_FLOAT32, RINGLET_SUM),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("send is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allreduce(nullptr, nullptr, 0, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_OK)
      << "count 0 needs no buffers: " << last_error();

  EXPECT_EQ(ringlet_broadcast(x, 2, RINGLET_FLOAT32, 1), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("root 1 is out of range"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_broadcast(x, 2, RINGLET_FLOAT32, -1), RINGLET_ERR_INVALID_ARGUMENT);

  EXPECT_EQ(ringlet_allgather(x, x, nullptr, RINGLET_FLOAT32), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("recv_counts is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_reducescatter(x, x, nullptr, RINGLET_FLOAT32, RINGLET_SUM),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_alltoall(x, nullptr, x, counts, RINGLET_FLOAT32), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("send_counts is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allgather(x, nullptr, counts, RINGLET_FLOAT32), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("recv is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_reducescatter(x, x, counts, RINGLET_FLOAT32, 77), RINGLET_ERR_INVALID_ARGUMENT);

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
  EXPECT_NE(last_error().find("allreduce_async called before init()"), std::string::npos)
      << last_error();
  EXPECT_EQ(h, 0);
  int done = 0;
  EXPECT_EQ(ringlet_poll(1, &done), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_wait(1, 0.1), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_synchronize(1), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_join(nullptr), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_start_timeline("t.json", 0), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_EQ(ringlet_stop_timeline(), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_THROW(ringlet::allgather_async("g", {&x, ringlet::DataType::kFloat32, {1}}),
               ringlet::Error);
}

TEST_F(ApiTest, AsyncAllreduceSingleRank) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  std::vector<float> in{1, 2, 3, 4}, out(4, 0);
  int64_t h = 0;
  ASSERT_EQ(ringlet_allreduce_async("t", in.data(), out.data(), 4, RINGLET_FLOAT32, RINGLET_SUM,
                                    2.0, 0.5, &h),
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
  ringlet::Result rs =
      ringlet::synchronize(ringlet::reducescatter_async("rs", t, ringlet::ReduceOp::kSum));
  EXPECT_EQ(rs.shape, (std::vector<int64_t>{2}));
  ringlet::Result aa = ringlet::synchronize(ringlet::alltoall_async("a2a", t));
  EXPECT_EQ(aa.received_splits, (std::vector<int64_t>{2}));
  std::vector<float> c(2, 0), d(3, 0), e{1, 1, 1};
  auto hs = ringlet::grouped_allreduce_async(
      {"g1", "g2"}, {t, {e.data(), ringlet::DataType::kFloat32, {3}}},
      {{c.data(), ringlet::DataType::kFloat32, {2}}, {d.data(), ringlet::DataType::kFloat32, {3}}});
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
  EXPECT_EQ(ringlet_allreduce_async("x", x, x, 2, 42, RINGLET_SUM, 1, 1, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown dtype 42"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allreduce_async("x", x, x, 2, RINGLET_FLOAT32, 9, 1, 1, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown reduce op 9"), std::string::npos) << last_error();
  EXPECT_NE(ringlet_allreduce_async("", x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h),
            RINGLET_OK);
  EXPECT_NE(last_error().find("non-empty name"), std::string::npos) << last_error();
  EXPECT_NE(ringlet_allreduce_async("x", nullptr, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h),
            RINGLET_OK);
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
  EXPECT_THROW(
      ringlet::grouped_allreduce_async({"a", "b"}, {{x, ringlet::DataType::kFloat32, {2}}}, {}),
      ringlet::Error);
  EXPECT_THROW(ringlet::broadcast_async("b", {x, ringlet::DataType::kFloat32, {2}}, 3),
               ringlet::Error);
  // A refused call leaves the runtime usable.
  EXPECT_EQ(ringlet_allreduce(x, x, 2, RINGLET_FLOAT32, RINGLET_SUM), RINGLET_OK) << last_error();
}

TEST_F(ApiTest, AsyncGroupNamingATensorTwiceIsRefused) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  // (A name in flight twice needs another rank to hold the first back: see
  // c_abi_async.c.)
  float x[2] = {1, 2};
  try {
    ringlet::grouped_allreduce_async(
        {"dup", "dup"},
        {{x, ringlet::DataType::kFloat32, {2}}, {x, ringlet::DataType::kFloat32, {2}}},
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

// flush() only ends the burst: what was submitted before it runs, fused or
// not, with its results right; before init() it is refused as every call is.
TEST_F(ApiTest, FlushEndsTheBurstAndWhatWasSubmittedCompletes) {
  try {
    ringlet::flush();
    FAIL() << "flush before init was accepted";
  } catch (const ringlet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("flush called before init()"), std::string::npos)
        << e.what();
  }
  ringlet::init_with_runtime();
  float x[3][2] = {{1, 2}, {3, 4}, {5, 6}};
  std::vector<int64_t> handles;
  for (int i = 0; i < 3; ++i) {
    const ringlet::Tensor t{x[i], ringlet::DataType::kFloat32, {2}};
    handles.push_back(
        ringlet::allreduce_async("f" + std::to_string(i), t, t, ringlet::ReduceOp::kSum));
  }
  ringlet::flush();
  ringlet::flush();  // twice, or with nothing queued: nothing to do
  for (int64_t h : handles) EXPECT_NO_THROW(ringlet::synchronize(h));
  EXPECT_EQ(x[0][1], 2);  // one rank: the sum is the tensor
  EXPECT_EQ(x[2][0], 5);
  ringlet::flush();
}

// What a caller that waits in slices needs: a timed wait that leaves the
// handle alone, and barrier and join as handles.
TEST_F(ApiTest, WaitForBarrierAsyncAndJoinAsync) {
  ringlet::init_with_runtime();
  float x[2] = {1, 2};
  const int64_t h = ringlet::allreduce_async("w", {x, ringlet::DataType::kFloat32, {2}},
                                             {x, ringlet::DataType::kFloat32, {2}});
  EXPECT_TRUE(ringlet::wait_for(h, std::chrono::seconds(30)));
  EXPECT_TRUE(ringlet::wait_for(h, std::chrono::milliseconds(0)));  // still valid
  EXPECT_NO_THROW(ringlet::synchronize(h));
  EXPECT_THROW(ringlet::wait_for(h, std::chrono::milliseconds(1)), ringlet::Error);  // released
  EXPECT_THROW(ringlet::wait_for(h, std::chrono::milliseconds(-1)), ringlet::Error);

  const int64_t b = ringlet::barrier_async();
  EXPECT_TRUE(ringlet::wait_for(b, std::chrono::seconds(30)));
  EXPECT_NO_THROW(ringlet::synchronize(b));
  const int64_t j = ringlet::join_async();
  ASSERT_TRUE(ringlet::wait_for(j, std::chrono::seconds(30)));
  const ringlet::Result r = ringlet::synchronize(j);
  int32_t last = -1;
  ASSERT_EQ(r.data.size(), sizeof last);
  std::memcpy(&last, r.data.data(), sizeof last);
  EXPECT_EQ(last, 0);
}

// An init that waits for ranks that never come gives up when its caller
// says so, starts nothing, and leaves the process able to init again.
TEST_F(ApiTest, AnInterruptedInitStartsNothing) {
  // Rank 1 of two, whose rank 0 never comes: nothing serves port 1, so every
  // connection attempt is refused at once and the rendezvous keeps retrying.
  setenv("RINGLET_RANK", "1", 1);
  setenv("RINGLET_SIZE", "2", 1);
  setenv("RINGLET_RENDEZVOUS", "127.0.0.1:1", 1);
  setenv("RINGLET_SECRET", "00112233445566778899aabbccddeeff", 1);
  int asked = 0;
  const auto start = std::chrono::steady_clock::now();
  try {
    ringlet::init_with_runtime({}, [&asked] { return ++asked >= 5; });
    FAIL() << "init met a rank 0 that does not exist";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kAborted) << e.what();
    EXPECT_NE(std::string(e.what()).find("ringlet: init on rank 1: interrupted while waiting"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(asked, 5);
  EXPECT_FALSE(ringlet::is_initialized());
  for (const char* name : {"RINGLET_RANK", "RINGLET_SIZE", "RINGLET_RENDEZVOUS", "RINGLET_SECRET"})
    unsetenv(name);
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
}

// An init interrupted after this rank joined the rendezvous (rank 0's store
// counts it in) cannot be resumed: it says the job must be started again,
// and init() of that job again fails at once instead of waiting for the
// start timeout. The test serves rank 0's store itself; rank 0 never comes.
TEST_F(ApiTest, AnInitInterruptedAfterJoiningEndsTheJobsRendezvous) {
  const char* secret = "00112233445566778899aabbccddeeff";
  ringlet::core::StoreServer store(0, secret);
  setenv("RINGLET_RANK", "1", 1);
  setenv("RINGLET_SIZE", "2", 1);
  setenv("RINGLET_RENDEZVOUS", ("127.0.0.1:" + std::to_string(store.port())).c_str(), 1);
  setenv("RINGLET_SECRET", secret, 1);
  int asked = 0;
  try {
    ringlet::init_with_runtime({}, [&asked] { return ++asked >= 5; });
    FAIL() << "init met a rank 0 that does not exist";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kAborted) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("ringlet: init on rank 1: interrupted while waiting for"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("after this rank had joined the rendezvous"), std::string::npos) << what;
    EXPECT_NE(what.find("the job must be started again"), std::string::npos) << what;
  }
  EXPECT_EQ(asked, 5);
  EXPECT_FALSE(ringlet::is_initialized());

  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ringlet_init(), RINGLET_ERR_ABORTED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_NE(last_error().find("ringlet: init on rank 1: an earlier init of this process was "
                              "interrupted after this rank had joined the rendezvous"),
            std::string::npos)
      << last_error();
  EXPECT_NE(last_error().find("the job must be started again"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_is_initialized(), 0);

  // Another job (here: a lone rank) starts as ever.
  for (const char* name : {"RINGLET_RANK", "RINGLET_SIZE", "RINGLET_RENDEZVOUS", "RINGLET_SECRET"})
    unsetenv(name);
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
}

// shutdown() while init() meets the other ranks ends that init() with
// kAborted saying so, whether it comes from the init's own interrupt (a
// binding's signal handler runs there) or from another thread; init() then
// starts afresh. Rank 0 never comes (nothing serves port 1).
TEST_F(ApiTest, AShutdownDuringInitEndsThatInit) {
  setenv("RINGLET_RANK", "1", 1);
  setenv("RINGLET_SIZE", "2", 1);
  setenv("RINGLET_RENDEZVOUS", "127.0.0.1:1", 1);
  setenv("RINGLET_SECRET", "00112233445566778899aabbccddeeff", 1);
  auto expect_cancelled = [](const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kAborted) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("ringlet: init on rank 1: shutdown() was called while "
                                          "init was meeting the other ranks (interrupted while "
                                          "waiting for",
                                          0),
              0u)
        << e.what();
  };
  int asked = 0;
  const auto start = std::chrono::steady_clock::now();
  try {
    ringlet::init_with_runtime({}, [&asked] {
      if (++asked == 3) ringlet::shutdown();
      return false;
    });
    FAIL() << "init went on after shutdown()";
  } catch (const ringlet::Error& e) {
    expect_cancelled(e);
  }
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(ringlet::is_initialized());

  std::thread other([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ringlet::shutdown();
  });
  try {
    ringlet::init();
    FAIL() << "init went on after shutdown()";
  } catch (const ringlet::Error& e) {
    expect_cancelled(e);
  }
  other.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(ringlet::is_initialized());

  for (const char* name : {"RINGLET_RANK", "RINGLET_SIZE", "RINGLET_RENDEZVOUS", "RINGLET_SECRET"})
    unsetenv(name);
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
}

TEST_F(ApiTest, TimelineStartsAndStopsAtRunTime) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  const std::string file = testing::TempDir() + "ringlet_api_timeline.json";
  ASSERT_EQ(ringlet_start_timeline(file.c_str(), 1), RINGLET_OK) << last_error();
  float x[2] = {1, 2};
  int64_t h = 0;
  ASSERT_EQ(ringlet_allreduce_async("traced", x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h),
            RINGLET_OK);
  ASSERT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  ASSERT_EQ(ringlet_stop_timeline(), RINGLET_OK) << last_error();
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("traced"), std::string::npos) << text.str();
}

// A timeline file that cannot be written is the caller's argument when it
// comes from start_timeline(), and the configuration's from HOROVOD_TIMELINE.
TEST_F(ApiTest, AnUnwritableTimelineIsRefusedAsWhatGaveIt) {
  const std::string file = "/nonexistent/ringlet_api_timeline.json";
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  float x[2] = {1, 2};
  int64_t h = 0;
  ASSERT_EQ(ringlet_allreduce_async("runs", x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h),
            RINGLET_OK);  // the runtime runs: the timeline starts at once
  ASSERT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  EXPECT_EQ(ringlet_start_timeline(file.c_str(), 0), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find(file), std::string::npos) << last_error();
  ASSERT_EQ(ringlet_shutdown(), RINGLET_OK);

  setenv("HOROVOD_TIMELINE", file.c_str(), 1);
  EXPECT_EQ(ringlet_init(), RINGLET_ERR_CONFIG);
  unsetenv("HOROVOD_TIMELINE");
  EXPECT_NE(last_error().find("HOROVOD_TIMELINE"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find(file), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_is_initialized(), 0);
}

// Before the runtime runs, start_timeline() on rank 0 opens the file at
// once: a path it cannot write fails that call, formatted like every
// error, rather than the later call that starts the runtime.
TEST_F(ApiTest, AnUnwritableTimelineFailsStartTimelineBeforeTheRuntimeRuns) {
  const std::string file = "/nonexistent/dir/x.json";
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  try {
    ringlet::start_timeline(file);
    FAIL() << "started a timeline in a directory that does not exist";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kInvalidArgument) << e.what();
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("ringlet: start_timeline on rank 0: cannot open timeline file '" + file +
                             "' for writing: ",
                         0),
              0u)
        << what;
  }
  EXPECT_EQ(ringlet_start_timeline(file.c_str(), 1), RINGLET_ERR_INVALID_ARGUMENT);
  // Nothing is left pending: the call that starts the runtime works.
  float x[2] = {1, 2};
  int64_t h = 0;
  ASSERT_EQ(ringlet_allreduce_async("after", x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h),
            RINGLET_OK)
      << last_error();
  ASSERT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 2.0f);

  // A good path asked for early is written once the runtime runs.
  ASSERT_EQ(ringlet_shutdown(), RINGLET_OK);
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  const std::string good = testing::TempDir() + "ringlet_api_early_timeline.json";
  ASSERT_EQ(ringlet_start_timeline(good.c_str(), 0), RINGLET_OK) << last_error();
  ASSERT_EQ(ringlet_allreduce_async("early", x, x, 2, RINGLET_FLOAT32, RINGLET_SUM, 1, 1, &h),
            RINGLET_OK);
  ASSERT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  ASSERT_EQ(ringlet_stop_timeline(), RINGLET_OK) << last_error();
  std::ifstream in(good);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("early"), std::string::npos) << text.str();
}

TEST_F(ApiTest, StatusStringsNameEveryCode) {
  std::vector<std::string> seen;
  for (int code = RINGLET_OK; code <= RINGLET_ERR_ABORTED; ++code) {
    const char* text = ringlet_status_string(static_cast<ringlet_status>(code));
    ASSERT_NE(text, nullptr);
    EXPECT_STRNE(text, "unknown status") << code;
    for (const std::string& other : seen) EXPECT_NE(other, text) << code;
    seen.emplace_back(text);
    if (code != RINGLET_OK) {
      EXPECT_STREQ(text, ringlet::to_string(static_cast<ringlet::ErrorCode>(code)));
    }
  }
  EXPECT_STREQ(ringlet_status_string(static_cast<ringlet_status>(99)), "unknown status");
  EXPECT_STREQ(ringlet_status_string(RINGLET_ERR_MISMATCH), "mismatch across ranks");
}

// The C++ code and the C status of one failure are the same number.
TEST_F(ApiTest, CppErrorCarriesTheCode) {
  float x[2] = {1, 2};
  try {
    ringlet::allreduce(x, x, 2, ringlet::DataType::kFloat32);
    FAIL() << "allreduce before init did not throw";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kNotInitialized) << e.what();
  }
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  try {
    ringlet::broadcast_async("b", {x, ringlet::DataType::kFloat32, {2}}, 3);
    FAIL() << "a root out of range was accepted";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("root 3"), std::string::npos) << e.what();
  }
  try {
    ringlet::wait(424242, std::chrono::milliseconds(1));
    FAIL() << "an unknown handle was accepted";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kInvalidArgument) << e.what();
  }
  try {
    ringlet::init();
    FAIL() << "init twice was accepted";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), RINGLET_ERR_INVALID_ARGUMENT) << e.what();
  }
}

// One rank: every asynchronous collective of the C ABI, and the results.
TEST_F(ApiTest, AsyncCollectivesThroughTheCAbiSingleRank) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  std::vector<int32_t> in{1, 2, 3, 4, 5, 6}, out(6, 0);
  const int64_t shape[2] = {2, 3};
  int64_t h = 0;
  ASSERT_EQ(ringlet_allreduce_async_ex("ex", in.data(), out.data(), shape, 2, RINGLET_INT32,
                                       RINGLET_SUM, 1, 1, 0, &h),
            RINGLET_OK)
      << last_error();
  ringlet_result* r = nullptr;
  ASSERT_EQ(ringlet_synchronize_result(h, &r), RINGLET_OK) << last_error();
  EXPECT_EQ(ringlet_result_bytes(r), 0u);
  EXPECT_EQ(ringlet_result_data(r), nullptr);
  ringlet_result_free(r);
  EXPECT_EQ(out, in);

  ASSERT_EQ(ringlet_allgather_async("ag", in.data(), shape, 2, RINGLET_INT32, 0, &h), RINGLET_OK)
      << last_error();
  ASSERT_EQ(ringlet_synchronize_result(h, &r), RINGLET_OK) << last_error();
  ASSERT_EQ(ringlet_result_bytes(r), in.size() * sizeof(int32_t));
  ASSERT_EQ(ringlet_result_ndim(r), 2);
  EXPECT_EQ(ringlet_result_shape(r)[0], 2);
  EXPECT_EQ(ringlet_result_shape(r)[1], 3);
  EXPECT_EQ(std::memcmp(ringlet_result_data(r), in.data(), ringlet_result_bytes(r)), 0);
  int n = -1;
  EXPECT_EQ(ringlet_result_received_splits(r, &n), nullptr);
  EXPECT_EQ(n, 0);
  ringlet_result_free(r);

  ASSERT_EQ(ringlet_reducescatter_async("rs", in.data(), shape, 2, RINGLET_INT32, RINGLET_SUM, 1, 1,
                                        0, &h),
            RINGLET_OK)
      << last_error();
  ASSERT_EQ(ringlet_synchronize_result(h, &r), RINGLET_OK) << last_error();
  ASSERT_EQ(ringlet_result_bytes(r), in.size() * sizeof(int32_t));
  EXPECT_EQ(std::memcmp(ringlet_result_data(r), in.data(), ringlet_result_bytes(r)), 0);
  ringlet_result_free(r);

  const int64_t splits[1] = {2};
  ASSERT_EQ(ringlet_alltoall_async("a2a", in.data(), shape, 2, RINGLET_INT32, splits, 1, 0, &h),
            RINGLET_OK)
      << last_error();
  ASSERT_EQ(ringlet_synchronize_result(h, &r), RINGLET_OK) << last_error();
  const int64_t* received = ringlet_result_received_splits(r, &n);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(received[0], 2);
  EXPECT_EQ(std::memcmp(ringlet_result_data(r), in.data(), ringlet_result_bytes(r)), 0);
  ringlet_result_free(r);

  ASSERT_EQ(ringlet_broadcast_async("bc", out.data(), shape, 2, RINGLET_INT32, 0, 0, &h),
            RINGLET_OK)
      << last_error();
  EXPECT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  EXPECT_EQ(out, in);

  // A scalar: ndim 0, no shape.
  float scalar = 2.5f, scalar_out = 0;
  ASSERT_EQ(ringlet_allreduce_async_ex("scalar", &scalar, &scalar_out, nullptr, 0, RINGLET_FLOAT32,
                                       RINGLET_SUM, 1, 1, 0, &h),
            RINGLET_OK)
      << last_error();
  EXPECT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  EXPECT_EQ(scalar_out, 2.5f);

  std::vector<float> a{1, 2}, b{3, 4, 5}, ao(2), bo(3);
  const char* names[2] = {"ga", "gb"};
  const void* sends[2] = {a.data(), b.data()};
  void* recvs[2] = {ao.data(), bo.data()};
  const int64_t sa[1] = {2}, sb[1] = {3};
  const int64_t* shapes[2] = {sa, sb};
  const int ndims[2] = {1, 1};
  int64_t hs[2] = {0, 0};
  ASSERT_EQ(ringlet_grouped_allreduce_async(2, names, sends, recvs, shapes, ndims, RINGLET_FLOAT32,
                                            RINGLET_AVG, 1, 1, 0, hs),
            RINGLET_OK)
      << last_error();
  EXPECT_EQ(ringlet_synchronize(hs[0]), RINGLET_OK) << last_error();
  EXPECT_EQ(ringlet_synchronize(hs[1]), RINGLET_OK) << last_error();
  EXPECT_EQ(ao, a);
  EXPECT_EQ(bo, b);

  // Accessors read a null result as empty; freeing null is allowed.
  EXPECT_EQ(ringlet_result_data(nullptr), nullptr);
  EXPECT_EQ(ringlet_result_bytes(nullptr), 0u);
  EXPECT_EQ(ringlet_result_ndim(nullptr), 0);
  EXPECT_EQ(ringlet_result_shape(nullptr), nullptr);
  EXPECT_EQ(ringlet_result_received_splits(nullptr, &n), nullptr);
  EXPECT_EQ(n, 0);
  ringlet_result_free(nullptr);
}

TEST_F(ApiTest, AsyncCAbiArgumentsAreCheckedBeforeAnythingIsSubmitted) {
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  int32_t x[4] = {1, 2, 3, 4};
  const int64_t shape[1] = {4};
  int64_t h = 7;
  EXPECT_EQ(ringlet_allgather_async("g", x, shape, 1, RINGLET_INT32, 0, nullptr),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("handle is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allgather_async(nullptr, x, shape, 1, RINGLET_INT32, 0, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("name is null"), std::string::npos) << last_error();
  EXPECT_EQ(h, 0);
  EXPECT_EQ(ringlet_broadcast_async("b", x, shape, -1, RINGLET_INT32, 0, 0, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("ndim is -1"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("on rank 0"), std::string::npos) << last_error();
  EXPECT_EQ(
      ringlet_reducescatter_async("r", x, nullptr, 1, RINGLET_INT32, RINGLET_SUM, 1, 1, 0, &h),
      RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("shape is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_alltoall_async("a", x, shape, 1, RINGLET_INT32, nullptr, 1, 0, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("splits is null"), std::string::npos) << last_error();
  const int64_t two_splits[2] = {2, 2};
  EXPECT_EQ(ringlet_alltoall_async("a", x, shape, 1, RINGLET_INT32, two_splits, 2, 0, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("splits"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_allreduce_async_ex("m", x, x, shape, 1, 42, RINGLET_SUM, 1, 1, 0, &h),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown dtype 42"), std::string::npos) << last_error();

  int64_t hs[2] = {5, 5};
  const char* names[2] = {"ga", nullptr};
  const void* sends[2] = {x, x};
  void* recvs[2] = {x, x};
  const int64_t* shapes[2] = {shape, shape};
  const int ndims[2] = {1, 1};
  EXPECT_EQ(ringlet_grouped_allreduce_async(2, names, sends, recvs, shapes, ndims, RINGLET_INT32,
                                            RINGLET_SUM, 1, 1, 0, hs),
            RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("names[1] is null"), std::string::npos) << last_error();
  EXPECT_EQ(hs[0], 0);
  EXPECT_EQ(hs[1], 0);
  EXPECT_EQ(ringlet_grouped_allreduce_async(0, names, sends, recvs, shapes, ndims, RINGLET_INT32,
                                            RINGLET_SUM, 1, 1, 0, hs),
            RINGLET_ERR_INVALID_ARGUMENT);

  // synchronize_result without a place for the result keeps the handle.
  ASSERT_EQ(ringlet_allgather_async("kept", x, shape, 1, RINGLET_INT32, 0, &h), RINGLET_OK)
      << last_error();
  EXPECT_EQ(ringlet_synchronize_result(h, nullptr), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("out is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_synchronize(h), RINGLET_OK) << last_error();
  // A failed synchronize_result leaves *out null.
  ringlet_result* r = reinterpret_cast<ringlet_result*>(&h);
  EXPECT_EQ(ringlet_synchronize_result(h, &r), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);

  // A name twice in one group is kInvalidArgument. (A name in flight twice
  // needs another rank to hold the first back: c_abi_async.c checks it.)
  const ringlet::Tensor t{x, ringlet::DataType::kInt32, {4}};
  try {
    ringlet::grouped_allreduce_async({"twice", "twice"}, {t, t}, {t, t});
    FAIL() << "a group naming one tensor twice was accepted";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kInvalidArgument) << e.what();
  }
}

// Before any set is added only the world exists; queries never start the
// runtime, and an unknown id is refused whether or not the runtime runs.
TEST_F(ApiTest, ProcessSetQueriesOnTheWorld) {
  int value = 0;
  EXPECT_EQ(ringlet_process_set_size(0, &value), RINGLET_ERR_NOT_INITIALIZED);
  EXPECT_THROW(ringlet::process_set_ranks(0), ringlet::Error);
  ASSERT_EQ(ringlet_init(), RINGLET_OK) << last_error();
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(ringlet::process_set_ranks(0), std::vector<int>{0});
    EXPECT_EQ(ringlet::process_set_size(0), 1);
    EXPECT_EQ(ringlet::process_set_rank(0), 0);
    int ranks[2] = {-1, -1}, n = 0;
    ASSERT_EQ(ringlet_process_set_ranks(0, ranks, 2, &n), RINGLET_OK) << last_error();
    EXPECT_EQ(n, 1);
    EXPECT_EQ(ranks[0], 0);
    ASSERT_EQ(ringlet_process_set_rank(0, &value), RINGLET_OK) << last_error();
    EXPECT_EQ(value, 0);
    EXPECT_EQ(ringlet_process_set_size(5, &value), RINGLET_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("5"), std::string::npos) << last_error();
    try {
      ringlet::process_set_rank(5);
      FAIL() << "an unknown set was accepted";
    } catch (const ringlet::Error& e) {
      EXPECT_EQ(e.code(), ringlet::ErrorCode::kInvalidArgument) << e.what();
    }
    float x = 1;
    EXPECT_THROW(ringlet::allreduce_async("on.set.5", {&x, ringlet::DataType::kFloat32, {}},
                                          {&x, ringlet::DataType::kFloat32, {}},
                                          ringlet::ReduceOp::kSum, 1.0, 1.0, 5),
                 ringlet::Error);
    int64_t h = 0;
    EXPECT_EQ(ringlet_allreduce_async_ex("on.set.-1", &x, &x, nullptr, 0, RINGLET_FLOAT32,
                                         RINGLET_SUM, 1, 1, -1, &h),
              RINGLET_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("-1"), std::string::npos) << last_error();
    // The second round runs with the runtime started.
    ringlet::synchronize(ringlet::allreduce_async("start", {&x, ringlet::DataType::kFloat32, {}},
                                                  {&x, ringlet::DataType::kFloat32, {}}));
  }
  EXPECT_EQ(ringlet_process_set_ranks(0, nullptr, 1, &value), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_process_set_ranks(0, nullptr, 0, nullptr), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_add_process_set(nullptr, 1, &value), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_add_process_set(nullptr, 0, nullptr), RINGLET_ERR_INVALID_ARGUMENT);
}

TEST_F(ApiTest, InitWithProcessSetsChecksItsArguments) {
  const int sizes[1] = {1};
  EXPECT_EQ(ringlet_init_with_process_sets(nullptr, sizes, -1), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_init_with_process_sets(nullptr, nullptr, 1), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlet_init_with_process_sets(nullptr, sizes, 1), RINGLET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("ranks is null"), std::string::npos) << last_error();
  EXPECT_EQ(ringlet_is_initialized(), 0);
  // No sets: a plain init.
  ASSERT_EQ(ringlet_init_with_process_sets(nullptr, nullptr, 0), RINGLET_OK) << last_error();
  EXPECT_EQ(ringlet_size(), 1);
}

TEST(BuildInfo, ListsEveryFeature) {
  std::string info = ringlet::build_info();
  for (const char* key : {"cuda: ", "nccl: ", "ucx: ", "mpi: ", "python: ", "transports: "}) {
    EXPECT_NE(info.find(key), std::string::npos) << key << " missing from\n" << info;
  }
  EXPECT_NE(info.find("transports: shm tcp"), std::string::npos) << info;
}

}  // namespace
