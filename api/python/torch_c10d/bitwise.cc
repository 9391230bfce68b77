// The ringlet backend's bitwise reductions (BAND, BOR, BXOR) of integer and
// bool tensors, which Ringlet's reductions do not take: an allgather of every
// rank's bytes, folded on each rank in group rank order. Bitwise reductions
// carry masks and flags, small tensors, for which moving n copies costs
// little more than a ring; the result is bit-identical on every rank.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "ringlet/ringlet.h"
#include "torch_c10d/backend.h"
#include "torch_c10d/tensor_views.h"
#include "torch_c10d/work.h"

namespace ringlet::torch_c10d {

bool is_bitwise(const c10d::ReduceOp& op) {
  const auto red = static_cast<c10d::ReduceOp::RedOpType>(op);
  return red == c10d::ReduceOp::BAND || red == c10d::ReduceOp::BOR || red == c10d::ReduceOp::BXOR;
}

c10::intrusive_ptr<c10d::Work> Backend::bitwise_allreduce(at::Tensor user, const c10d::ReduceOp& op,
                                                          c10d::OpType type, bool keep) {
  const char* what = type == c10d::OpType::REDUCE ? "reduce" : "all_reduce";
  const auto red = static_cast<c10d::ReduceOp::RedOpType>(op);
  TORCH_CHECK(at::isIntegralType(user.scalar_type(), /*includeBool=*/true), "ringlet: ", what,
              " with a bitwise ReduceOp takes integer or bool tensors, not ", user.scalar_type());
  Collective c = begin(type, std::vector<at::Tensor>{user}, std::vector<at::Tensor>{user});
  at::Tensor buf = staged(user);
  std::vector<int64_t> handles;
  if (buf.numel() > 0) {
    handles.push_back(submit(
        c.what, [&] { return ringlet::allgather_async(c.name, as_bytes(buf), process_set_); }));
  }
  const int size = getSize();
  c.work->start(handles, [user, buf, red, size,
                          keep](std::vector<ringlet::Result>& results) mutable {
    if (results.empty() || !keep) return;
    auto& data = results[0].data;
    TORCH_CHECK(data.size() == buf.nbytes() * size, "the ranks gathered ", data.size(),
                " bytes, not ", size, " x ", buf.nbytes(), ": the ranks' tensors differ in size");
    const at::Tensor all =
        at::from_blob(data.data(), {size, buf.numel()}, buf.options().device(at::kCPU));
    at::Tensor folded = all[0].clone();
    for (int r = 1; r < size; ++r) {
      if (red == c10d::ReduceOp::BAND) {
        folded.bitwise_and_(all[r]);
      } else if (red == c10d::ReduceOp::BOR) {
        folded.bitwise_or_(all[r]);
      } else {
        folded.bitwise_xor_(all[r]);
      }
    }
    user.copy_(folded.view(user.sizes()));
  });
  return c.work;
}

}  // namespace ringlet::torch_c10d
