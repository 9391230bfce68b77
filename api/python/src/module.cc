// ringlet._ringlet: the C++ API as the framework layers need it. Tensors come
// in as DLPack; what only negotiation can size (allgather, alltoall,
// reducescatter) goes back as a byte array that owns the runtime's buffer
// (numpy on the host, torch on a device), which the framework layer
// reinterprets without a copy. Every call
// that waits for other ranks releases the GIL, so that the framework's own
// threads (and other Python threads) run meanwhile, and those that may wait
// long (init's rendezvous, synchronize, barrier, join) serve Python's signals
// while they wait (interruptible.h).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "exceptions.h"
#include "interruptible.h"
#include "ringlet/ringlet.h"
#include "tensor_view.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ringlet::python {
namespace {

using Input = nb::ndarray<nb::ro>;
using Output = nb::ndarray<>;
using Bytes = nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>;

ReduceOp reduce_op(int op) { return static_cast<ReduceOp>(op); }

// The bytes of a result as a numpy array that keeps them alive.
Bytes bytes_of(std::vector<std::byte>&& data) {
  auto* owned = new std::vector<std::byte>(std::move(data));
  nb::capsule owner(owned,
                    [](void* p) noexcept { delete static_cast<std::vector<std::byte>*>(p); });
  const size_t n = owned->size();
  return Bytes(owned->data(), {n}, owner);
}

// Device memory of a result as bytes that keep it alive, labelled as CUDA
// device `label`: a torch tensor (for ringlet.torch, labelled with the CUDA
// ordinal), or with no Framework a plain DLPack array, for frameworks that
// number their devices their own way (TensorFlow's from_dlpack reads the
// label as the N of /GPU:N).
template <typename... Framework>
nb::object device_bytes_of(Result& result, int label) {
  using DeviceBytes = nb::ndarray<Framework..., uint8_t, nb::ndim<1>>;
  auto* owned = new std::shared_ptr<void>(std::move(result.device_data));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
  const size_t n = result.device_bytes;
  return nb::cast(DeviceBytes(owned->get(), {n}, owner, {}, nb::dtype<uint8_t>(),
                              nb::device::cuda::value, label),
                  nb::rv_policy::reference);
}

// (data, shape, received splits): data is None where the collective wrote
// the caller's tensor, a numpy byte array for a host output, and for a
// device output a torch byte tensor on the device, or, with dlpack_device
// >= 0, a DLPack byte array labelled as that device.
std::tuple<nb::object, std::vector<int64_t>, std::vector<int64_t>> synchronize_handle(
    int64_t handle, int dlpack_device) {
  Result result = synchronize_interruptibly(handle);
  nb::object data = nb::none();
  if (result.device >= 0) {
    data = dlpack_device >= 0 ? device_bytes_of<>(result, dlpack_device)
                              : device_bytes_of<nb::pytorch>(result, result.device);
  } else if (!result.shape.empty() || !result.data.empty()) {
    data = nb::cast(bytes_of(std::move(result.data)), nb::rv_policy::reference);
  }
  return {std::move(data), std::move(result.shape), std::move(result.received_splits)};
}

// Host memory (a contiguous byte array, numpy's) seen as an array of
// `shape` and the DLPack dtype (code, bits), without a copy, keeping `source`
// alive: an array-API object (__dlpack__, __dlpack_device__) that ringlet.jax
// hands to the collectives as an output and then to jax.dlpack.from_dlpack.
// numpy cannot export bfloat16 through DLPack, nor label its memory with
// another dtype.
nb::object host_view(nb::object source, uint8_t code, uint8_t bits,
                     const std::vector<int64_t>& shape) {
  auto bytes = nb::cast<nb::ndarray<nb::device::cpu, nb::c_contig>>(source);
  size_t elements = 1;
  std::vector<size_t> extents;
  for (int64_t extent : shape) {
    if (extent < 0) throw Error(ErrorCode::kInvalidArgument, "host_view: a negative extent");
    extents.push_back(static_cast<size_t>(extent));
    elements *= static_cast<size_t>(extent);
  }
  if (bits % 8 != 0 || elements * (bits / 8) != bytes.nbytes()) {
    throw Error(ErrorCode::kInvalidArgument, "host_view: " + std::to_string(bytes.nbytes()) +
                                                 " bytes do not hold " + std::to_string(elements) +
                                                 " elements of " + std::to_string(bits) + " bits");
  }
  nb::dlpack::dtype dtype{code, bits, 1};
  return nb::cast(nb::ndarray<nb::array_api>(bytes.data(), extents.size(), extents.data(), source,
                                             nullptr, dtype, nb::device::cpu::value),
                  nb::rv_policy::reference);
}

}  // namespace
}  // namespace ringlet::python

