// How the ringlet backend hands torch tensors to Ringlet (tensor_views.h).
#include "torch_c10d/tensor_views.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>

namespace ringlet::torch_c10d {

void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      t.device().is_cpu(), "ringlet: ", op, " of a tensor on ", t.device(),
      " is not served yet: the ringlet backend takes CPU tensors (for CUDA tensors, "
      "init_process_group(\"cpu:ringlet,cuda:nccl\"))");
  TORCH_CHECK(t.layout() == at::kStrided, "ringlet: ", op, " takes dense tensors, not ", t.layout(),
              " ones");
}

void check_one(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "ringlet: ", op, " takes one tensor per process, not ",
              tensors.size());
  check_tensor(tensors[0], op);
}

ringlet::Tensor as_bytes(const at::Tensor& contiguous) {
  ringlet::Tensor t;
  t.data = contiguous.data_ptr();
  t.dtype = ringlet::DataType::kUInt8;
  t.shape = {static_cast<int64_t>(contiguous.nbytes())};
  return t;
}

namespace {

std::optional<ringlet::DataType> ringlet_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ringlet::DataType::kFloat32;
    case at::kDouble:
      return ringlet::DataType::kFloat64;
    case at::kHalf:
      return ringlet::DataType::kFloat16;
    case at::kBFloat16:
      return ringlet::DataType::kBFloat16;
    case at::kChar:
      return ringlet::DataType::kInt8;
    case at::kByte:
      return ringlet::DataType::kUInt8;
    case at::kInt:
      return ringlet::DataType::kInt32;
    case at::kLong:
      return ringlet::DataType::kInt64;
    case at::kShort:
      return ringlet::DataType::kInt16;
    case at::kUInt16:
      return ringlet::DataType::kUInt16;
    default:
      return std::nullopt;
  }
}

const char* op_text(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNUSED";
  }
}

}  // namespace

Reduction resolve(at::ScalarType type, const c10d::ReduceOp& op, const char* what) {
  const auto red = static_cast<c10d::ReduceOp::RedOpType>(op);
  TORCH_CHECK_NOT_IMPLEMENTED(
      red != c10d::ReduceOp::BAND && red != c10d::ReduceOp::BOR && red != c10d::ReduceOp::BXOR,
      "ringlet: ", what, " with ReduceOp.", op_text(red),
      " is not served: Ringlet reduces with SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM (and "
      "all_reduce and reduce with BAND, BOR, BXOR)");
  TORCH_CHECK(red != c10d::ReduceOp::UNUSED, "ringlet: ", what, ": not a reduce op");
  Reduction r{ringlet::DataType::kFloat32, ringlet::ReduceOp::kSum};
  switch (red) {
    case c10d::ReduceOp::SUM:
      r.op = ringlet::ReduceOp::kSum;
      break;
    case c10d::ReduceOp::AVG:
      r.op = ringlet::ReduceOp::kAvg;
      break;
    case c10d::ReduceOp::PRODUCT:
      r.op = ringlet::ReduceOp::kProd;
      break;
    case c10d::ReduceOp::MIN:
      r.op = ringlet::ReduceOp::kMin;
      break;
    case c10d::ReduceOp::MAX:
      r.op = ringlet::ReduceOp::kMax;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      // The factor scales each rank's input as Ringlet reads it (prescale).
      r.op = ringlet::ReduceOp::kSum;
      auto* premul = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(premul != nullptr, "ringlet: ", what, ": PREMUL_SUM without its factor");
      r.prescale = premul->tensor_factor.defined()
                       ? premul->tensor_factor.to(at::kCPU).to(at::kDouble).item<double>()
                       : premul->double_factor;
      break;
    }
    default:
      break;
  }
  if (type == at::kBool) {
    // Bytes of 0 and 1: "or" is the max, "and" the min.
    TORCH_CHECK_NOT_IMPLEMENTED(r.op != ringlet::ReduceOp::kAvg && r.prescale == 1.0,
                                "ringlet: ", what, " of bool tensors with ReduceOp.", op_text(red),
                                " is not served (SUM, MAX: or; PRODUCT, MIN: and)");
    r.dtype = ringlet::DataType::kUInt8;
    r.op = (r.op == ringlet::ReduceOp::kSum || r.op == ringlet::ReduceOp::kMax)
               ? ringlet::ReduceOp::kMax
               : ringlet::ReduceOp::kMin;
    return r;
  }
  if (at::isComplexType(type)) {
    // A sum of complex numbers is the sums of their real and imaginary parts.
    TORCH_CHECK_NOT_IMPLEMENTED(r.op == ringlet::ReduceOp::kSum || r.op == ringlet::ReduceOp::kAvg,
                                "ringlet: ", what, " of ", type, " tensors with ReduceOp.",
                                op_text(red),
                                " is not served (complex tensors: SUM, AVG, PREMUL_SUM)");
    auto real = ringlet_dtype(c10::toRealValueType(type));
    TORCH_CHECK_NOT_IMPLEMENTED(real.has_value(), "ringlet: ", what, " of ", type,
                                " tensors is not served");
    r.dtype = *real;
    r.parts = 2;
    return r;
  }
  auto dtype = ringlet_dtype(type);
  TORCH_CHECK_NOT_IMPLEMENTED(
      dtype.has_value(), "ringlet: ", what, " of ", type,
      " tensors is not served: Ringlet reduces float32, float64, float16, bfloat16, int8, "
      "uint8, int16, uint16, int32, int64, bool and complex (SUM, AVG)");
  r.dtype = *dtype;
  return r;
}

ringlet::Tensor as_reduced(const at::Tensor& contiguous, const Reduction& r, int64_t rows) {
  ringlet::Tensor t;
  t.data = contiguous.data_ptr();
  t.dtype = r.dtype;
  const int64_t elements = contiguous.numel() * r.parts;
  if (rows > 1) {
    t.shape = {rows, elements / rows};
  } else {
    t.shape = {elements};
  }
  return t;
}

void copy_into(at::Tensor& dst, const std::byte* src, size_t bytes) {
  TORCH_CHECK(bytes == dst.nbytes(), "got ", bytes, " bytes for a tensor of ", dst.nbytes());
  if (bytes == 0) return;
  if (dst.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src, bytes);
  } else {
    dst.copy_(at::from_blob(const_cast<std::byte*>(src), dst.sizes(), dst.options()));
  }
}

at::Tensor staged(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

}  // namespace ringlet::torch_c10d
