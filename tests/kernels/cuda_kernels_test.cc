// The CUDA kernels against the scalar reference of reference.h, written
// independently of both kernel sets (comparing with the CPU kernels would let
// a fault shared by the two descriptions pass). Every test needs a device:
// where there is none, it is skipped with the reason cudaGetDeviceCount gave.
#include <cuda_runtime_api.h>

#include <utility>

#include "reference.h"
#include "ringlet/kernels/cuda.h"
#include "ringlet/kernels/ops.h"

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
  // `bytes` past the start: tests place data off the allocation's alignment.
  void* at(size_t bytes) const { return static_cast<unsigned char*>(data_) + bytes; }
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

// Element shifts of (a, b) off a 256-byte boundary: both aligned, both off by
// the same amount (the vector path after a scalar head), and off by different
// amounts (the element-by-element path).
constexpr std::pair<size_t, size_t> kShifts[] = {{0, 0}, {1, 1}, {3, 3}, {0, 1}};

TEST_F(CudaKernelsTest, ReduceMatchesReference) {
  for (DataType dtype : kAllDtypes) {
    for (ReduceOp op : kAllOps) {
      for (size_t n : {size_t{1}, size_t{31}, size_t{4099}, size_t{1000003}}) {
        for (auto [shift_a, shift_b] : kShifts) {
          SCOPED_TRACE(std::string(to_string(dtype)) + " " + std::string(to_string(op)) +
                       " n=" + std::to_string(n) + " shifts " + std::to_string(shift_a) + "," +
                       std::to_string(shift_b));
          const size_t elem = dtype_size(dtype), bytes = n * elem;
          std::vector<unsigned char> a(bytes), b(bytes), expected(bytes), gpu_out(bytes);
          fill_random(dtype, a.data(), n, rng_);
          fill_random(dtype, b.data(), n, rng_);
          ref_reduce(dtype, op, expected.data(), a.data(), b.data(), n);
          DeviceBuffer da(bytes + 64), db(bytes + 64);
          void* pa = da.at(shift_a * elem);
          void* pb = db.at(shift_b * elem);
          RINGLET_ASSERT_CUDA(cudaMemcpy(pa, a.data(), bytes, cudaMemcpyHostToDevice));
          RINGLET_ASSERT_CUDA(cudaMemcpy(pb, b.data(), bytes, cudaMemcpyHostToDevice));
          // In place on a, as the ring does.
          RINGLET_ASSERT_CUDA(cuda::reduce(dtype, op, pa, pa, pb, n, stream_));
          RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
          RINGLET_ASSERT_CUDA(cudaMemcpy(gpu_out.data(), pa, bytes, cudaMemcpyDeviceToHost));
          EXPECT_TRUE(same_values(dtype, expected.data(), gpu_out.data(), n));
        }
      }
    }
  }
}

// An allreduce's part between ranks' own buffers: three inputs, written to
// three outputs, the second in place on its input, the third shifted off
// alignment in one case; the prescale applied as pack applies it, and the
// result scaled once by the postscale (divided by the contributors for
// kAvg), as scale applies it.
TEST_F(CudaKernelsTest, ReduceManyToAllMatchesReference) {
  struct Case {
    size_t third_shift;
    double prescale, postscale;
  };
  const Case cases[] = {{0, 1.0, 1.0}, {1, 1.0, 1.0}, {0, 0.5, 3.0}, {1, 2.5, 0.7}};
  for (DataType dtype : kAllDtypes) {
    for (ReduceOp op : kAllOps) {
      for (const Case& c : cases) {
        const size_t n = 70001, k = 3, elem = dtype_size(dtype), bytes = n * elem;
        const int ranks = static_cast<int>(k);
        std::vector<std::vector<unsigned char>> host(k, std::vector<unsigned char>(bytes));
        std::vector<std::vector<unsigned char>> scaled(k, std::vector<unsigned char>(bytes));
        std::vector<const void*> scaled_ptrs;
        std::vector<DeviceBuffer> dev;
        dev.reserve(2 * k);
        std::vector<const void*> inputs;
        std::vector<void*> outputs;
        for (size_t j = 0; j < k; ++j) {
          fill_random(dtype, host[j].data(), n, rng_);
          if (c.prescale != 1.0) {
            ref_scale_buffer(dtype, scaled[j].data(), host[j].data(), n, c.prescale);
          } else {
            scaled[j] = host[j];
          }
          scaled_ptrs.push_back(scaled[j].data());
          dev.emplace_back(bytes + 64);
          RINGLET_ASSERT_CUDA(
              cudaMemcpy(dev.back().get(), host[j].data(), bytes, cudaMemcpyHostToDevice));
          inputs.push_back(dev.back().get());
        }
        for (size_t j = 0; j < k; ++j) {
          if (j == 1) {
            outputs.push_back(const_cast<void*>(inputs[1]));
            continue;
          }
          dev.emplace_back(bytes + 64);
          outputs.push_back(dev.back().at(j == 2 ? c.third_shift * elem : 0));
        }
        std::vector<unsigned char> sum(bytes), expected(bytes), gpu_out(bytes);
        ref_reduce_many(dtype, op, sum.data(), scaled_ptrs, n);
        ref_finish(dtype, op, expected.data(), sum.data(), n, ranks, c.postscale);
        DeviceBuffer in_table(k * sizeof(void*)), out_table(k * sizeof(void*));
        RINGLET_ASSERT_CUDA(in_table.upload(inputs.data()));
        RINGLET_ASSERT_CUDA(out_table.upload(outputs.data()));
        RINGLET_ASSERT_CUDA(cuda::reduce_many_to_all(
            dtype, op, static_cast<void* const*>(out_table.get()), ranks,
            static_cast<const void* const*>(in_table.get()), ranks, n, ranks, c.prescale,
            c.postscale, stream_));
        RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
        for (size_t j = 0; j < k; ++j) {
          RINGLET_ASSERT_CUDA(
              cudaMemcpy(gpu_out.data(), outputs[j], bytes, cudaMemcpyDeviceToHost));
          EXPECT_TRUE(same_values(dtype, expected.data(), gpu_out.data(), n))
              << to_string(dtype) << " " << to_string(op) << " output " << j << " scales "
              << c.prescale << ", " << c.postscale << " third output shifted " << c.third_shift;
        }
      }
    }
  }
}

