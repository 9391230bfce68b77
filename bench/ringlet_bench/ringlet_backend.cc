// The benchmarked backend: Ringlet through its public C++ API, as users call it.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>

#include "backend.h"
#include "device_buffers.h"
#include "ringlet/ringlet.h"

namespace ringlet::bench {
namespace {

// A page-aligned buffer for the extra tensors of --tensors, touched at
// allocation so that no page fault lands in a timed op.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) {
    const size_t size = (std::max<size_t>(bytes, 64) + 4095) / 4096 * 4096;
    data = std::aligned_alloc(4096, size);
    if (!data) throw std::bad_alloc();
    std::memset(data, 0, size);
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data = nullptr;
};

class RingletBackend : public Backend {
 public:
  explicit RingletBackend(const Options& o) : tensors_(o.tensors) {
    ringlet::init();
    rank_ = ringlet::rank();
    size_ = ringlet::size();
    // Stable names, so that the runtime's response cache hits from the
    // second iteration on, as in training; the order is shuffled per rank
    // with a seed of its own, and again each iteration.
    for (int i = 0; i < tensors_; ++i) names_.push_back("bench.t" + std::to_string(i));
    order_.resize(static_cast<size_t>(tensors_));
    for (int i = 0; i < tensors_; ++i) order_[static_cast<size_t>(i)] = i;
    handles_.resize(static_cast<size_t>(tensors_));
    rng_.seed(0x5eed + 7919u * static_cast<unsigned>(rank_));
  }
  ~RingletBackend() override { ringlet::shutdown(); }

