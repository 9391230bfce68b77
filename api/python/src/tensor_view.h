// Tensors from any framework arrive as DLPack (nanobind's ndarray reads
// __dlpack__ and DLPack capsules); this turns one into the C++ API's view
// after checking what the core cannot: the element type, contiguity and the
// kind of memory.
#pragma once

#include <nanobind/ndarray.h>

#include <string>

#include "ringlet/ringlet.h"

namespace ringlet::python {

// What DLPack says about one tensor, whatever the ndarray's constraints.
struct DlpackFields {
  const void* data;
  nanobind::dlpack::dtype dtype;
  size_t ndim;
  const int64_t* shape;
  const int64_t* strides;  // in elements
  int32_t device_type;
  int32_t device_id;
};

// The view of a tensor for `call` ("allreduce_async", ...) named `name`; throws ringlet::Error
// (kInvalidArgument) naming the tensor when the dtype is not one Ringlet
// reduces, the layout is not dense row-major, or the memory is neither host
// nor CUDA. `stream` is the framework's current CUDA stream for a device
// tensor (0 for the host). `device`, where >= 0, is a device tensor's CUDA
// ordinal in place of DLPack's device id, for frameworks whose DLPack gives
// their own number for the device (TensorFlow: the N of /GPU:N, which is
// not CUDA's once tf.config.set_visible_devices has picked a GPU).
Tensor tensor_view(const DlpackFields& fields, const char* call, const std::string& name,
                   uintptr_t stream, int device = -1);

template <typename... Constraints>
Tensor tensor_view(const nanobind::ndarray<Constraints...>& array, const char* call,
                   const std::string& name, uintptr_t stream, int device = -1) {
  return tensor_view(DlpackFields{array.data(), array.dtype(), array.ndim(), array.shape_ptr(),
                                  array.stride_ptr(), array.device_type(), array.device_id()},
                     call, name, stream, device);
}

}  // namespace ringlet::python
