#include "status_error.h"

#include <new>
#include <stdexcept>

#include "core/config.h"

namespace ringlet::api {
namespace {

std::string where(std::string_view call, int rank) {
  std::string text = "ringlet: ";
  text += call;
  if (rank >= 0) text += " on rank " + std::to_string(rank);
  return text;
}

}  // namespace

ErrorCode code_of(core::runtime::ErrorKind kind) {
  using core::runtime::ErrorKind;
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return ErrorCode::kInvalidArgument;
    case ErrorKind::kMismatch:
      return ErrorCode::kMismatch;
    case ErrorKind::kPeerLost:
      return ErrorCode::kPeerLost;
    case ErrorKind::kTimeout:
      return ErrorCode::kTimeout;
    case ErrorKind::kShutdown:
    case ErrorKind::kStalled:
      return ErrorCode::kAborted;
    case ErrorKind::kConfig:
      return ErrorCode::kConfig;
    case ErrorKind::kTransport:
    case ErrorKind::kInternal:
      return ErrorCode::kInternal;
  }
  return ErrorCode::kInternal;
}

Error error_of(const common::Failure& f, std::string_view call, int rank) {
  // where() names this rank; a failure reported by another rank (which
  // should not reach here) keeps its own.
  const int own = rank >= 0 ? rank : f.rank();
  std::string text = where(call, own) + ": ";
  if (f.kind() == common::FailureKind::kTransport) text += "transport error: ";
  text += f.rank() < 0 || f.rank() == own ? f.body() : std::string(f.what());
  return Error(code_of(f.kind()), text);
}

void rethrow_as_error(std::string_view call, int rank) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const common::Failure& e) {
    throw error_of(e, call, rank);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kInternal, where(call, rank) + ": out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, where(call, rank) + ": " + e.what());
  } catch (...) {
    throw Error(ErrorCode::kInternal, where(call, rank) + ": unknown exception");
  }
}

}  // namespace ringlet::api
