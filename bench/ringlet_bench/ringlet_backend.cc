// The benchmarked backend: Ringlet through its public C++ API, as users call it.
#include <cstring>
#include <stdexcept>

#include "backend.h"
#include "ringlet/ringlet.h"

namespace ringlet::bench {
namespace {

class RingletBackend : public Backend {
 public:
  RingletBackend() {
    ringlet::init();
    rank_ = ringlet::rank();
    size_ = ringlet::size();
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
        ringlet::allreduce(b.send, b.recv, c.layout.count, c.dtype, c.op);
        break;
      case Collective::kAllgather:
        ringlet::allgather(b.send, b.recv, counts_, c.dtype);
        break;
      case Collective::kBroadcast:
        if (!c.in_place && c.rank == c.root) {
          std::memcpy(b.recv, send_buf, c.layout.count * dtype_size(c.dtype));
        }
        ringlet::broadcast(b.recv, c.layout.count, c.dtype, c.root);
        break;
      case Collective::kReducescatter:
        ringlet::reducescatter(b.send, b.recv, counts_, c.dtype, c.op);
        break;
      case Collective::kAlltoall:
        ringlet::alltoall(b.send, counts_, b.recv, counts_, c.dtype);
        break;
    }
  }

  void barrier() override { ringlet::barrier(); }

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
};

}  // namespace

std::unique_ptr<Backend> make_ringlet_backend() { return std::make_unique<RingletBackend>(); }

}  // namespace ringlet::bench