NB_MODULE(_ringlet, m) {
  using namespace ringlet;
  using namespace ringlet::python;
  register_exception_translator();

  m.def(
      "init",
      [](std::optional<std::vector<std::vector<int>>> process_sets) {
        init_interruptibly(process_sets.value_or(std::vector<std::vector<int>>{}));
      },
      "process_sets"_a = nb::none());
  m.def("shutdown", [] {
    // The session ends whatever shutdown() says: the next one numbers its
    // handles afresh, so nothing of this one may be resumed in it.
    try {
      nb::gil_scoped_release released;
      shutdown();
    } catch (...) {
      forget_interrupted();
      throw;
    }
    forget_interrupted();
  });
  m.def("is_initialized", &is_initialized);
  m.def("rank", [] { return rank(); });
  m.def("size", [] { return size(); });
  m.def("local_rank", &local_rank);
  m.def("local_size", &local_size);
  m.def("cross_rank", &cross_rank);
  m.def("cross_size", &cross_size);
  m.def("build_info", &build_info);

  m.def(
      "allreduce_async",
      // `output` None: in place (one DLPack export fewer, a few microseconds
      // of the small-tensor step).
      [](const std::string& name, const Input& in, const std::optional<Output>& out, int op,
         double prescale, double postscale, int process_set, uintptr_t stream, int device) {
        const Tensor in_view = tensor_view(in, "allreduce_async", name, stream, device);
        const Tensor out_view =
            out ? tensor_view(*out, "allreduce_async", name, stream, device) : in_view;
        const int64_t h = allreduce_async(name, in_view, out_view, reduce_op(op), prescale,
                                          postscale, process_set);
        hold_until_synchronized(
            h, {{in}, out ? std::vector<nb::ndarray<>>{*out} : std::vector<nb::ndarray<>>{}});
        return h;
      },
      "name"_a, "input"_a, "output"_a.none(), "op"_a, "prescale"_a, "postscale"_a, "process_set"_a,
      "stream"_a = 0, "device"_a = -1);
  m.def(
      "grouped_allreduce_async",
      [](const std::vector<std::string>& names, const std::vector<Input>& ins,
         const std::vector<Output>& outs, int op, double prescale, double postscale,
         int process_set, uintptr_t stream, int device) {
        if (ins.size() != names.size() || outs.size() != names.size()) {
          throw Error(ErrorCode::kInvalidArgument,
                      "grouped allreduce: " + std::to_string(names.size()) + " names for " +
                          std::to_string(ins.size()) + " inputs and " +
                          std::to_string(outs.size()) + " outputs");
        }
        std::vector<Tensor> in_views, out_views;
        for (size_t i = 0; i < names.size(); ++i) {
          in_views.push_back(
              tensor_view(ins[i], "grouped_allreduce_async", names[i], stream, device));
          out_views.push_back(
              tensor_view(outs[i], "grouped_allreduce_async", names[i], stream, device));
        }
        std::vector<int64_t> handles = grouped_allreduce_async(
            names, in_views, out_views, reduce_op(op), prescale, postscale, process_set);
        for (size_t i = 0; i < handles.size(); ++i)
          hold_until_synchronized(handles[i], {{ins[i]}, {outs[i]}});
        return handles;
      },
      "names"_a, "inputs"_a, "outputs"_a, "op"_a, "prescale"_a, "postscale"_a, "process_set"_a,
      "stream"_a = 0, "device"_a = -1);
  m.def(
      "allgather_async",
      [](const std::string& name, const Input& in, int process_set, uintptr_t stream, int device) {
        const int64_t h = allgather_async(
            name, tensor_view(in, "allgather_async", name, stream, device), process_set);
        hold_until_synchronized(h, {{in}, {}});
        return h;
      },
      "name"_a, "input"_a, "process_set"_a, "stream"_a = 0, "device"_a = -1);
  m.def(
      "broadcast_async",
      [](const std::string& name, const Output& inout, int root, int process_set, uintptr_t stream,
         int device) {
        const int64_t h = broadcast_async(
            name, tensor_view(inout, "broadcast_async", name, stream, device), root, process_set);
        hold_until_synchronized(h, {{}, {inout}});
        return h;
      },
      "name"_a, "tensor"_a, "root"_a, "process_set"_a, "stream"_a = 0, "device"_a = -1);
  m.def(
      "reducescatter_async",
      [](const std::string& name, const Input& in, int op, double prescale, double postscale,
         int process_set, uintptr_t stream, int device) {
        const int64_t h =
            reducescatter_async(name, tensor_view(in, "reducescatter_async", name, stream, device),
                                reduce_op(op), prescale, postscale, process_set);
        hold_until_synchronized(h, {{in}, {}});
        return h;
      },
      "name"_a, "input"_a, "op"_a, "prescale"_a, "postscale"_a, "process_set"_a, "stream"_a = 0,
      "device"_a = -1);
  m.def(
      "alltoall_async",
      [](const std::string& name, const Input& in, std::vector<int64_t> splits, int process_set,
         uintptr_t stream, int device) {
        const int64_t h =
            alltoall_async(name, tensor_view(in, "alltoall_async", name, stream, device),
                           std::move(splits), process_set);
        hold_until_synchronized(h, {{in}, {}});
        return h;
      },
      "name"_a, "input"_a, "splits"_a, "process_set"_a, "stream"_a = 0, "device"_a = -1);

  m.def("host_view", &host_view, "bytes"_a, "code"_a, "bits"_a, "shape"_a,
        "Host bytes seen as an array of `shape` and DLPack dtype (code, bits), no copy.");

  m.def("poll", &poll, "handle"_a);
  m.def("synchronize", &synchronize_handle, "handle"_a, "dlpack_device"_a = -1,
        "Waits for the handle and releases it: (bytes or None, shape, received splits). "
        "A signal handler's exception leaves the handle pending.");
  m.def("join", &join_interruptibly);
  m.def("barrier", &barrier_interruptibly, "process_set"_a = 0);

  m.def(
      "add_process_set",
      [](const std::vector<int>& ranks) {
        nb::gil_scoped_release released;
        return add_process_set(ranks);
      },
      "ranks"_a);
  m.def(
      "remove_process_set",
      [](int id) {
        nb::gil_scoped_release released;
        remove_process_set(id);
      },
      "id"_a);
  m.def("process_set_ranks", &process_set_ranks, "id"_a);
  m.def("process_set_rank", &process_set_rank, "id"_a);
  m.def("process_set_size", &process_set_size, "id"_a);

  m.def("start_timeline", &start_timeline, "file"_a, "mark_cycles"_a = false);
  m.def("stop_timeline", &stop_timeline);

  // The values of ringlet::ReduceOp, for the framework layers' op tables.
  m.attr("OP_SUM") = static_cast<int>(ReduceOp::kSum);
  m.attr("OP_PROD") = static_cast<int>(ReduceOp::kProd);
  m.attr("OP_MIN") = static_cast<int>(ReduceOp::kMin);
  m.attr("OP_MAX") = static_cast<int>(ReduceOp::kMax);
  m.attr("OP_AVG") = static_cast<int>(ReduceOp::kAvg);
}
