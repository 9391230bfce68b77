// TensorFlow ops for ringlet.tensorflow: its collectives (allreduce,
// allgather and reducescatter, each grouped or not; broadcast; alltoall) on
// the tensors' own buffers. join() and the *_op queries are in query_ops.cc,
// the statuses in status.cc, the GPU's stream and copies in device.cc.
//
// Each collective has a CPU kernel and, where TensorFlow and this build both
// have CUDA, a GPU kernel: the same class, whose tensors then go to the core
// as device tensors with TensorFlow's compute stream as their producer, so
// that NCCL or Ringlet's CUDA IPC algorithms run on them where they are
// (device.h says how the stream orders them). Outputs the core sizes
// (allgather, reducescatter, alltoall) are copied from its device result on
// that stream. TensorFlow keeps a GPU kernel's int32 tensors in host memory:
// those go as host tensors.
//
// Each collective's kernel is asynchronous: it submits to Ringlet's runtime
// and returns, and the runtime's thread finishes the op when the collective
// completes (ringlet::synchronize_then). So TensorFlow may run every gradient's
// allreduce of a step at once, the runtime fuses them, and no inter-op thread
// is held while the ranks negotiate: ranks that start the same ops in
// different orders cannot starve each other of threads.
//
// Built against the TensorFlow that python3 imports at configure time, and
// loaded by ringlet/tensorflow/ops.py with tf.load_op_library; the gradients
// are registered in Python (ringlet/tensorflow/gradients.py).
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
#include "device.h"
#include "op_attributes.h"
#include "status.h"
#include "tensorflow/core/framework/common_shape_fns.h"
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

// A view for a collective that reduces, in `where`'s memory: the dtype must
// be one Ringlet reduces.
ringlet::Tensor reduced_view(const tf::Tensor& t, const OpDevice& where) {
  ringlet::Tensor v{const_cast<char*>(t.tensor_data().data()), *reducible(t.dtype()),
                    dims_of(t.shape())};
  place(v, where);
  return v;
}

// A view for a collective that only moves data: any fixed-size dtype, as
// bytes behind a last dimension of the element's size when Ringlet has no
// such dtype.
ringlet::Tensor moved_view(const tf::Tensor& t, const OpDevice& where) {
  ringlet::Tensor v{const_cast<char*>(t.tensor_data().data()), DataType::kUInt8,
                    dims_of(t.shape())};
  place(v, where);
  if (auto dtype = reducible(t.dtype())) {
    v.dtype = *dtype;
  } else {
    v.shape.push_back(static_cast<int64_t>(tf::DataTypeSize(t.dtype())));
  }
  return v;
}

// "ringlet: <call> of '<name>' on rank N", as the library's own errors
// begin.
std::string subject(std::string_view call, const std::string& name) {
  std::string who = "ringlet: " + std::string(call) + " of '" + name + "'";
  if (is_initialized()) who += " on rank " + std::to_string(rank());
  return who;
}

// A call this rank got wrong, in the words of the library's own refusals:
// "ringlet: <call> of '<name>' on rank N: <cause>".
absl::Status refusal(std::string_view call, const std::string& name, const std::string& cause) {
  return absl::InvalidArgumentError(subject(call, name) + ": " + cause);
}

// Strings, resources and variants have no bytes of their own to move.
absl::Status movable(std::string_view call, const std::string& name, tf::DataType dtype) {
  if (tf::DataTypeSize(dtype) > 0) return absl::OkStatus();
  return refusal(call, name, "dtype " + tf::DataTypeString(dtype) +
                                 " has no fixed element size, so it cannot be sent as bytes");
}

// Finishes an op after its collectives: `finish(i, result)` runs on the i-th
// collective's result (on the runtime's thread) and may fill outputs. The
// first error wins.
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
  std::function<absl::Status(size_t, ringlet::Result&)> finish;  // optional; runs under mu
};

void fail_now(tf::OpKernelContext* ctx, const Done& done) {
  ctx->SetStatus(status_of(std::current_exception()));
  done();
}