TEST_F(CudaKernelsTest, ScaleAndAverageMatchReference) {
  for (DataType dtype : kAllDtypes) {
    for (size_t shift : {size_t{0}, size_t{1}}) {
      const size_t n = 100003, elem = dtype_size(dtype), bytes = n * elem;
      std::vector<unsigned char> host(bytes), expected(bytes), gpu_out(bytes);
      fill_random(dtype, host.data(), n, rng_);
      DeviceBuffer dev(bytes + 64);
      void* p = dev.at(shift * elem);
      auto upload = [&] { return cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice); };
      auto download = [&] { return cudaMemcpy(gpu_out.data(), p, bytes, cudaMemcpyDeviceToHost); };
      for (double factor : {0.5, -3.0, 1.0 / 3.0, 1.5, 2.5, 0.7}) {
        ref_scale_buffer(dtype, expected.data(), host.data(), n, factor);
        RINGLET_ASSERT_CUDA(upload());
        RINGLET_ASSERT_CUDA(cuda::scale(dtype, p, n, factor, stream_));
        RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
        RINGLET_ASSERT_CUDA(download());
        EXPECT_TRUE(same_values(dtype, expected.data(), gpu_out.data(), n))
            << to_string(dtype) << " x" << factor << " shift " << shift;
      }
      // An average over 3 ranks with a postscale: the sum scaled once.
      for (double post : {1.0, 1.5}) {
        ref_finish(dtype, ReduceOp::kAvg, expected.data(), host.data(), n, 3, post);
        RINGLET_ASSERT_CUDA(upload());
        RINGLET_ASSERT_CUDA(
            cuda::scale(dtype, p, n, ops::result_scale(ReduceOp::kAvg, post, 3), stream_));
        RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
        RINGLET_ASSERT_CUDA(download());
        EXPECT_TRUE(same_values(dtype, expected.data(), gpu_out.data(), n))
            << to_string(dtype) << " average, post " << post << " shift " << shift;
      }
    }
  }
}

// A fusion buffer's layout: the tensors' element counts, whether each slot
// starts on 16 bytes (the GPU planner's padding) or right after the last, and
// the element shift of every k-th tensor's own memory.
struct PackLayout {
  std::string name;
  std::vector<size_t> counts;
  bool padded;
  size_t shift_every;  // 0: no tensor shifted
};

std::vector<PackLayout> pack_layouts() {
  std::vector<size_t> many(300, 37);
  many.push_back(1000003);
  many.push_back(5);
  return {{"back to back", {1, 0, 7, 31, 4097, 100000, 3}, false, 0},
          {"padded", {1, 0, 7, 31, 4097, 100000, 3}, true, 0},
          {"padded, shifted tensors", {9, 4097, 100000, 64, 3}, true, 2},
          {"many small and one large", many, true, 0}};
}

