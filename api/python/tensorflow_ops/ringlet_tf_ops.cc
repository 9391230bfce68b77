// TensorFlow ops for ringlet.tensorflow's hot collectives: allreduce, grouped
// allreduce, allgather and broadcast, on the tensors' own buffers.
//
// Each kernel is asynchronous: it submits its collective to Ringlet's runtime
// and returns, and the runtime's thread finishes the op when the collective
// completes (ringlet::synchronize_then). So TensorFlow may run every gradient's
// allreduce of a step at once, the runtime fuses them, and no inter-op thread
// is held while the ranks negotiate: ranks that start the same ops in
// different orders cannot starve each other of threads.
//
// Built against the TensorFlow that python3 imports at configure time, and
// loaded by ringlet/tensorflow/ops.py with tf.load_op_library; the gradients
// are registered there, in Python.
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ringlet/ringlet.h>

#include "absl/status/status.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace ringlet::tensorflow_ops {
namespace {

namespace tf = ::tensorflow;
using Done = tf::AsyncOpKernel::DoneCallback;

// The dtypes Ringlet reduces. The others only move, as bytes.
std::optional<DataType> reducible(tf::DataType t) {
  switch (t) {
    case tf::DT_FLOAT: return DataType::kFloat32;
    case tf::DT_DOUBLE: return DataType::kFloat64;
    case tf::DT_HALF: return DataType::kFloat16;
    case tf::DT_BFLOAT16: return DataType::kBFloat16;
    case tf::DT_INT8: return DataType::kInt8;
    case tf::DT_UINT8: return DataType::kUInt8;
    case tf::DT_INT32: return DataType::kInt32;
    case tf::DT_INT64: return DataType::kInt64;
    case tf::DT_INT16: return DataType::kInt16;
    case tf::DT_UINT16: return DataType::kUInt16;
    default: return std::nullopt;
  }
}

std::vector<int64_t> dims_of(const tf::TensorShape& shape) {
  std::vector<int64_t> dims;
  for (int i = 0; i < shape.dims(); ++i) dims.push_back(shape.dim_size(i));
  return dims;
}

// A view for a collective that reduces: the dtype must be one Ringlet reduces.
ringlet::Tensor reduced_view(const tf::Tensor& t) {
  return {const_cast<char*>(t.tensor_data().data()), *reducible(t.dtype()), dims_of(t.shape())};
}

// A view for a collective that only moves data: any fixed-size dtype, as
// bytes behind a last dimension of the element's size when Ringlet has no
// such dtype.
ringlet::Tensor moved_view(const tf::Tensor& t) {
  ringlet::Tensor v{const_cast<char*>(t.tensor_data().data()), DataType::kUInt8,
                    dims_of(t.shape())};
  if (auto dtype = reducible(t.dtype())) {
    v.dtype = *dtype;
  } else {
    v.shape.push_back(static_cast<int64_t>(tf::DataTypeSize(t.dtype())));
  }
  return v;
}

// Ringlet's error as TensorFlow's status, one status code per error code, so
// that ringlet/tensorflow/ops.py raises the same exception as the other
// frameworks do (its _EXCEPTION_OF_STATUS is this table read backwards).
absl::Status status_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    switch (e.code()) {
      case ErrorCode::kInvalidArgument: return absl::InvalidArgumentError(e.what());
      case ErrorCode::kNotInitialized: return absl::FailedPreconditionError(e.what());
      case ErrorCode::kConfig: return absl::UnknownError(e.what());
      case ErrorCode::kPeerLost: return absl::UnavailableError(e.what());
      case ErrorCode::kTimeout: return absl::DeadlineExceededError(e.what());
      case ErrorCode::kMismatch: return absl::DataLossError(e.what());
      case ErrorCode::kAborted: return absl::AbortedError(e.what());
      case ErrorCode::kInternal: return absl::InternalError(e.what());
    }
    return absl::InternalError(e.what());
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  } catch (...) {
    return absl::InternalError("ringlet: unknown exception");
  }
}

// A call this rank got wrong, in the words of the library's own refusals:
// "ringlet: <call> of '<name>' on rank N: <cause>".
absl::Status refusal(std::string_view call, const std::string& name, const std::string& cause) {
  std::string where = "ringlet: " + std::string(call) + " of '" + name + "'";
  if (is_initialized()) where += " on rank " + std::to_string(rank());
  return absl::InvalidArgumentError(where + ": " + cause);
}