void finish_when_done(const std::shared_ptr<Pending>& pending, const std::vector<int64_t>& handles);

// A submission failed after `submitted` went in: the op fails with its
// error, but the collectives already submitted still read the op's inputs
// and write its outputs until they complete, so TensorFlow may free those
// only then: done() runs after the last of them, their own errors coming
// second to the submission's.
void fail_after(tf::OpKernelContext* ctx, Done done, const std::vector<int64_t>& submitted) {
  if (submitted.empty()) return fail_now(ctx, done);
  ctx->SetStatus(status_of(std::current_exception()));
  finish_when_done(std::make_shared<Pending>(ctx, std::move(done), submitted.size()), submitted);
}

void finish_when_done(const std::shared_ptr<Pending>& pending,
                      const std::vector<int64_t>& handles) {
  for (size_t i = 0; i < handles.size(); ++i) {
    synchronize_then(handles[i], [pending, i](ringlet::Result result, std::exception_ptr error) {
      if (error) {
        pending->set_status(status_of(error));
      } else if (pending->finish) {
        // Outputs are allocated here, and TensorFlow's context is not ours to
        // touch from two threads at once.
        std::lock_guard lock(pending->mu);
        absl::Status status = pending->finish(i, result);
        if (!status.ok()) pending->ctx->SetStatus(status);
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
  explicit AllreduceOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c), a_(c) {
    OP_REQUIRES_OK(c, c->GetAttr("as_group", &as_group_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, Done done) override {
    const int n = ctx->num_inputs();
    OP_REQUIRES_ASYNC(ctx, static_cast<int>(a_.names.size()) == n,
                      refusal("allreduce", a_.names.empty() ? std::string() : a_.names[0],
                              std::to_string(n) + " tensors but " +
                                  std::to_string(a_.names.size()) + " names"),
                      done);
    const OpDevice device = op_device(ctx);
    std::vector<ringlet::Tensor> ins, outs;
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& in = ctx->input(i);
      tf::Tensor* out = nullptr;
      // Reduced in place when TensorFlow lets the op own its input's buffer.
      OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({i}, i, in.shape(), &out),
                           done);
      ins.push_back(reduced_view(in, placed(device, input_memory_types()[i])));
      outs.push_back(reduced_view(*out, placed(device, output_memory_types()[i])));
    }
    std::vector<int64_t> handles;
    try {
      if (as_group_ && n > 1) {
        handles = grouped_allreduce_async(a_.names, ins, outs, a_.op, a_.prescale, a_.postscale,
                                          a_.process_set);
      } else {
        for (int i = 0; i < n; ++i) {
          handles.push_back(allreduce_async(a_.names[i], ins[i], outs[i], a_.op, a_.prescale,
                                            a_.postscale, a_.process_set));
        }
      }
    } catch (...) {
      return fail_after(ctx, std::move(done), handles);
    }
    finish_when_done(std::make_shared<Pending>(ctx, std::move(done), handles.size()), handles);
  }

 private:
  const ReductionAttributes a_;
  // The core numbers groups in the order they are submitted, which is the same
  // on every rank only for ops run eagerly; in a graph the members go alone.
  bool as_group_ = true;
};

// ------------------------------------------------------------------ allgather

// Copies a collective's result into a new output, in `where`'s memory, of
// the shape it came back with (less the element-bytes dimension of a tensor
// moved as bytes). `who` names the collective for errors.
absl::Status output_from(tf::OpKernelContext* ctx, int index, const ringlet::Result& result,
                         bool as_bytes, const OpDevice& where, const std::string& who) {
  std::vector<int64_t> dims = result.shape;
  if (as_bytes) dims.pop_back();
  tf::TensorShape shape;
  TF_RETURN_IF_ERROR(tf::TensorShape::BuildTensorShape(dims, &shape));
  tf::Tensor* out = nullptr;
  TF_RETURN_IF_ERROR(ctx->allocate_output(index, shape, &out));
  return copy_result(where, const_cast<char*>(out->tensor_data().data()), result, who);
}

// Each output's memory and the subject of its errors, taken at submission:
// the finishing callbacks may not call back into Ringlet.
struct Outputs {
  std::vector<OpDevice> where;
  std::vector<std::string> who;
};

// Each input gathered from every member on dimension 0: one allgather per
// input, submitted together (Horovod's grouped_allgather when there are several).
class AllgatherOp : public tf::AsyncOpKernel {
 public:
  explicit AllgatherOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &names_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, Done done) override {
    const int n = ctx->num_inputs();
    OP_REQUIRES_ASYNC(ctx, static_cast<int>(names_.size()) == n,
                      refusal("allgather", names_.empty() ? std::string() : names_[0],
                              std::to_string(n) + " tensors but " +
                                  std::to_string(names_.size()) + " names"),
                      done);
    const OpDevice device = op_device(ctx);
    std::vector<ringlet::Tensor> views;
    Outputs outputs;
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& in = ctx->input(i);
      OP_REQUIRES_ASYNC(ctx, in.dims() >= 1,
                        refusal("allgather", names_[i],
                                "a scalar has no first dimension to gather"),
                        done);
      OP_REQUIRES_OK_ASYNC(ctx, movable("allgather", names_[i], in.dtype()), done);
      views.push_back(moved_view(in, placed(device, input_memory_types()[i])));
      outputs.where.push_back(placed(device, output_memory_types()[i]));
      outputs.who.push_back(subject("allgather", names_[i]));
    }
    std::vector<int64_t> handles;
    try {
      for (int i = 0; i < n; ++i) {
        handles.push_back(allgather_async(names_[i], views[i], process_set_));
      }
    } catch (...) {
      return fail_after(ctx, std::move(done), handles);
    }
    const bool as_bytes = !reducible(ctx->input(0).dtype());
    auto pending = std::make_shared<Pending>(ctx, std::move(done), handles.size());
    pending->finish = [ctx, as_bytes, outputs](size_t i, ringlet::Result& result) {
      return output_from(ctx, static_cast<int>(i), result, as_bytes, outputs.where[i],
                         outputs.who[i]);
    };
    finish_when_done(pending, handles);
  }

 private:
  int process_set_ = 0;
  std::vector<std::string> names_;
};

// -------------------------------------------------------------- reducescatter

// This member's share of dimension 0 of each input's reduction: one
// reducescatter per input, submitted together.
class ReducescatterOp : public tf::AsyncOpKernel {
 public:
  explicit ReducescatterOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c), a_(c) {}

  void ComputeAsync(tf::OpKernelContext* ctx, Done done) override {
    const int n = ctx->num_inputs();
    OP_REQUIRES_ASYNC(ctx, static_cast<int>(a_.names.size()) == n,
                      refusal("reducescatter", a_.names.empty() ? std::string() : a_.names[0],
                              std::to_string(n) + " tensors but " +
                                  std::to_string(a_.names.size()) + " names"),
                      done);
    const OpDevice device = op_device(ctx);
    Outputs outputs;
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES_ASYNC(ctx, ctx->input(i).dims() >= 1,
                        refusal("reducescatter", a_.names[i],
                                "a scalar has no first dimension to scatter"),
                        done);
      outputs.where.push_back(placed(device, output_memory_types()[i]));
      outputs.who.push_back(subject("reducescatter", a_.names[i]));
    }
    std::vector<int64_t> handles;
    try {
      for (int i = 0; i < n; ++i) {
        const ringlet::Tensor view =
            reduced_view(ctx->input(i), placed(device, input_memory_types()[i]));
        handles.push_back(reducescatter_async(a_.names[i], view, a_.op, a_.prescale, a_.postscale,
                                              a_.process_set));
      }
    } catch (...) {
      return fail_after(ctx, std::move(done), handles);
    }
    auto pending = std::make_shared<Pending>(ctx, std::move(done), handles.size());
    pending->finish = [ctx, outputs](size_t i, ringlet::Result& result) {
      return output_from(ctx, static_cast<int>(i), result, false, outputs.where[i],
                         outputs.who[i]);
    };
    finish_when_done(pending, handles);
  }

 private:
  const ReductionAttributes a_;
};

