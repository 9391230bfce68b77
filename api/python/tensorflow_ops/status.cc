#include "status.h"

#include <string>
#include <string_view>

#include <ringlet/ringlet.h>

#include "absl/strings/cord.h"

namespace ringlet::tensorflow_ops {

// Ringlet's error as the TensorFlow status Horovod gives the same cause
// (ConvertStatus in horovod/tensorflow/mpi_ops.cc over its controller's
// statuses): a wrong call is InvalidArgument; ranks that disagree about a
// collective, and a call before init(), are FailedPrecondition; the rest
// (a lost or silent peer, a shutdown, an internal failure) is Unknown, which
// Horovod's elastic wrappers catch (ringlet/tensorflow/errors.py's
// tf_error_class is this table). The payload kErrorCodePayload carries
// ringlet::ErrorCode in decimal (errors.py's ERROR_CODE_PAYLOAD), so that the
// exact ringlet.common.exceptions class is raised eagerly without reading
// the text.
absl::Status status_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    absl::Status status;
    switch (e.code()) {
      case ErrorCode::kInvalidArgument:
        status = absl::InvalidArgumentError(e.what());
        break;
      case ErrorCode::kNotInitialized:
      case ErrorCode::kMismatch:
        status = absl::FailedPreconditionError(e.what());
        break;
      default:
        status = absl::UnknownError(e.what());
    }
    // From a view: TensorFlow's own absl exports that constructor only.
    const std::string code = std::to_string(static_cast<int>(e.code()));
    status.SetPayload(kErrorCodePayload, absl::Cord(std::string_view(code)));
    return status;
  } catch (const std::exception& e) {
    return absl::UnknownError(e.what());
  } catch (...) {
    return absl::UnknownError("ringlet: unknown exception");
  }
}

}  // namespace ringlet::tensorflow_ops