// Strings, resources and variants have no bytes of their own to move.
absl::Status movable(std::string_view call, const std::string& name, tf::DataType dtype) {
  if (tf::DataTypeSize(dtype) > 0) return absl::OkStatus();
  return refusal(call, name, "dtype " + tf::DataTypeString(dtype) +
                                 " has no fixed element size, so it cannot be sent as bytes");
}

// Finishes an op after its collectives: `finish` runs on the last result (on
// the runtime's thread) and may fill outputs. The first error wins.
struct Pending {
  Pending(tf::OpKernelContext* ctx, Done done, size_t count)
      : ctx(ctx), done(std::move(done)), left(count) {}
  void set_status(const absl::Status& status) {
    std::lock_guard lock(mu);
    ctx->SetStatus(status);
  }
  tf::OpKernelContext* ctx;
  Done done;
  std::mutex mu;  // a group's results may arrive on two threads
  size_t left;    // guarded by mu
  std::function<absl::Status(ringlet::Result&)> finish;  // for a single collective
};

void fail_now(tf::OpKernelContext* ctx, const Done& done) {
  ctx->SetStatus(status_of(std::current_exception()));
  done();
}

void finish_when_done(const std::shared_ptr<Pending>& pending,
                      const std::vector<int64_t>& handles) {
  for (int64_t handle : handles) {
    synchronize_then(handle, [pending](ringlet::Result result, std::exception_ptr error) {
      if (error) {
        pending->set_status(status_of(error));
      } else if (pending->finish) {
        absl::Status status = pending->finish(result);
        if (!status.ok()) pending->set_status(status);
      }
      bool last = false;
      {
        std::lock_guard lock(pending->mu);
        last = --pending->left == 0;
      }
      if (last) pending->done();
    });
  }
}

// ------------------------------------------------------------------ allreduce

class AllreduceOp : public tf::AsyncOpKernel {
 public:
  explicit AllreduceOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {
    int op = 0;
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &op));
    OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale_));
    OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale_));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &names_));
    op_ = static_cast<ReduceOp>(op);
  }

  void ComputeAsync(tf::OpKernelContext* ctx, Done done) override {
    const int n = ctx->num_inputs();
    OP_REQUIRES_ASYNC(ctx, static_cast<int>(names_.size()) == n,
                      refusal("allreduce", names_.empty() ? std::string() : names_[0],
                              std::to_string(n) + " tensors but " +
                                  std::to_string(names_.size()) + " names"),
                      done);
    std::vector<ringlet::Tensor> ins, outs;
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& in = ctx->input(i);
      tf::Tensor* out = nullptr;
      // Reduced in place when TensorFlow lets the op own its input's buffer.
      OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({i}, i, in.shape(), &out),
                           done);
      ins.push_back(reduced_view(in));
      outs.push_back(reduced_view(*out));
    }
    std::vector<int64_t> handles;
    try {
      if (n == 1) {
        handles.push_back(allreduce_async(names_[0], ins[0], outs[0], op_, prescale_, postscale_,
                                          process_set_));
      } else {
        handles = grouped_allreduce_async(names_, ins, outs, op_, prescale_, postscale_,
                                          process_set_);
      }
    } catch (...) {
      return fail_now(ctx, done);
    }
    finish_when_done(std::make_shared<Pending>(ctx, std::move(done), handles.size()), handles);
  }

 private:
  ReduceOp op_ = ReduceOp::kAvg;
  float prescale_ = 1.0f;
  float postscale_ = 1.0f;
  int process_set_ = 0;
  std::vector<std::string> names_;
};

// ------------------------------------------------------------------ allgather