// ------------------------------------------------------------------- alltoall

// splits[i] rows of dimension 0 go to the i-th member (none: an even split);
// the rows from every member come back in rank order, with how many came from
// each. As in Horovod, splits may add up to fewer rows than the tensor has:
// the rows past them are not sent.
class AlltoallOp : public tf::AsyncOpKernel {
 public:
  explicit AlltoallOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &name_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, Done done) override {
    const tf::Tensor& in = ctx->input(0);
    const tf::Tensor& splits = ctx->input(1);
    OP_REQUIRES_ASYNC(ctx, in.dims() >= 1,
                      refusal("alltoall", name_, "a scalar has no first dimension to split"),
                      done);
    OP_REQUIRES_OK_ASYNC(ctx, movable("alltoall", name_, in.dtype()), done);
    OP_REQUIRES_ASYNC(ctx, splits.dims() == 1,
                      refusal("alltoall", name_, "splits must be a vector"), done);
    const OpDevice device = op_device(ctx);
    // On a GPU, splits and received_splits are host memory (the registration).
    ringlet::Tensor view = moved_view(in, placed(device, input_memory_types()[0]));
    const OpDevice out_device = placed(device, output_memory_types()[0]);
    const std::string who = subject("alltoall", name_);
    std::vector<int64_t> rows;
    int64_t sum = 0;
    for (int64_t i = 0; i < splits.NumElements(); ++i) {
      const int64_t s = splits.vec<int32_t>()(i);
      OP_REQUIRES_ASYNC(ctx, s >= 0,
                        refusal("alltoall", name_, "splits hold the negative " + std::to_string(s)),
                        done);
      rows.push_back(s);
      sum += s;
    }
    OP_REQUIRES_ASYNC(ctx, sum <= view.shape[0],
                      refusal("alltoall", name_,
                              "splits add up to " + std::to_string(sum) +
                                  ", more than the first dimension " +
                                  std::to_string(view.shape[0])),
                      done);
    if (!rows.empty()) view.shape[0] = sum;
    int64_t handle = 0;
    try {
      handle = alltoall_async(name_, view, rows, process_set_);
    } catch (...) {
      return fail_now(ctx, done);
    }
    const bool as_bytes = !reducible(in.dtype());
    auto pending = std::make_shared<Pending>(ctx, std::move(done), 1);
    pending->finish = [ctx, as_bytes, out_device, who](size_t,
                                                       ringlet::Result& result) -> absl::Status {
      TF_RETURN_IF_ERROR(output_from(ctx, 0, result, as_bytes, out_device, who));
      tf::Tensor* received = nullptr;
      const auto members = static_cast<int64_t>(result.received_splits.size());
      TF_RETURN_IF_ERROR(ctx->allocate_output(1, tf::TensorShape({members}), &received));
      for (int64_t i = 0; i < members; ++i) {
        received->vec<int32_t>()(i) = static_cast<int32_t>(result.received_splits[i]);
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
  explicit BroadcastOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c), a_(c) {}

  void ComputeAsync(tf::OpKernelContext* ctx, Done done) override {
    const tf::Tensor& in = ctx->input(0);
    OP_REQUIRES_OK_ASYNC(ctx, movable("broadcast", a_.name, in.dtype()), done);
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, in.shape(), &out),
                         done);
    const OpDevice where = placed(op_device(ctx), output_memory_types()[0]);
    int64_t handle = 0;
    try {
      // Broadcast works in place: the root sends its output buffer, which
      // holds its input only once copied (on a GPU, on TensorFlow's stream,
      // before the submission records the ready event there); elsewhere the
      // output is overwritten.
      const bool copy = out->tensor_data().data() != in.tensor_data().data() &&
                        in.NumElements() > 0 && rank() == a_.root;
      if (copy) {
        OP_REQUIRES_OK_ASYNC(ctx,
                             copy_within(where, const_cast<char*>(out->tensor_data().data()),
                                         in.tensor_data().data(), in.TotalBytes(),
                                         subject("broadcast", a_.name)),
                             done);
      }
      handle = broadcast_async(a_.name, moved_view(*out, where), a_.root, a_.process_set);
    } catch (...) {
      return fail_now(ctx, done);
    }
    finish_when_done(std::make_shared<Pending>(ctx, std::move(done), 1), {handle});
  }

 private:
  const BroadcastAttributes a_;
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
    .Attr("as_group: bool = true")
    .Input("tensors: N * T")
    .Output("reduced: N * T")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    })
    .Doc("The reduction of each tensor over the ranks of a process set; as_group: as one "
         "group, fused together.");

