// The attributes of Ringlet's reductions (allreduce, reducescatter) and
// broadcast ops (REGISTER_OP in ringlet_tf_ops.cc), read alike by their
// kernels there and by the XLA kernels (xla_ops.cc).
#pragma once

#include <string>
#include <vector>

#include "ringlet/ringlet.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace ringlet::tensorflow_ops {

struct ReductionAttributes {
  ReduceOp op = ReduceOp::kAvg;
  float prescale = 1.0f;
  float postscale = 1.0f;
  int process_set = 0;
  std::vector<std::string> names;

  // A missing or mistyped attribute fails the kernel's construction.
  explicit ReductionAttributes(::tensorflow::OpKernelConstruction* c) {
    int reduce_op = 0;
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &reduce_op));
    OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale));
    OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &names));
    op = static_cast<ReduceOp>(reduce_op);
  }
};

struct BroadcastAttributes {
  int root = 0;  // a global rank
  int process_set = 0;
  std::string name;

  explicit BroadcastAttributes(::tensorflow::OpKernelConstruction* c) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &name));
  }
};

}  // namespace ringlet::tensorflow_ops