TEST_F(CudaKernelsTest, BatchedPackUnpackMatchReference) {
  for (const PackLayout& layout : pack_layouts()) {
    for (DataType dtype : kAllDtypes) {
      SCOPED_TRACE(layout.name + " " + std::string(to_string(dtype)));
      const size_t elem = dtype_size(dtype), align = 16 / elem;
      const size_t n_tensors = layout.counts.size();
      std::vector<std::vector<unsigned char>> host;
      std::vector<DeviceBuffer> dev;
      dev.reserve(n_tensors);
      std::vector<cuda::FusedSegment> segments;
      size_t total = 0;
      for (size_t i = 0; i < n_tensors; ++i) {
        const size_t c = layout.counts[i];
        const size_t shift = layout.shift_every != 0 && i % layout.shift_every == 1 ? 1 : 0;
        if (layout.padded) total = (total + align - 1) / align * align;
        host.emplace_back(c * elem);
        fill_random(dtype, host.back().data(), c, rng_);
        dev.emplace_back(c * elem + 64);
        void* p = dev.back().at(shift * elem);
        RINGLET_ASSERT_CUDA(cudaMemcpy(p, host.back().data(), c * elem, cudaMemcpyHostToDevice));
        segments.push_back({p, total, c});
        total += c;
      }
      DeviceBuffer descriptors(segments.size() * sizeof(cuda::FusedSegment));
      RINGLET_ASSERT_CUDA(descriptors.upload(segments.data()));
      const auto* dev_segments = static_cast<const cuda::FusedSegment*>(descriptors.get());
      const int num = static_cast<int>(segments.size());
      for (double factor : {1.0, 0.125}) {
        // Each tensor scaled as the reference computes it (factor 1: copied),
        // at its slot; the padding is left as it was (zero).
        std::vector<unsigned char> expected(total * elem, 0), gpu_fused(total * elem);
        for (size_t i = 0; i < n_tensors; ++i) {
          unsigned char* slot = expected.data() + segments[i].offset * elem;
          if (factor == 1.0) {
            std::memcpy(slot, host[i].data(), layout.counts[i] * elem);
          } else {
            ref_scale_buffer(dtype, slot, host[i].data(), layout.counts[i], factor);
          }
        }
        DeviceBuffer fused(total * elem);
        RINGLET_ASSERT_CUDA(cudaMemset(fused.get(), 0, total * elem));
        RINGLET_ASSERT_CUDA(
            cuda::pack(dtype, fused.get(), dev_segments, num, total, factor, stream_));
        RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
        RINGLET_ASSERT_CUDA(fused.download(gpu_fused.data()));
        if (factor == 1.0) {
          EXPECT_EQ(expected, gpu_fused);
        } else {
          EXPECT_TRUE(same_values(dtype, expected.data(), gpu_fused.data(), total));
        }
      }
      // Unpack with factor 1 restores every tensor bit for bit; with a factor
      // each comes back scaled.
      std::vector<unsigned char> fused_host(total * elem, 0);
      for (size_t i = 0; i < n_tensors; ++i) {
        std::memcpy(fused_host.data() + segments[i].offset * elem, host[i].data(),
                    layout.counts[i] * elem);
      }
      DeviceBuffer fused(total * elem);
      RINGLET_ASSERT_CUDA(fused.upload(fused_host.data()));
      for (double factor : {1.0, 4.0}) {
        for (size_t i = 0; i < n_tensors; ++i) {
          RINGLET_ASSERT_CUDA(cudaMemset(segments[i].tensor, 0, layout.counts[i] * elem));
        }
        RINGLET_ASSERT_CUDA(
            cuda::unpack(dtype, fused.get(), dev_segments, num, total, factor, stream_));
        RINGLET_ASSERT_CUDA(cudaStreamSynchronize(stream_));
        for (size_t i = 0; i < n_tensors; ++i) {
          const size_t c = layout.counts[i];
          std::vector<unsigned char> back(c * elem), expected(c * elem);
          RINGLET_ASSERT_CUDA(
              cudaMemcpy(back.data(), segments[i].tensor, c * elem, cudaMemcpyDeviceToHost));
          if (factor == 1.0) {
            EXPECT_EQ(back, host[i]) << "tensor " << i;
          } else {
            ref_scale_buffer(dtype, expected.data(), host[i].data(), c, factor);
            EXPECT_TRUE(same_values(dtype, expected.data(), back.data(), c))
                << "tensor " << i << " x" << factor;
          }
        }
      }
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
  EXPECT_EQ(cuda::reduce_many_to_all(DataType::kFloat32, ReduceOp::kSum, nullptr, 1, nullptr, 0, 1,
                                     1, 1.0, 1.0, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::reduce_many_to_all(DataType::kFloat32, ReduceOp::kAvg, nullptr, 1, nullptr, 2, 1,
                                     0, 1.0, 1.0, stream_),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace ringlet::kernels::test