  std::string_view name() const override { return "ring"; }
  std::string_view impl() const override { return "ringlet"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void run(const Case& c, const OpBuffers& b, const void* send_buf) override {
    // The per-rank count vectors are rebuilt only when the count changes, so
    // the timed op does not allocate.
    if (counts_.size() != static_cast<size_t>(size_) || counts_[0] != c.layout.count) {
      counts_.assign(static_cast<size_t>(size_), c.layout.count);
    }
    switch (c.collective) {
      case Collective::kAllreduce:
        if (b.device >= 0) {
          run_on_device(c, b);
        } else if (tensors_ > 0) {
          run_tensors(c, b);
        } else {
          ringlet::allreduce(b.send, b.recv, c.layout.count, c.dtype, c.op);
        }
        break;
      case Collective::kAllgather:
        if (b.device >= 0) {
          run_on_device(c, b);
        } else {
          ringlet::allgather(b.send, b.recv, counts_, c.dtype);
        }
        break;
      case Collective::kBroadcast:
        if (!c.in_place && c.rank == c.root) {
          const size_t bytes = c.layout.count * dtype_size(c.dtype);
          if (b.device >= 0) {
            device_copy(b.recv, send_buf, bytes);
          } else {
            std::memcpy(b.recv, send_buf, bytes);
          }
        }
        if (b.device >= 0) {
          run_on_device(c, b);
        } else {
          ringlet::broadcast(b.recv, c.layout.count, c.dtype, c.root);
        }
        break;
      case Collective::kReducescatter:
        if (b.device >= 0) {
          run_on_device(c, b);
        } else {
          ringlet::reducescatter(b.send, b.recv, counts_, c.dtype, c.op);
        }
        break;
      case Collective::kAlltoall:
        if (b.device >= 0) {
          run_on_device(c, b);
        } else {
          ringlet::alltoall(b.send, counts_, b.recv, counts_, c.dtype);
        }
        break;
    }
  }

  void barrier() override { ringlet::barrier(); }

  // --device cuda: one named collective of device tensors, waited for. An
  // allreduce or broadcast writes b.recv; the others' output is memory the
  // runtime allocated, kept until collect().
  void run_on_device(const Case& c, const OpBuffers& b) {
    const int64_t n = size_;
    const int64_t count = static_cast<int64_t>(c.layout.count);
    const Tensor out{b.recv, c.dtype, {count}, b.device};
    auto input = [&](int64_t elems) {
      return Tensor{const_cast<void*>(b.send), c.dtype, {elems}, b.device};
    };
    switch (c.collective) {
      case Collective::kAllreduce:
        ringlet::synchronize(ringlet::allreduce_async("bench.device", input(count), out, c.op));
        break;
      case Collective::kBroadcast:
        ringlet::synchronize(ringlet::broadcast_async("bench.device.broadcast", out, c.root));
        break;
      case Collective::kAllgather:
        output_ = ringlet::synchronize(ringlet::allgather_async("bench.device", input(count)));
        break;
      case Collective::kReducescatter:
        output_ = ringlet::synchronize(
            ringlet::reducescatter_async("bench.device", input(count * n), c.op));
        break;
      case Collective::kAlltoall:
        output_ = ringlet::synchronize(ringlet::alltoall_async("bench.device", input(count * n)));
        break;
    }
  }

  void collect(const Case&, const OpBuffers& b, bool deliver) override {
    if (deliver && output_.device_data) {
      device_copy(b.recv, output_.device_data.get(), output_.device_bytes);
    }
    output_ = {};
  }

  // One iteration of --tensors N: tensor 0 is the harness's (so the check
  // sees it); the others read the same input out of place, or run in place
  // on buffers of their own, whose values do not matter.
  void run_tensors(const Case& c, const OpBuffers& b) {
    const size_t bytes = c.layout.count * dtype_size(c.dtype);
    if (bytes != extra_bytes_) {
      extra_.clear();
      for (int i = 1; i < tensors_; ++i) extra_.push_back(std::make_unique<AlignedBuffer>(bytes));
      extra_bytes_ = bytes;
    }
    const std::vector<int64_t> shape{static_cast<int64_t>(c.layout.count)};
    std::shuffle(order_.begin(), order_.end(), rng_);
    for (size_t k = 0; k < order_.size(); ++k) {
      const int i = order_[k];
      void* in = const_cast<void*>(b.send);
      void* out = b.recv;
      if (i > 0) {
        out = extra_[static_cast<size_t>(i - 1)]->data;
        if (c.in_place) in = out;
      }
      handles_[k] = ringlet::allreduce_async(names_[static_cast<size_t>(i)], {in, c.dtype, shape},
                                             {out, c.dtype, shape}, c.op);
    }
    for (int64_t h : handles_) ringlet::synchronize(h);
  }

  void combine(std::span<double> values, Combine how) override {
    ReduceOp op = how == Combine::kSum ? ReduceOp::kSum
                  : how == Combine::kMin ? ReduceOp::kMin
                                         : ReduceOp::kMax;
    ringlet::allreduce(values.data(), values.data(), values.size(), DataType::kFloat64, op);
  }

  std::vector<std::string> gather_strings(const std::string& mine, size_t width) override {
    std::vector<char> in(width, '\0'), out(width * static_cast<size_t>(size_), '\0');
    std::memcpy(in.data(), mine.data(), std::min(mine.size(), width - 1));
    std::vector<size_t> counts(static_cast<size_t>(size_), width);
    ringlet::allgather(in.data(), out.data(), counts, DataType::kUInt8);
    std::vector<std::string> all;
    for (int r = 0; r < size_; ++r) all.emplace_back(out.data() + r * width);
    return all;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  std::vector<size_t> counts_;
  // --tensors
  int tensors_ = 0;
  std::vector<std::string> names_;
  std::vector<int> order_;
  std::vector<int64_t> handles_;
  Result output_;  // --device cuda: the last op's runtime-allocated output
  std::vector<std::unique_ptr<AlignedBuffer>> extra_;
  size_t extra_bytes_ = 0;
  std::mt19937 rng_;
};

}  // namespace

std::unique_ptr<Backend> make_ringlet_backend(const Options& options) {
  return std::make_unique<RingletBackend>(options);
}

}  // namespace ringlet::bench
