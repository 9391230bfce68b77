#include "exceptions.h"

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace ringlet::python {
namespace {

void raise(const Error& e, bool during_init) {
  nb::object error = as_python(e, during_init);
  if (!error.is_valid()) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return;
  }
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
}

}  // namespace

nb::object as_python(const Error& e, bool during_init) {
  // The classes live in Python, where users import them from; the module is
  // part of this package, so importing it cannot fail short of a broken
  // install, and then the error still reaches the caller as RuntimeError.
  try {
    nb::object exceptions = nb::module_::import_("ringlet.common.exceptions");
    nb::object type =
        exceptions.attr("exception_for_code")(static_cast<int>(e.code()), during_init);
    nb::object error = type(e.what());
    error.attr("code") = static_cast<int>(e.code());
    return error;
  } catch (const nb::python_error&) {
    return nb::steal(PyObject_CallFunction(PyExc_RuntimeError, "s", e.what()));
  }
}

void throw_as_python(const Error& e, bool during_init) {
  raise(e, during_init);
  throw nb::python_error();
}

void register_exception_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(e, false);
    }
  });
}

}  // namespace ringlet::python
