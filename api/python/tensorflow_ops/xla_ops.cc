// Ringlet's allreduce and broadcast inside XLA-compiled TensorFlow functions
// (tf.function(jit_compile=True), Keras's model.compile(jit_compile=True)).
//
// XLA compiles a TensorFlow op through its tf2xla kernel, which emits XLA
// instructions in its place. Ringlet's emit one custom call each, run by
// XLA where the op stands: an XLA FFI handler (typed, so that a failure comes
// back to TensorFlow as an error naming the tensor rather than a crash) that
// submits the op's tensors to Ringlet together, so that they fuse as the
// eager kernels' do, and waits for them. The handler reads XLA's own operand
// buffers and writes its output buffers: nothing is copied on the way.
//
// The call is marked as having a side effect: XLA never drops it (a rank
// that skipped a collective would leave the others waiting), duplicates it
// or merges two of them. Each call waits for its collective before it
// returns, so two calls that ranks ran in different orders would each wait
// for the other until Ringlet's stall deadline names them; every rank runs
// the same program, compiled alike, so they come in the same order.
//
// Allgather, reducescatter and alltoall have no XLA kernel: their output's
// shape is known only once the ranks have met, and XLA fixes every shape
// when it compiles.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "op_attributes.h"
#include "ringlet/ringlet.h"
#include "status.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "xla/ffi/api/ffi.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"

// Exported by TensorFlow's framework library; its header (xla/ffi/ffi_api.h)
// pulls in XLA's internals, which the pip package does not ship whole.
namespace xla::ffi {
const XLA_FFI_Api* GetXlaFfiApi();
}  // namespace xla::ffi

