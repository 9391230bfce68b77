// Every collective of CUDA device tensors through the public API, one
// rank (NCCL runs one rank per device, and the GPU machine has one). Each result is
// checked on the host against the same arithmetic done there. Without a
// device the collectives are skipped, saying so, and the one test that needs
// no device checks that a device tensor is then refused at its submission.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"

namespace {

bool have_device(std::string& why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    why = std::string("no CUDA device: cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
    return false;
  }
  if (n == 0) {
    why = "no CUDA device: cudaGetDeviceCount reported 0 devices";
    return false;
  }
  return true;
}

// A lone rank with NCCL as the GPU operations, whatever ctest inherited.
class DeviceCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"RINGLET_RANK", "RINGLET_SIZE", "RINGLET_RENDEZVOUS", "OMPI_COMM_WORLD_RANK",
          "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID"}) {
      unsetenv(name);
    }
    setenv("HOROVOD_GPU_OPERATIONS", "NCCL", 1);
  }
  void TearDown() override {
    ringlet::shutdown();
    unsetenv("HOROVOD_GPU_OPERATIONS");
  }
};

struct DeviceFloats {
  explicit DeviceFloats(const std::vector<float>& host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(float) + 64), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(p); }
  std::vector<float> read() const {
    std::vector<float> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  ringlet::Tensor tensor() const {
    return {p, ringlet::DataType::kFloat32, {static_cast<int64_t>(n)}, 0};
  }
  void* p = nullptr;
  size_t n;
};

std::vector<float> ramp(size_t n, float from) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from + static_cast<float>(i % 1000);
  return v;
}

