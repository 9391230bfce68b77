// The one place where internal failures become public ones: every failure
// leaves the C++ API as a ringlet::Error whose code the C ABI returns as is,
// so the mapping from cause to code is written once, here.
#pragma once

#include <string_view>

#include "core/runtime/runtime_error.h"
#include "ringlet/ringlet.h"

namespace ringlet::api {

// The runtime says what kind of failure it met; the public code says what the
// caller can do about it. Shutdown and stall shutdown are one thing to a
// caller: the collective never ran and will not.
ErrorCode code_of(core::runtime::ErrorKind kind);

// The public error for a failure met in `call` on `rank`: its code from the
// kind, its message formatted once from the fields,
// "ringlet: <call> on rank <rank>: <collective> of <tensor> failed: <cause>".
Error error_of(const common::Failure& f, std::string_view call, int rank);

// Call inside a catch block: rethrows the exception in flight as an Error
// whose message says which call failed on which rank and why. `rank` is -1
// before the rank is known.
[[noreturn]] void rethrow_as_error(std::string_view call, int rank);

}  // namespace ringlet::api
