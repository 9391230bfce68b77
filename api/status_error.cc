#include "status_error.h"

#include <new>
#include <stdexcept>

#include "core/config.h"
#include "core/runtime/runtime_error.h"
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

// The runtime completes handles with text only (its failures cross threads
// and ranks); the status follows from what the text says.
ringlet_status runtime_status(std::string_view what) {
  if (what.find("timed out") != std::string_view::npos) return RINGLET_ERR_TIMEOUT;
  for (std::string_view lost : {"lost", "closed", "died", "exited", "connection", "is gone"}) {
    if (what.find(lost) != std::string_view::npos) return RINGLET_ERR_PEER_LOST;
  }
  if (what.find("already in flight") != std::string_view::npos ||
      what.find("Mismatched") != std::string_view::npos || what.find("unknown handle") != std::string_view::npos) {
    return RINGLET_ERR_INVALID_ARGUMENT;
  }
  return RINGLET_ERR_INTERNAL;
}

}  // namespace

void rethrow_as_status(std::string_view call, int rank) {
  try {
    throw;
  } catch (const StatusError&) {
    throw;
  } catch (const core::runtime::RuntimeError& e) {
    throw StatusError(runtime_status(e.what()), where(call, rank) + ": " + without_own_rank(e.what(), rank));
  } catch (const core::ConfigError& e) {
    // Configuration messages already say "ringlet: ..." and name the variable.
    throw StatusError(RINGLET_ERR_CONFIG, where(call, rank) + ": " + without_own_rank(e.what(), rank));
  } catch (const transport::PeerLost& e) {
    throw StatusError(RINGLET_ERR_PEER_LOST, where(call, rank) + ": peer lost: " + peer_part(e, rank));
  } catch (const transport::Timeout& e) {
    throw StatusError(RINGLET_ERR_TIMEOUT, where(call, rank) + ": timed out: " + peer_part(e, rank));
  } catch (const transport::Error& e) {
    throw StatusError(RINGLET_ERR_INTERNAL, where(call, rank) + ": transport error: " + peer_part(e, rank));
  } catch (const std::invalid_argument& e) {
    throw StatusError(RINGLET_ERR_INVALID_ARGUMENT, where(call, rank) + ": " + without_own_rank(e.what(), rank));
  } catch (const std::bad_alloc&) {
    throw StatusError(RINGLET_ERR_INTERNAL, where(call, rank) + ": out of memory");
  } catch (const std::exception& e) {
    throw StatusError(RINGLET_ERR_INTERNAL, where(call, rank) + ": " + without_own_rank(e.what(), rank));
  } catch (...) {
    throw StatusError(RINGLET_ERR_INTERNAL, where(call, rank) + ": unknown exception");
  }
}

}  // namespace ringlet::api
