// ringlet::Error reaches Python as the exception class that Horovod users
// catch: ringlet.common.exceptions maps each ErrorCode to one (a
// RuntimeError subclass, HorovodInternalError, for failures across ranks; a
// ValueError for this rank's wrong call and for a failed init()).
#pragma once

#include <nanobind/nanobind.h>

#include "ringlet/ringlet.h"

namespace ringlet::python {

void register_exception_translator();

// The exception object `e` is raised as (see throw_as_python). Needs the GIL.
nanobind::object as_python(const Error& e, bool during_init);

// Raises `e` in Python as the translator would, or, with `during_init`, as
// init() raises it (a ValueError whatever the cause, as in Horovod). Needs
// the GIL; throws nanobind::python_error.
[[noreturn]] void throw_as_python(const Error& e, bool during_init);

}  // namespace ringlet::python
