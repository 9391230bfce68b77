// The one place where internal failures become public ones. The C++ API
// throws StatusError (a ringlet::Error) whose code the C ABI returns as is,
// so the mapping from cause to status is written once, here.
#pragma once

#include <string>
#include <string_view>

#include "ringlet/ringlet.h"
#include "ringlet/ringlet_c.h"

namespace ringlet::api {

class StatusError : public Error {
 public:
  StatusError(ringlet_status status, const std::string& what) : Error(what), status_(status) {}
  ringlet_status status() const { return status_; }

 private:
  ringlet_status status_;
};

// Call inside a catch block: rethrows the exception in flight as a
// StatusError whose message says which call failed on which rank and why.
// `rank` is -1 before the rank is known.
[[noreturn]] void rethrow_as_status(std::string_view call, int rank);

}  // namespace ringlet::api
