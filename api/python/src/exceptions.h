// ringlet::Error reaches Python as the exception class that Horovod users
// catch: ringlet.common.exceptions maps each ErrorCode to one (a
// RuntimeError subclass, HorovodInternalError, for failures across ranks; a
// ValueError for this rank's wrong call).
#pragma once

namespace ringlet::python {

void register_exception_translator();

}  // namespace ringlet::python