class AllgatherOp : public tf::AsyncOpKernel {
 public:
  explicit AllgatherOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &name_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, Done done) override {
    const tf::Tensor& in = ctx->input(0);
    OP_REQUIRES_ASYNC(ctx, in.dims() >= 1,
                      refusal("allgather", name_, "a scalar has no first dimension to gather"),
                      done);
    OP_REQUIRES_OK_ASYNC(ctx, movable("allgather", name_, in.dtype()), done);
    const bool as_bytes = !reducible(in.dtype());
    int64_t handle = 0;
    try {
      handle = allgather_async(name_, moved_view(in), process_set_);
    } catch (...) {
      return fail_now(ctx, done);
    }
    auto pending = std::make_shared<Pending>(ctx, std::move(done), 1);
    pending->finish = [ctx, as_bytes](ringlet::Result& result) -> absl::Status {
      std::vector<int64_t> dims = result.shape;
      if (as_bytes) dims.pop_back();
      tf::TensorShape shape;
      TF_RETURN_IF_ERROR(tf::TensorShape::BuildTensorShape(dims, &shape));
      tf::Tensor* out = nullptr;
      TF_RETURN_IF_ERROR(ctx->allocate_output(0, shape, &out));
      if (!result.data.empty()) {
        std::memcpy(const_cast<char*>(out->tensor_data().data()), result.data.data(),
                    result.data.size());
      }
      return absl::OkStatus();
    };
    finish_when_done(pending, {handle});
  }

 private:
  int process_set_ = 0;
  std::string name_;
};

// ------------------------------------------------------------------ broadcast

class BroadcastOp : public tf::AsyncOpKernel {
 public:
  explicit BroadcastOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &name_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, Done done) override {
    const tf::Tensor& in = ctx->input(0);
    OP_REQUIRES_OK_ASYNC(ctx, movable("broadcast", name_, in.dtype()), done);
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, in.shape(), &out),
                         done);
    int64_t handle = 0;
    try {
      // Broadcast works in place: the root sends its output buffer, which
      // holds its input only once copied; elsewhere the output is overwritten.
      const bool copy = out->tensor_data().data() != in.tensor_data().data() &&
                        in.NumElements() > 0 && rank() == root_;
      if (copy) {
        std::memcpy(const_cast<char*>(out->tensor_data().data()), in.tensor_data().data(),
                    in.TotalBytes());
      }
      handle = broadcast_async(name_, moved_view(*out), root_, process_set_);
    } catch (...) {
      return fail_now(ctx, done);
    }
    finish_when_done(std::make_shared<Pending>(ctx, std::move(done), 1), {handle});
  }

 private:
  int root_ = 0;
  int process_set_ = 0;
  std::string name_;
};

}  // namespace
}  // namespace ringlet::tensorflow_ops

REGISTER_OP("RingletAllreduce")
    .Attr("T: {half, bfloat16, float, double, int8, uint8, int16, uint16, int32, int64}")
    .Attr("N: int >= 1")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float")
    .Attr("postscale_factor: float")
    .Attr("process_set_id: int")
    .Attr("tensor_names: list(string)")
    .Input("tensors: N * T")
    .Output("reduced: N * T")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    })
    .Doc("The reduction of each tensor over the ranks of a process set, as one fused group.");

REGISTER_OP("RingletAllgather")
    .Attr("T: type")
    .Attr("process_set_id: int")
    .Attr("tensor_name: string")
    .Input("tensor: T")
    .Output("gathered: T")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      ::tensorflow::shape_inference::ShapeHandle rest;
      TF_RETURN_IF_ERROR(c->Subshape(c->input(0), 1, &rest));
      ::tensorflow::shape_inference::ShapeHandle out;
      TF_RETURN_IF_ERROR(c->Concatenate(c->Vector(c->UnknownDim()), rest, &out));
      c->set_output(0, out);
      return absl::OkStatus();
    })
    .Doc("The tensors of every member concatenated on dimension 0, in rank order.");

REGISTER_OP("RingletBroadcast")
    .Attr("T: type")
    .Attr("root_rank: int")
    .Attr("process_set_id: int")
    .Attr("tensor_name: string")
    .Input("tensor: T")
    .Output("broadcast: T")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    })
    .Doc("root_rank's tensor on every member.");

REGISTER_KERNEL_BUILDER(Name("RingletAllreduce").Device(::tensorflow::DEVICE_CPU),
                        ringlet::tensorflow_ops::AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("RingletAllgather").Device(::tensorflow::DEVICE_CPU),
                        ringlet::tensorflow_ops::AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("RingletBroadcast").Device(::tensorflow::DEVICE_CPU),
                        ringlet::tensorflow_ops::BroadcastOp);

