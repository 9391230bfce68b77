#include "status_error.h"

#include <new>
#include <stdexcept>

#include "core/config.h"
#include "ringlet/transport/transport.h"

namespace ringlet::api {
namespace {

std::string where(std::string_view call, int rank) {
  std::string text = "ringlet: ";
  text += call;
  if (rank >= 0) text += " on rank " + std::to_string(rank);
  return text;
}

// The core's messages often start with "rank R: " for this rank, which
// where() has already said.
std::string without_own_rank(std::string what, int rank) {
  const std::string own = "rank " + std::to_string(rank) + ": ";
  if (rank >= 0 && what.rfind(own, 0) == 0) what.erase(0, own.size());
  return what;
}

// Transport errors already name the peer in their text; the peer number is
// added only when the text does not carry it.
std::string peer_part(const transport::Error& e, int rank) {
  std::string what = without_own_rank(e.what(), rank);
  if (e.peer() >= 0 && what.find("peer") == std::string::npos &&
      what.find("rank") == std::string::npos) {
    return "peer " + std::to_string(e.peer()) + ": " + what;
  }
  return what;
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
    case ErrorKind::kInternal:
      return ErrorCode::kInternal;
  }
  return ErrorCode::kInternal;
}

void rethrow_as_error(std::string_view call, int rank) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const core::runtime::RuntimeError& e) {
    throw Error(code_of(e.kind()), where(call, rank) + ": " + without_own_rank(e.what(), rank));
  } catch (const core::ConfigError& e) {
    // Configuration messages already say "ringlet: ..." and name the variable.
    throw Error(ErrorCode::kConfig, where(call, rank) + ": " + without_own_rank(e.what(), rank));
  } catch (const transport::PeerLost& e) {
    throw Error(ErrorCode::kPeerLost, where(call, rank) + ": peer lost: " + peer_part(e, rank));
  } catch (const transport::Timeout& e) {
    throw Error(ErrorCode::kTimeout, where(call, rank) + ": timed out: " + peer_part(e, rank));
  } catch (const transport::Error& e) {
    throw Error(ErrorCode::kInternal,
                where(call, rank) + ": transport error: " + peer_part(e, rank));
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorCode::kInvalidArgument,
                where(call, rank) + ": " + without_own_rank(e.what(), rank));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kInternal, where(call, rank) + ": out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, where(call, rank) + ": " + without_own_rank(e.what(), rank));
  } catch (...) {
    throw Error(ErrorCode::kInternal, where(call, rank) + ": unknown exception");
  }
}

}  // namespace ringlet::api