REGISTER_OP("RingletAllgather")
    .Attr("T: type")
    .Attr("N: int >= 1")
    .Attr("process_set_id: int")
    .Attr("tensor_names: list(string)")
    .Input("tensors: N * T")
    .Output("gathered: N * T")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) {
        ::tensorflow::shape_inference::ShapeHandle out;
        TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(i), 0, c->UnknownDim(), &out));
        c->set_output(i, out);
      }
      return absl::OkStatus();
    })
    .Doc("Each tensor of every member concatenated on dimension 0, in rank order.");

REGISTER_OP("RingletReducescatter")
    .Attr("T: {half, bfloat16, float, double, int8, uint8, int16, uint16, int32, int64}")
    .Attr("N: int >= 1")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float")
    .Attr("postscale_factor: float")
    .Attr("process_set_id: int")
    .Attr("tensor_names: list(string)")
    .Input("tensors: N * T")
    .Output("scattered: N * T")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) {
        ::tensorflow::shape_inference::ShapeHandle out;
        TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(i), 0, c->UnknownDim(), &out));
        c->set_output(i, out);
      }
      return absl::OkStatus();
    })
    .Doc("This member's rows of each tensor's reduction over the members.");

REGISTER_OP("RingletAlltoall")
    .Attr("T: type")
    .Attr("process_set_id: int")
    .Attr("tensor_name: string")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("gathered: T")
    .Output("received_splits: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      ::tensorflow::shape_inference::ShapeHandle out;
      TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(0), 0, c->UnknownDim(), &out));
      c->set_output(0, out);
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc("splits[i] rows to the i-th member; the rows of every member, in rank order.");

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
REGISTER_KERNEL_BUILDER(Name("RingletReducescatter").Device(::tensorflow::DEVICE_CPU),
                        ringlet::tensorflow_ops::ReducescatterOp);
REGISTER_KERNEL_BUILDER(Name("RingletAlltoall").Device(::tensorflow::DEVICE_CPU),
                        ringlet::tensorflow_ops::AlltoallOp);

#if RINGLET_TF_GPU
// The same kernels on a GPU, as Horovod registers its own where it has GPU
// operations: alltoall's splits are read, and its received splits written,
// by the host.
REGISTER_KERNEL_BUILDER(Name("RingletAllreduce").Device(::tensorflow::DEVICE_GPU),
                        ringlet::tensorflow_ops::AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("RingletAllgather").Device(::tensorflow::DEVICE_GPU),
                        ringlet::tensorflow_ops::AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("RingletBroadcast").Device(::tensorflow::DEVICE_GPU),
                        ringlet::tensorflow_ops::BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("RingletReducescatter").Device(::tensorflow::DEVICE_GPU),
                        ringlet::tensorflow_ops::ReducescatterOp);
REGISTER_KERNEL_BUILDER(Name("RingletAlltoall")
                            .Device(::tensorflow::DEVICE_GPU)
                            .HostMemory("splits")
                            .HostMemory("received_splits"),
                        ringlet::tensorflow_ops::AlltoallOp);
#endif
