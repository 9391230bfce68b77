// join() and Horovod's *_op queries (rank_op, size_op, ...) as TensorFlow
// ops, whose values are read when the graph runs, not when it is built, so
// that a graph built in one job answers for the job it runs in.
#include <exception>

#include <ringlet/ringlet.h>

#include "status.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace ringlet::tensorflow_ops {
namespace {

namespace tf = ::tensorflow;

// Horovod's join(): this rank is out of data; returns the last rank to join.
// It blocks its thread until every rank has joined, as ringlet::join() does.
class JoinOp : public tf::OpKernel {
 public:
  explicit JoinOp(tf::OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(tf::OpKernelContext* ctx) override {
    int last = 0;
    try {
      last = join();
    } catch (...) {
      ctx->SetStatus(status_of(std::current_exception()));
      return;
    }
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({}), &out));
    out->scalar<int32_t>()() = last;
  }
};

// Horovod's value for a process set this rank does not know
// (HOROVOD_PROCESS_SET_ERROR_UNKNOWN_SET).
constexpr int kUnknownSet = -3;

// A process-set query that answers kUnknownSet for an unknown set; before
// init() it throws like every other call.
int set_query(int id, int (*query)(int)) {
  if (!is_initialized()) return size();  // throws: not initialized
  try {
    return query(id);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument) return kUnknownSet;
    throw;
  }
}

int world_rank(int) { return rank(); }
int world_local_rank(int) { return local_rank(); }
int world_local_size(int) { return local_size(); }
int world_cross_rank(int) { return cross_rank(); }
int world_cross_size(int) { return cross_size(); }
int set_size(int id) { return set_query(id, [](int i) { return process_set_size(i); }); }
int set_included(int id) {
  return set_query(id, [](int i) { return process_set_rank(i) >= 0 ? 1 : 0; });
}

// One int32 scalar read when the op runs, so that a graph built in one job
// answers for the job it runs in.
template <int (*kQuery)(int)>
class QueryOp : public tf::OpKernel {
 public:
  explicit QueryOp(tf::OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_));
  }

  void Compute(tf::OpKernelContext* ctx) override {
    int value = 0;
    try {
      value = kQuery(process_set_);
    } catch (...) {
      ctx->SetStatus(status_of(std::current_exception()));
      return;
    }
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({}), &out));
    out->scalar<int32_t>()() = value;
  }

 private:
  int process_set_ = 0;
};

}  // namespace
}  // namespace ringlet::tensorflow_ops

// Stateful, so that TensorFlow neither folds them into constants while it
// optimizes a graph nor prunes a join whose output goes unused.
REGISTER_OP("RingletJoin")
    .Output("last_rank: int32")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape)
    .Doc("Waits until every rank has joined; the last rank to join.");
REGISTER_KERNEL_BUILDER(Name("RingletJoin").Device(::tensorflow::DEVICE_CPU),
                        ringlet::tensorflow_ops::JoinOp);

// One query: an int32 scalar op of a process set's id (ignored by the
// world's queries), stateful like the join.
#define RINGLET_QUERY_OP(NAME, QUERY, DOC)                                               \
  REGISTER_OP(NAME)                                                                      \
      .Attr("process_set_id: int = 0")                                                   \
      .Output("value: int32")                                                            \
      .SetIsStateful()                                                                   \
      .SetShapeFn(::tensorflow::shape_inference::ScalarShape)                            \
      .Doc(DOC);                                                                         \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(::tensorflow::DEVICE_CPU),                   \
                          ringlet::tensorflow_ops::QueryOp<ringlet::tensorflow_ops::QUERY>)

RINGLET_QUERY_OP("RingletRank", world_rank, "This process's rank.");
RINGLET_QUERY_OP("RingletLocalRank", world_local_rank, "This process's rank on its host.");
RINGLET_QUERY_OP("RingletLocalSize", world_local_size, "The ranks on this host.");
RINGLET_QUERY_OP("RingletCrossRank", world_cross_rank, "This host's index among the hosts.");
RINGLET_QUERY_OP("RingletCrossSize", world_cross_size, "The hosts.");
RINGLET_QUERY_OP("RingletSize", set_size,
                 "The members of process set process_set_id (-3: an unknown set).");
RINGLET_QUERY_OP("RingletProcessSetIncluded", set_included,
                 "1 when this rank is a member of process set process_set_id, else 0 (-3: an "
                 "unknown set).");
