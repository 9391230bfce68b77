// The ringlet backend's send and recv: Ringlet's transfers (send_async and
// recv_async), named per pair of ranks and tag so that the n-th send from a
// rank to another with one tag meets that rank's n-th recv from it with the
// same tag, as torch.distributed's point-to-point calls are matched. They
// move bytes, so every dtype is served. The monitored barrier, Gloo's, on
// them.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"
#include "torch_c10d/backend.h"
#include "torch_c10d/tensor_views.h"
#include "torch_c10d/work.h"

namespace ringlet::torch_c10d {

Backend::Collective Backend::begin_transfer(c10d::OpType type, int peer, int tag,
                                            std::vector<at::Tensor> tensors) {
  const bool sends = type == c10d::OpType::SEND;
  const char* op = sends ? "send" : "recv";
  TORCH_CHECK(peer >= 0 && peer < getSize(), "ringlet: ", op, " to or from rank ", peer,
              ", which is not a rank of process group '", group_name_, "' of ", getSize());
  TORCH_CHECK(peer != getRank(), "ringlet: rank ", getRank(), " of process group '", group_name_,
              "' cannot ", op, sends ? " to" : " from", " itself");
  const int from = sends ? getRank() : peer;
  const int to = sends ? peer : getRank();
  uint64_t count;
  {
    std::lock_guard lock(transfers_mutex_);
    count = transfers_[{from, to, tag}]++;
  }
  Collective c;
  c.name = "torch." + group_name_ + ".p2p." + std::to_string(from) + "." + std::to_string(to) +
           "." + std::to_string(tag) + "." + std::to_string(count);
  c.what = std::string(op) + " #" + std::to_string(count) + " from rank " + std::to_string(from) +
           " to rank " + std::to_string(to) + " (tag " + std::to_string(tag) +
           ") of process group '" + group_name_ + "' on rank " + std::to_string(getRank());
  // The profiler's record of a send or a recv shows its tensor's shape, as
  // Gloo's does for both.
  std::optional<std::vector<at::Tensor>> inputs = tensors;
  c.work = c10::make_intrusive<Work>(getRank(), type, sends ? "ringlet:send" : "ringlet:recv",
                                     std::move(tensors), c.what, inputs);
  return c;
}

c10::intrusive_ptr<c10d::Work> Backend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  check_one(tensors, "send");
  Collective c = begin_transfer(c10d::OpType::SEND, dst, tag, tensors);
  at::Tensor buf = staged(tensors[0]);
  const int to = global_ranks_[dst];
  auto handle =
      submit(c.what, [&] { return ringlet::send_async(c.name, as_bytes(buf), to, process_set_); });
  // The staged copy lives until the bytes have left.
  c.work->start({handle}, [buf](std::vector<ringlet::Result>&) {});
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  check_one(tensors, "recv");
  Collective c = begin_transfer(c10d::OpType::RECV, src, tag, tensors);
  at::Tensor user = tensors[0];
  at::Tensor buf = staged(user);
  const int from = global_ranks_[src];
  auto handle = submit(
      c.what, [&] { return ringlet::recv_async(c.name, as_bytes(buf), from, process_set_); });
  c.work->start({handle}, [user, buf](std::vector<ringlet::Result>&) mutable {
    if (!user.is_same(buf)) user.copy_(buf);
  });
  return c.work;
}

namespace {

using Clock = std::chrono::steady_clock;

// One byte a transfer moves. A transfer that timed out may still complete
// later (the late rank arrives) and write it: a byte no completed transfer
// released stays allocated.
struct Token {
  uint8_t byte = 1;
  int64_t handle = 0;
  ringlet::Tensor tensor() { return ringlet::Tensor{&byte, ringlet::DataType::kUInt8, {1}}; }
};

std::chrono::milliseconds left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// Waits for a transfer that completed; a failure (a lost peer) becomes
// PyTorch's error naming the barrier.
void finish(Token* token, const std::string& what) {
  try {
    ringlet::synchronize(token->handle);
  } catch (const ringlet::Error& e) {
    TORCH_CHECK(false, "ringlet: ", what, ": ", e.what());
  }
  delete token;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

void Backend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  const int me = getRank(), n = getSize();
  const uint64_t k = monitored_barriers_++;
  if (n == 1) return;
  const auto deadline = Clock::now() + opts.timeout;
  const auto ms = std::to_string(opts.timeout.count());
  const std::string what = "monitored_barrier #" + std::to_string(k) + " of process group '" +
                           group_name_ + "' on rank " + std::to_string(me);
  auto name = [&](int from, int to) {
    return "torch." + group_name_ + ".monitored_barrier." + std::to_string(k) + "." +
           std::to_string(from) + "." + std::to_string(to);
  };
  if (me != 0) {
    auto* arrived = new Token;
    auto* released = new Token;
    arrived->handle = submit(what, [&] {
      return ringlet::send_async(name(me, 0), arrived->tensor(), global_ranks_[0], process_set_);
    });
    released->handle = submit(what, [&] {
      return ringlet::recv_async(name(0, me), released->tensor(), global_ranks_[0], process_set_);
    });
    TORCH_CHECK(ringlet::wait_for(released->handle, left(deadline)), "ringlet: [Rank ", me,
                "]: ", what, ": rank 0 did not release it within ", ms,
                " ms; rank 0's error names the ranks that did not arrive");
    finish(released, what);
    finish(arrived, what);
    return;
  }
  std::vector<Token*> arrivals(n, nullptr);
  for (int r = 1; r < n; ++r) {
    arrivals[r] = new Token;
    arrivals[r]->handle = submit(what, [&] {
      return ringlet::recv_async(name(r, 0), arrivals[r]->tensor(), global_ranks_[r], process_set_);
    });
  }
  std::vector<int> missing;
  for (int r = 1; r < n; ++r) {
    if (!ringlet::wait_for(arrivals[r]->handle, left(deadline))) {
      missing.push_back(r);
      if (!waitAllRanks) break;
      continue;
    }
    finish(arrivals[r], what);
  }
  TORCH_CHECK(missing.empty(), "ringlet: [Rank 0]: ", missing.size() == 1 ? "Rank " : "Ranks ",
              rank_list(missing), " failed to pass monitoredBarrier in ", ms, " ms (", what, ")");
  std::vector<Token*> releases;
  for (int r = 1; r < n; ++r) {
    releases.push_back(new Token);
    releases.back()->handle = submit(what, [&] {
      return ringlet::send_async(name(0, r), releases.back()->tensor(), global_ranks_[r],
                                 process_set_);
    });
  }
  for (Token* t : releases) finish(t, what);
}

}  // namespace ringlet::torch_c10d
