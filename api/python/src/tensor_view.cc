#include "tensor_view.h"

#include <optional>

namespace nb = nanobind;

namespace ringlet::python {
namespace {

std::optional<DataType> dtype_of(nb::dlpack::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  const auto code = static_cast<nb::dlpack::dtype_code>(t.code);
  switch (code) {
    case nb::dlpack::dtype_code::Float:
      if (t.bits == 32) return DataType::kFloat32;
      if (t.bits == 64) return DataType::kFloat64;
      if (t.bits == 16) return DataType::kFloat16;
      break;
    case nb::dlpack::dtype_code::Bfloat:
      if (t.bits == 16) return DataType::kBFloat16;
      break;
    case nb::dlpack::dtype_code::Int:
      if (t.bits == 8) return DataType::kInt8;
      if (t.bits == 16) return DataType::kInt16;
      if (t.bits == 32) return DataType::kInt32;
      if (t.bits == 64) return DataType::kInt64;
      break;
    case nb::dlpack::dtype_code::UInt:
      if (t.bits == 8) return DataType::kUInt8;
      if (t.bits == 16) return DataType::kUInt16;
      break;
    default:
      break;
  }
  return std::nullopt;
}

std::string dtype_text(nb::dlpack::dtype t) {
  const char* kind = nullptr;
  switch (static_cast<nb::dlpack::dtype_code>(t.code)) {
    case nb::dlpack::dtype_code::Int:
      kind = "int";
      break;
    case nb::dlpack::dtype_code::UInt:
      kind = "uint";
      break;
    case nb::dlpack::dtype_code::Float:
      kind = "float";
      break;
    case nb::dlpack::dtype_code::Bfloat:
      kind = "bfloat";
      break;
    case nb::dlpack::dtype_code::Complex:
      kind = "complex";
      break;
    case nb::dlpack::dtype_code::Bool:
      kind = "bool";
      break;
    default:  // the float8/float6/float4 codes of newer DLPack versions
      return "DLPack dtype code " + std::to_string(t.code) + " of " + std::to_string(t.bits) +
             " bits";
  }
  std::string text = kind + std::to_string(t.bits);
  if (t.lanes != 1) text += "x" + std::to_string(t.lanes);
  return text;
}

// Worded as the API's own refusals: "ringlet: <call> on rank N: <why>".
[[noreturn]] void refuse(const char* call, const std::string& name, const std::string& why) {
  std::string text = std::string("ringlet: ") + call;
  if (is_initialized()) text += " on rank " + std::to_string(rank());
  throw Error(ErrorCode::kInvalidArgument, text + ": tensor '" + name + "' " + why);
}

// Row-major and dense, ignoring the strides of dimensions of one element
// (frameworks leave those arbitrary).
bool is_dense_row_major(const DlpackFields& a) {
  if (a.strides == nullptr) return true;  // DLPack's way of saying row-major
  // An array without elements has no layout to check, whatever strides its
  // producer gave (numpy 2 gives zeros).
  for (size_t i = 0; i < a.ndim; ++i) {
    if (a.shape[i] == 0) return true;
  }
  int64_t expected = 1;
  for (size_t i = a.ndim; i-- > 0;) {
    const int64_t extent = a.shape[i];
    if (extent != 1 && a.strides[i] != expected) return false;
    expected *= extent;
  }
  return true;
}

}  // namespace

Tensor tensor_view(const DlpackFields& array, const char* call, const std::string& name,
                   uintptr_t stream, int device) {
  Tensor t;
  const auto dtype = dtype_of(array.dtype);
  if (!dtype) {
    refuse(call, name,
           "has dtype " + dtype_text(array.dtype) +
               ", which is not supported (float16, bfloat16, float32, float64, int8, uint8, int16, "
               "uint16, int32 and int64 are)");
  }
  t.dtype = *dtype;
  if (!is_dense_row_major(array)) {
    refuse(call, name,
           "is not contiguous; pass a contiguous tensor (for instance tensor.contiguous())");
  }
  switch (array.device_type) {
    case nb::device::cpu::value:
      t.device = -1;
      break;
    case nb::device::cuda::value:
      t.device = device >= 0 ? device : array.device_id;
      t.stream = reinterpret_cast<void*>(stream);
      break;
    default:
      refuse(call, name,
             "lives in memory of DLPack device type " + std::to_string(array.device_type) +
                 "; Ringlet serves host memory and CUDA devices");
  }
  t.data = const_cast<void*>(array.data);
  t.shape.assign(array.shape, array.shape + array.ndim);
  return t;
}

}  // namespace ringlet::python