namespace ringlet::tensorflow_ops {
namespace {

namespace ffi = xla::ffi;

// ------------------------------------------------------------------ the handlers

std::optional<DataType> ringlet_dtype(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return DataType::kFloat32;
    case ffi::DataType::F64: return DataType::kFloat64;
    case ffi::DataType::F16: return DataType::kFloat16;
    case ffi::DataType::BF16: return DataType::kBFloat16;
    case ffi::DataType::S8: return DataType::kInt8;
    case ffi::DataType::U8: return DataType::kUInt8;
    case ffi::DataType::S16: return DataType::kInt16;
    case ffi::DataType::U16: return DataType::kUInt16;
    case ffi::DataType::S32: return DataType::kInt32;
    case ffi::DataType::S64: return DataType::kInt64;
    default: return std::nullopt;
  }
}

std::vector<std::string> split_names(std::string_view joined) {
  std::vector<std::string> names;
  size_t start = 0;
  for (size_t i = 0; i <= joined.size(); ++i) {
    if (i == joined.size() || joined[i] == '\n') {
      names.emplace_back(joined.substr(start, i - start));
      start = i + 1;
    }
  }
  return names;
}

// The error TensorFlow raises: the code its eager kernel's status has for
// the same cause (status_of), and a message naming the tensor and the rank.
ffi::Error failed(std::string_view call, const std::string& name, const absl::Status& cause) {
  return ffi::Error(static_cast<ffi::ErrorCode>(cause.code()),
                    "ringlet: " + std::string(call) + " of '" + name + "' on rank " +
                        std::to_string(ringlet::is_initialized() ? ringlet::rank() : -1) +
                        " failed in an XLA-compiled function: " + std::string(cause.message()));
}

ffi::Error failed(std::string_view call, const std::string& name, std::exception_ptr error) {
  return failed(call, name, status_of(error));
}

// Waits for every handle (none is left behind on a failure) and reports the
// first failure.
ffi::Error wait_all(std::string_view call, const std::vector<std::string>& names,
                    const std::vector<int64_t>& handles) {
  ffi::Error first = ffi::Error::Success();
  for (size_t i = 0; i < handles.size(); ++i) {
    try {
      ringlet::synchronize(handles[i]);
    } catch (...) {
      if (first.success()) first = failed(call, names[i], std::current_exception());
    }
  }
  return first;
}

ringlet::Tensor view(void* data, DataType dtype, ffi::Span<const int64_t> dims) {
  ringlet::Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.shape.assign(dims.begin(), dims.end());
  return t;
}

ffi::Error allreduce(ffi::RemainingArgs args, ffi::RemainingRets rets, std::string_view joined,
                     int64_t op, double prescale, double postscale, int64_t process_set) {
  const std::vector<std::string> names = split_names(joined);
  if (names.size() != args.size() || rets.size() != args.size()) {
    return failed("allreduce", names.empty() ? std::string() : names[0],
                  absl::InvalidArgumentError(std::to_string(args.size()) + " tensors but " +
                                             std::to_string(names.size()) + " names"));
  }
  std::vector<int64_t> handles;
  for (size_t i = 0; i < args.size(); ++i) {
    auto in = args.get<ffi::AnyBuffer>(i);
    auto out = rets.get<ffi::AnyBuffer>(i);
    if (!in.has_value() || !out.has_value()) {
      wait_all("allreduce", names, handles);
      return failed("allreduce", names[i], absl::InternalError("XLA passed no buffer"));
    }
    const std::optional<DataType> dtype = ringlet_dtype(in->element_type());
    if (!dtype) {
      wait_all("allreduce", names, handles);
      return failed("allreduce", names[i],
                    absl::InvalidArgumentError("its dtype cannot be reduced"));
    }
    try {
      handles.push_back(ringlet::allreduce_async(
          names[i], view(in->untyped_data(), *dtype, in->dimensions()),
          view((*out)->untyped_data(), *dtype, (*out)->dimensions()), static_cast<ReduceOp>(op),
          prescale, postscale, static_cast<int>(process_set)));
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      wait_all("allreduce", names, handles);
      return failed("allreduce", names[i], error);
    }
  }
  return wait_all("allreduce", names, handles);
}

ffi::Error broadcast(ffi::AnyBuffer in, ffi::Result<ffi::AnyBuffer> out, std::string_view name,
                     int64_t root, int64_t process_set) {
  const std::string tensor(name);
  const size_t bytes = in.size_bytes();
  int64_t handle = 0;
  try {
    // In place on the output: the root's bytes are sent, the others'
    // replaced, so only the root's output needs its input.
    if (bytes > 0 && ringlet::rank() == root && out->untyped_data() != in.untyped_data())
      std::memcpy(out->untyped_data(), in.untyped_data(), bytes);
    ringlet::Tensor t;
    t.data = out->untyped_data();
    t.dtype = DataType::kUInt8;
    t.shape = {static_cast<int64_t>(bytes)};
    handle = ringlet::broadcast_async(tensor, t, static_cast<int>(root),
                                      static_cast<int>(process_set));
  } catch (...) {
    return failed("broadcast", tensor, std::current_exception());
  }
  return wait_all("broadcast", {tensor}, {handle});
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(ringlet_xla_allreduce, allreduce,
                              ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<std::string_view>("names")
                                  .Attr<int64_t>("reduce_op")
                                  .Attr<double>("prescale")
                                  .Attr<double>("postscale")
                                  .Attr<int64_t>("process_set"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(ringlet_xla_broadcast, broadcast,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<std::string_view>("name")
                                  .Attr<int64_t>("root")
                                  .Attr<int64_t>("process_set"));

XLA_FFI_REGISTER_HANDLER(ffi::GetXlaFfiApi(), "ringlet_allreduce", "Host", ringlet_xla_allreduce);
XLA_FFI_REGISTER_HANDLER(ffi::GetXlaFfiApi(), "ringlet_broadcast", "Host", ringlet_xla_broadcast);

// ------------------------------------------------------------------ the tf2xla kernels

namespace tf = ::tensorflow;

// An MLIR string literal holding `s` exactly: every byte but letters,
// digits and a few marks as a \XX escape.
std::string mlir_string(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-' || c == ':') {
      out += static_cast<char>(c);
    } else {
      out += '\\';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + "\"";
}

std::string f64(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // an MLIR float literal
  return s + " : f64";
}

std::string i64(int64_t v) { return std::to_string(v) + " : i64"; }

// Emits the custom call; a tuple of the outputs where there are several.
std::vector<xla::XlaOp> custom_call(tf::XlaOpKernelContext* ctx, const char* target,
                                    const std::string& attributes) {
  std::vector<xla::XlaOp> operands;
  std::vector<xla::Shape> shapes;
  for (int i = 0; i < ctx->num_inputs(); ++i) {
    auto shape = ctx->InputXlaShape(i);
    if (!shape.ok()) {
      ctx->SetStatus(shape.status());
      return {};
    }
    operands.push_back(ctx->Input(i));
    shapes.push_back(*shape);
  }
  const bool tuple = shapes.size() > 1;
  const xla::Shape result = tuple ? xla::ShapeUtil::MakeTupleShape(shapes) : shapes[0];
  xla::XlaOp call = xla::CustomCall(ctx->builder(), target, operands, result, attributes,
                                    /*has_side_effect=*/true, /*output_operand_aliasing=*/{},
                                    /*literal=*/nullptr, xla::CustomCallSchedule::SCHEDULE_NONE,
                                    xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
  if (!tuple) return {call};
  std::vector<xla::XlaOp> outputs;
  for (size_t i = 0; i < shapes.size(); ++i)
    outputs.push_back(xla::GetTupleElement(call, static_cast<int64_t>(i)));
  return outputs;
}

class AllreduceXla : public tf::XlaOpKernel {
 public:
  explicit AllreduceXla(tf::OpKernelConstruction* c) : XlaOpKernel(c), a_(c) {}

  void Compile(tf::XlaOpKernelContext* ctx) override {
    OP_REQUIRES(ctx, static_cast<int>(a_.names.size()) == ctx->num_inputs(),
                absl::InvalidArgumentError("ringlet: allreduce of " +
                                           std::to_string(ctx->num_inputs()) + " tensors but " +
                                           std::to_string(a_.names.size()) + " names"));
    std::string joined;
    for (const std::string& name : a_.names) {
      OP_REQUIRES(ctx, name.find('\n') == std::string::npos,
                  absl::InvalidArgumentError("ringlet: allreduce of '" + name +
                                             "': a tensor name with a line break"));
      joined += (joined.empty() ? "" : "\n") + name;
    }
    const std::string attributes =
        "{names = " + mlir_string(joined) + ", reduce_op = " + i64(static_cast<int>(a_.op)) +
        ", prescale = " + f64(a_.prescale) + ", postscale = " + f64(a_.postscale) +
        ", process_set = " + i64(a_.process_set) + "}";
    const std::vector<xla::XlaOp> outputs = custom_call(ctx, "ringlet_allreduce", attributes);
    for (size_t i = 0; i < outputs.size(); ++i) ctx->SetOutput(static_cast<int>(i), outputs[i]);
  }

 private:
  const ReductionAttributes a_;
};

class BroadcastXla : public tf::XlaOpKernel {
 public:
  explicit BroadcastXla(tf::OpKernelConstruction* c) : XlaOpKernel(c), a_(c) {}

  void Compile(tf::XlaOpKernelContext* ctx) override {
    const std::string attributes = "{name = " + mlir_string(a_.name) + ", root = " +
                                   i64(a_.root) + ", process_set = " + i64(a_.process_set) + "}";
    const std::vector<xla::XlaOp> outputs = custom_call(ctx, "ringlet_broadcast", attributes);
    if (!outputs.empty()) ctx->SetOutput(0, outputs[0]);
  }

 private:
  const BroadcastAttributes a_;
};

}  // namespace
}  // namespace ringlet::tensorflow_ops

namespace tensorflow {
REGISTER_XLA_OP(Name("RingletAllreduce"), ::ringlet::tensorflow_ops::AllreduceXla);
REGISTER_XLA_OP(Name("RingletBroadcast"), ::ringlet::tensorflow_ops::BroadcastXla);
}  // namespace tensorflow
