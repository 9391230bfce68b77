// reduce and reduce_many: the entry points that pick (dtype, op, ISA) and hand
// over to the loops in loops.inc.
#include "isa_loops.h"

namespace ringlet::kernels::cpu {

void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count,
            Store store) {
  const bool stream = store == Store::kStream;
  const bool avx2 = detail::use_avx2();
  detail::visit_dtype(dtype, [&](auto kind) {
    using Kind = decltype(kind);
    detail::visit_op(op, [&](auto op_tag) {
      using Op = typename decltype(op_tag)::template Fn<typename Kind::Compute>;
      if (count == 0) return;
      if (avx2) {
        avx2::reduce2<Op, Kind>(out, a, b, count, stream);
      } else {
        base::reduce2<Op, Kind>(out, a, b, count, stream);
      }
    });
  });
}

void reduce_many(DataType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                 size_t count, Store store) {
  if (inputs.empty()) detail::bad_argument("number of reduce_many inputs", 0);
  const bool stream = store == Store::kStream;
  const bool avx2 = detail::use_avx2();
  detail::visit_dtype(dtype, [&](auto kind) {
    using Kind = decltype(kind);
    detail::visit_op(op, [&](auto op_tag) {
      using Op = typename decltype(op_tag)::template Fn<typename Kind::Compute>;
      if (count == 0) return;
      if (avx2) {
        avx2::reduce_many<Op, Kind>(out, inputs.data(), inputs.size(), count, stream);
      } else {
        base::reduce_many<Op, Kind>(out, inputs.data(), inputs.size(), count, stream);
      }
    });
  });
}

}  // namespace ringlet::kernels::cpu
