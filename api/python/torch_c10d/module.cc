// ringlet.torch._c10d: the ringlet backend's constructor for
// ringlet/torch/distributed.py. A pybind11 module (not nanobind, as
// ringlet._ringlet is): torch's Backend is a pybind11 class, and the backend
// goes back to torch.distributed as one.
#include <torch/csrc/utils/pybind.h>

#include "torch_c10d/backend.h"

namespace py = pybind11;

PYBIND11_MODULE(_c10d, m) {
  // c10d::Backend's Python class must be registered before ours derives from it.
  py::module_::import("torch.distributed");
  py::class_<ringlet::torch_c10d::Backend, c10d::Backend,
             c10::intrusive_ptr<ringlet::torch_c10d::Backend>>(m, "Backend")
      .def(py::init([](int rank, int size, std::string group_name, int process_set,
                       std::vector<int> global_ranks, bool owns_runtime) {
             return c10::make_intrusive<ringlet::torch_c10d::Backend>(
                 rank, size, std::move(group_name), process_set, std::move(global_ranks),
                 owns_runtime);
           }),
           py::arg("rank"), py::arg("size"), py::arg("group_name"), py::arg("process_set"),
           py::arg("global_ranks"), py::arg("owns_runtime"));
  m.attr("TORCH_VERSION_BUILT") = py::str(RINGLET_TORCH_VERSION);
}