TEST_F(DeviceCollectives, WithoutADeviceIsRefusedAtSubmission) {
  std::string why;
  if (have_device(why))
    GTEST_SKIP() << "a CUDA device is present: the tests below run the allreduce";
  ringlet::init();
  float x[4] = {1, 2, 3, 4};
  const ringlet::Tensor t{x, ringlet::DataType::kFloat32, {4}, 0};
  try {
    ringlet::allreduce_async("no.device", t, t);
    ADD_FAILURE() << "a cuda:0 tensor was accepted on a machine without a CUDA device";
  } catch (const ringlet::Error& e) {
    EXPECT_EQ(e.code(), ringlet::ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST_F(DeviceCollectives, OneTensorInAndOutOfPlace) {
  std::string why;
  if (!have_device(why)) GTEST_SKIP() << why;
  ringlet::init();
  const size_t n = 1000003;
  const std::vector<float> host = ramp(n, 1.0f);
  DeviceFloats in(host), out(std::vector<float>(n, 0.0f));
  // Out of place, Sum with a prescale and a postscale: one rank's sum is the
  // tensor itself, scaled by both; the input is left as it was.
  ringlet::synchronize(ringlet::allreduce_async("oop", in.tensor(), out.tensor(),
                                                ringlet::ReduceOp::kSum, 2.0, 0.25));
  const std::vector<float> got = out.read();
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(got[i], host[i] * 2.0f * 0.25f) << i;
  EXPECT_EQ(in.read(), host);
  // In place, Average (the default).
  ringlet::synchronize(ringlet::allreduce_async("ip", in.tensor(), in.tensor()));
  EXPECT_EQ(in.read(), host);
}

TEST_F(DeviceCollectives, FusedTensorsOfOddSizes) {
  std::string why;
  if (!have_device(why)) GTEST_SKIP() << why;
  ringlet::init();
  const std::vector<size_t> sizes = {1, 3, 1000, 4097, 65536, 7};
  std::vector<std::vector<float>> host;
  std::vector<std::unique_ptr<DeviceFloats>> ins, outs;
  std::vector<std::string> names;
  std::vector<ringlet::Tensor> in_t, out_t;
  for (size_t i = 0; i < sizes.size(); ++i) {
    host.push_back(ramp(sizes[i], static_cast<float>(i)));
    ins.push_back(std::make_unique<DeviceFloats>(host.back()));
    outs.push_back(std::make_unique<DeviceFloats>(std::vector<float>(sizes[i], -1.0f)));
    names.push_back("fused." + std::to_string(i));
    in_t.push_back(ins.back()->tensor());
    out_t.push_back(outs.back()->tensor());
  }
  for (int64_t h :
       ringlet::grouped_allreduce_async(names, in_t, out_t, ringlet::ReduceOp::kSum, 1.0, 3.0)) {
    ringlet::synchronize(h);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::vector<float> got = outs[i]->read();
    for (size_t j = 0; j < sizes[i]; ++j) ASSERT_EQ(got[j], host[i][j] * 3.0f) << i << "," << j;
  }
}

TEST_F(DeviceCollectives, WaitsForTheProducersStream) {
  std::string why;
  if (!have_device(why)) GTEST_SKIP() << why;
  ringlet::init();
  // The input is written by a copy queued on the caller's stream behind a
  // long memset; the collective (out of place) must read the copy's data,
  // not what the input held before.
  const size_t n = 1 << 24;
  const std::vector<float> ones(n, 1.0f), twos(n, 2.0f);
  DeviceFloats in(ones), out(std::vector<float>(n, 0.0f)), big(std::vector<float>(n * 8, 0.0f));
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void* staged = nullptr;
  ASSERT_EQ(cudaMallocHost(&staged, n * sizeof(float)), cudaSuccess);
  std::memcpy(staged, twos.data(), n * sizeof(float));
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(cudaMemsetAsync(big.p, i, n * 8 * sizeof(float), s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(in.p, staged, n * sizeof(float), cudaMemcpyHostToDevice, s),
            cudaSuccess);
  ringlet::Tensor input = in.tensor(), output = out.tensor();
  input.stream = output.stream = s;
  ringlet::synchronize(
      ringlet::allreduce_async("after.producer", input, output, ringlet::ReduceOp::kSum));
  EXPECT_EQ(out.read(), twos);
  cudaFreeHost(staged);
  cudaStreamDestroy(s);
}

TEST_F(DeviceCollectives, BroadcastFromTheOnlyRankKeepsItsData) {
  std::string why;
  if (!have_device(why)) GTEST_SKIP() << why;
  ringlet::init();
  const std::vector<float> host = ramp(4099, 5.0f);
  DeviceFloats t(host);
  ringlet::synchronize(ringlet::broadcast_async("bcast", t.tensor(), 0));
  EXPECT_EQ(t.read(), host);
}

// The output of a result in device memory, read back.
std::vector<float> device_result(const ringlet::Result& r) {
  EXPECT_EQ(r.device, 0);
  EXPECT_NE(r.device_data, nullptr);
  EXPECT_TRUE(r.data.empty());
  std::vector<float> h(r.device_bytes / sizeof(float));
  EXPECT_EQ(cudaMemcpy(h.data(), r.device_data.get(), r.device_bytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  return h;
}

TEST_F(DeviceCollectives, AllgatherReducescatterAndAlltoallReturnDeviceMemory) {
  std::string why;
  if (!have_device(why)) GTEST_SKIP() << why;
  ringlet::init();
  const std::vector<float> host = ramp(4099 * 3, 1.0f);
  DeviceFloats in(host);
  ringlet::Tensor rows = in.tensor();
  rows.shape = {4099, 3};

  ringlet::Result g = ringlet::synchronize(ringlet::allgather_async("gather", rows));
  EXPECT_EQ(g.shape, (std::vector<int64_t>{4099, 3}));
  EXPECT_EQ(device_result(g), host);

  // One rank's reduction is its own rows, scaled by both factors.
  ringlet::Result rs = ringlet::synchronize(
      ringlet::reducescatter_async("scatter", rows, ringlet::ReduceOp::kSum, 2.0, 0.25));
  EXPECT_EQ(rs.shape, (std::vector<int64_t>{4099, 3}));
  const std::vector<float> got = device_result(rs);
  ASSERT_EQ(got.size(), host.size());
  for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(got[i], host[i] * 2.0f * 0.25f) << i;
  EXPECT_EQ(in.read(), host) << "the prescale changed the input";

  ringlet::Result a = ringlet::synchronize(ringlet::alltoall_async("exchange", rows, {4099}));
  EXPECT_EQ(a.received_splits, (std::vector<int64_t>{4099}));
  EXPECT_EQ(device_result(a), host);

  // No rows: a shape, and memory of none.
  ringlet::Tensor none = in.tensor();
  none.shape = {0, 3};
  ringlet::Result empty = ringlet::synchronize(ringlet::allgather_async("nothing", none));
  EXPECT_EQ(empty.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(empty.device_bytes, 0u);
}

}  // namespace

namespace {

// Queues `rounds` memsets of `bytes` on `stream`, and returns an event
// after them: work the device takes milliseconds over.
cudaEvent_t keep_busy(void* buffer, size_t bytes, int rounds, cudaStream_t stream) {
  for (int i = 0; i < rounds; ++i)
    EXPECT_EQ(cudaMemsetAsync(buffer, i, bytes, stream), cudaSuccess);
  cudaEvent_t done = nullptr;
  EXPECT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(done, stream), cudaSuccess);
  return done;
}

TEST_F(DeviceCollectives, AResultComesFromAPoolAndGoesBackWithoutWaitingForTheDevice) {
  std::string why;
  if (!have_device(why)) GTEST_SKIP() << why;
  ringlet::init();
  const std::vector<float> host = ramp(1 << 16, 3.0f);
  DeviceFloats in(host);
  ringlet::Result g = ringlet::synchronize(ringlet::allgather_async("pooled", in.tensor()));
  EXPECT_EQ(device_result(g), host);
  // Memory of a stream-ordered pool, not of cudaMalloc (which has none).
  // The driver's call through the runtime, so that the test loads where
  // there is no driver and reports its skip.
  using GetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fn, 12000, cudaEnableDefault,
                                             &found),
            cudaSuccess);
  ASSERT_EQ(found, cudaDriverEntryPointSuccess);
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(reinterpret_cast<GetAttribute>(fn)(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                               reinterpret_cast<CUdeviceptr>(g.device_data.get())),
            CUDA_SUCCESS);
  EXPECT_NE(pool, nullptr);
  // Milliseconds of work on a stream of the caller's: handing the result
  // back must not wait for it (cudaFree would wait for the whole device).
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceFloats busy(std::vector<float>(size_t{1} << 26, 0.0f));
  cudaEvent_t busy_done = keep_busy(busy.p, busy.n * sizeof(float), 32, s);
  g.device_data.reset();
  EXPECT_EQ(cudaEventQuery(busy_done), cudaErrorNotReady)
      << "handing a result back waited for the device's other work";
  ASSERT_EQ(cudaEventSynchronize(busy_done), cudaSuccess);
  cudaEventDestroy(busy_done);
  cudaStreamDestroy(s);
}

TEST_F(DeviceCollectives, AReadQueuedBeforeTheLastOwnerLetsGoSeesTheResultItsMemoryReusedOrNot) {
  std::string why;
  if (!have_device(why)) GTEST_SKIP() << why;
  ringlet::init();
  const size_t n = size_t{1} << 22;
  const std::vector<float> first = ramp(n, 1.0f), second = ramp(n, 5000.0f);
  DeviceFloats a(first), b(second), seen(std::vector<float>(n, 0.0f));
  DeviceFloats busy(std::vector<float>(size_t{1} << 26, 0.0f));
  for (int round = 0; round < 4; ++round) {
    ringlet::Result r = ringlet::synchronize(
        ringlet::allgather_async("reused." + std::to_string(round), a.tensor()));
    // On the default stream, behind milliseconds of work: a copy of the
    // result, queued before the result goes.
    cudaEvent_t busy_done = keep_busy(busy.p, busy.n * sizeof(float), 16, nullptr);
    ASSERT_EQ(cudaMemcpyAsync(seen.p, r.device_data.get(), n * sizeof(float),
                              cudaMemcpyDeviceToDevice, nullptr),
              cudaSuccess);
    r.device_data.reset();
    // The next results of the same size, written while the copy may still
    // wait: none may land in memory the copy has not read yet.
    for (int i = 0; i < 3; ++i) {
      ringlet::Result other = ringlet::synchronize(ringlet::allgather_async(
          "other." + std::to_string(round) + "." + std::to_string(i), b.tensor()));
      EXPECT_EQ(device_result(other), second);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(seen.read(), first) << "round " << round;
    cudaEventDestroy(busy_done);
  }
}

}  // namespace
