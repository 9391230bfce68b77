// The CUDA kernels against the scalar reference of reference.h, written
// independently of both kernel sets (comparing with the CPU kernels would let
// a fault shared by the two descriptions pass). Every test needs a device:
// where there is none, it is skipped with the reason cudaGetDeviceCount gave.
#include <cuda_runtime_api.h>

#include <utility>

#include "reference.h"
#include "ringlet/kernels/cuda.h"

namespace ringlet::kernels::test {
namespace {

#define RINGLET_ASSERT_CUDA(expr)                                              \
  do {                                                                         \
    const cudaError_t err_ = (expr);                                           \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

// Device memory owned for the length of a test.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&data_, bytes == 0 ? 1 : bytes) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(other.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }
  cudaError_t upload(const void* host) { return cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice); }
  cudaError_t download(void* host) const { return cudaMemcpy(host, data_, bytes_, cudaMemcpyDeviceToHost); }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess) {
      GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount failed: " << cudaGetErrorString(err);
    }
    if (devices == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount reported 0 devices";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
  std::mt19937_64 rng_{2024};
};

TEST_F(CudaKernelsTest, ReduceMatchesReference) {
  for (DataType dtype : kAllDtypes) {
    for (ReduceOp op : kAllOps) {
      for (size_t n : {size_t{1}, size_t{31}, size_t{1000003}}) {
        SCOPED_TRACE(std::string(to_string(dtype)) + " " + std::string(to_string(op)) +
                     " n=" + std::to_string(n));
        const size_t bytes = n * dtype_size(dtype);
        std::vector<unsigned char> a(bytes), b(bytes), expected(bytes), gpu_out(bytes);
        fill_random(dtype, a.data(), n, rng_);
        fill_random(dtype, b.data(), n, rng_);
        ref_reduce(dtype, op, expected.data(), a.data(), b.data(), n);
        DeviceBuffer da(bytes), db(bytes);
        RINGLET_ASSERT_CUDA(da.upload(a.data()));
        RINGLET_ASSERT_CUDA(db.upload(b.data()));
        // In place on a, as the ring does.
        RINGLET_ASSERT_CUDA(cuda::reduce(dtype, op, da.get(), da.get(), db.get(), n, stream_));
        RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
        RINGLET_ASSERT_CUDA(da.download(gpu_out.data()));
        EXPECT_TRUE(same_values(dtype, expected.data(), gpu_out.data(), n));
      }
    }
  }
}

TEST_F(CudaKernelsTest, ReduceManyMatchesReference) {
  for (DataType dtype : kAllDtypes) {
    for (ReduceOp op : kAllOps) {
      const size_t n = 70001, k = 4, bytes = n * dtype_size(dtype);
      std::vector<std::vector<unsigned char>> host(k, std::vector<unsigned char>(bytes));
      std::vector<const void*> host_ptrs;
      std::vector<DeviceBuffer> dev;
      dev.reserve(k);
      std::vector<const void*> dev_ptrs;
      for (size_t j = 0; j < k; ++j) {
        fill_random(dtype, host[j].data(), n, rng_);
        host_ptrs.push_back(host[j].data());
        dev.emplace_back(bytes);
        RINGLET_ASSERT_CUDA(dev.back().upload(host[j].data()));
        dev_ptrs.push_back(dev.back().get());
      }
      std::vector<unsigned char> expected(bytes), gpu_out(bytes);
      ref_reduce_many(dtype, op, expected.data(), host_ptrs, n);
      DeviceBuffer ptrs(k * sizeof(void*));
      RINGLET_ASSERT_CUDA(ptrs.upload(dev_ptrs.data()));
      RINGLET_ASSERT_CUDA(cuda::reduce_many(dtype, op, dev[1].get(),
                                            static_cast<const void* const*>(ptrs.get()), k, n,
                                            stream_));
      RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
      RINGLET_ASSERT_CUDA(dev[1].download(gpu_out.data()));
      EXPECT_TRUE(same_values(dtype, expected.data(), gpu_out.data(), n))
          << to_string(dtype) << " " << to_string(op);
    }
  }
}

TEST_F(CudaKernelsTest, ScaleAndAverageMatchReference) {
  for (DataType dtype : kAllDtypes) {
    const size_t n = 100003, bytes = n * dtype_size(dtype);
    std::vector<unsigned char> host(bytes), expected(bytes), gpu_out(bytes);
    fill_random(dtype, host.data(), n, rng_);
    DeviceBuffer dev(bytes);
    for (double factor : {0.5, -3.0, 1.0 / 3.0}) {
      ref_scale_buffer(dtype, expected.data(), host.data(), n, factor);
      RINGLET_ASSERT_CUDA(dev.upload(host.data()));
      RINGLET_ASSERT_CUDA(cuda::scale(dtype, dev.get(), n, factor, stream_));
      RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
      RINGLET_ASSERT_CUDA(dev.download(gpu_out.data()));
      EXPECT_TRUE(same_values(dtype, expected.data(), gpu_out.data(), n))
          << to_string(dtype) << " x" << factor;
    }
    ref_finish_average(dtype, expected.data(), host.data(), n, 3);
    RINGLET_ASSERT_CUDA(dev.upload(host.data()));
    RINGLET_ASSERT_CUDA(cuda::finish_average(dtype, dev.get(), n, 3, stream_));
    RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
    RINGLET_ASSERT_CUDA(dev.download(gpu_out.data()));
    EXPECT_TRUE(same_values(dtype, expected.data(), gpu_out.data(), n)) << to_string(dtype);
  }
}

TEST_F(CudaKernelsTest, BatchedPackUnpackMatchReference) {
  const size_t counts[] = {1, 0, 7, 31, 4097, 100000, 3};
  for (DataType dtype : kAllDtypes) {
    const size_t elem = dtype_size(dtype);
    size_t total = 0, max_count = 0;
    std::vector<std::vector<unsigned char>> host;
    std::vector<DeviceBuffer> dev;
    dev.reserve(std::size(counts));
    std::vector<cuda::FusedSegment> segments;
    for (size_t c : counts) {
      host.emplace_back(c * elem);
      fill_random(dtype, host.back().data(), c, rng_);
      dev.emplace_back(c * elem);
      RINGLET_ASSERT_CUDA(dev.back().upload(host.back().data()));
      segments.push_back({dev.back().get(), total, c});
      total += c;
      max_count = std::max(max_count, c);
    }
    DeviceBuffer descriptors(segments.size() * sizeof(cuda::FusedSegment));
    RINGLET_ASSERT_CUDA(descriptors.upload(segments.data()));
    const auto* dev_segments = static_cast<const cuda::FusedSegment*>(descriptors.get());
    for (double factor : {1.0, 0.125}) {
      // Each tensor scaled as the reference computes it (factor 1: copied),
      // laid end to end.
      std::vector<unsigned char> expected(total * elem), gpu_fused(total * elem);
      for (size_t i = 0, offset = 0; i < host.size(); offset += counts[i], ++i) {
        if (factor == 1.0) {
          std::memcpy(expected.data() + offset * elem, host[i].data(), counts[i] * elem);
        } else {
          ref_scale_buffer(dtype, expected.data() + offset * elem, host[i].data(), counts[i], factor);
        }
      }
      DeviceBuffer fused(total * elem);
      RINGLET_ASSERT_CUDA(cuda::pack(dtype, fused.get(), dev_segments, segments.size(), max_count,
                                     factor, stream_));
      RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
      RINGLET_ASSERT_CUDA(fused.download(gpu_fused.data()));
      if (factor == 1.0) {
        EXPECT_EQ(expected, gpu_fused) << to_string(dtype);
      } else {
        EXPECT_TRUE(same_values(dtype, expected.data(), gpu_fused.data(), total))
            << to_string(dtype);
      }
    }
    // Unpack with factor 1 restores every tensor bit for bit.
    std::vector<unsigned char> fused_host(total * elem);
    for (size_t i = 0, offset = 0; i < host.size(); offset += counts[i], ++i) {
      std::memcpy(fused_host.data() + offset * elem, host[i].data(), counts[i] * elem);
    }
    DeviceBuffer fused(total * elem);
    RINGLET_ASSERT_CUDA(fused.upload(fused_host.data()));
    for (auto& d : dev) cudaMemset(d.get(), 0, 1);
    RINGLET_ASSERT_CUDA(cuda::unpack(dtype, fused.get(), dev_segments, segments.size(), max_count,
                                     1.0, stream_));
    RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
    for (size_t i = 0; i < host.size(); ++i) {
      std::vector<unsigned char> back(counts[i] * elem);
      RINGLET_ASSERT_CUDA(dev[i].download(back.data()));
      EXPECT_EQ(back, host[i]) << to_string(dtype) << " tensor " << i;
    }
  }
}

TEST_F(CudaKernelsTest, ConversionsMatchReference) {
  // All 65536 patterns one way, and random plus tie floats the other.
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> floats;
  for (uint32_t h = 0; h < 65536; ++h) {
    floats.push_back(ref_half_to_float(static_cast<uint16_t>(h)));
    uint32_t mid = (h << 16) | 0x8000u;
    float f;
    std::memcpy(&f, &mid, 4);
    floats.push_back(f);
  }
  for (int i = 0; i < 100000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng_());
    float f;
    std::memcpy(&f, &u, 4);
    floats.push_back(f);
  }
  DeviceBuffer d16(all.size() * 2), dwide(all.size() * 4), dfloats(floats.size() * 4),
      dnarrow(floats.size() * 2);
  RINGLET_ASSERT_CUDA(d16.upload(all.data()));
  RINGLET_ASSERT_CUDA(dfloats.upload(floats.data()));
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    const bool half = dtype == DataType::kFloat16;
    auto* wide_out = static_cast<float*>(dwide.get());
    auto* narrow_out = static_cast<uint16_t*>(dnarrow.get());
    RINGLET_ASSERT_CUDA(half ? cuda::half_to_float(wide_out, static_cast<uint16_t*>(d16.get()), all.size(), stream_)
                             : cuda::bfloat16_to_float(wide_out, static_cast<uint16_t*>(d16.get()), all.size(), stream_));
    RINGLET_ASSERT_CUDA(half ? cuda::float_to_half(narrow_out, static_cast<float*>(dfloats.get()), floats.size(), stream_)
                             : cuda::float_to_bfloat16(narrow_out, static_cast<float*>(dfloats.get()), floats.size(), stream_));
    RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
    std::vector<float> wide(all.size()), expected_wide(all.size());
    std::vector<uint16_t> narrow(floats.size()), expected_narrow(floats.size());
    RINGLET_ASSERT_CUDA(dwide.download(wide.data()));
    RINGLET_ASSERT_CUDA(dnarrow.download(narrow.data()));
    for (size_t i = 0; i < all.size(); ++i) expected_wide[i] = widen16(dtype, all[i]);
    for (size_t i = 0; i < floats.size(); ++i) expected_narrow[i] = narrow16(dtype, floats[i]);
    EXPECT_TRUE(same_values(DataType::kFloat32, expected_wide.data(), wide.data(), wide.size()))
        << to_string(dtype) << " -> float";
    EXPECT_TRUE(same_values(dtype, expected_narrow.data(), narrow.data(), narrow.size()))
        << "float -> " << to_string(dtype);
  }
}

TEST_F(CudaKernelsTest, InvalidArgumentsAreReported) {
  EXPECT_EQ(cuda::reduce(static_cast<DataType>(99), ReduceOp::kSum, nullptr, nullptr, nullptr, 1,
                         stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::finish_average(DataType::kFloat32, nullptr, 1, 0, stream_),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace ringlet::kernels::test
