#include "ringlet/common/failure.h"

#include <algorithm>
#include <utility>

namespace ringlet::common {

std::string_view to_string(FailureKind k) {
  switch (k) {
    case FailureKind::kInvalidArgument:
      return "invalid argument";
    case FailureKind::kMismatch:
      return "mismatch across ranks";
    case FailureKind::kPeerLost:
      return "peer lost";
    case FailureKind::kTimeout:
      return "timeout";
    case FailureKind::kShutdown:
      return "shut down";
    case FailureKind::kStalled:
      return "stalled";
    case FailureKind::kConfig:
      return "configuration error";
    case FailureKind::kTransport:
      return "transport error";
    case FailureKind::kInternal:
      return "internal";
  }
  return "internal";
}

std::string names_text(std::span<const std::string> names) {
  std::string s;
  const size_t shown = std::min<size_t>(names.size(), 4);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown) s += " and " + std::to_string(names.size() - shown) + " more";
  return s;
}

Failure::Failure(FailureKind kind, int rank, int peer, std::string cause)
    : std::runtime_error(cause), kind_(kind), rank_(rank), peer_(peer), cause_(std::move(cause)) {
  refresh();
}

Failure& Failure::at_rank(int rank) {
  if (rank_ < 0) rank_ = rank;
  refresh();
  return *this;
}

Failure& Failure::with_peer(int peer) {
  if (peer_ < 0) peer_ = peer;
  return *this;
}

Failure& Failure::in_collective(std::string_view collective) {
  if (collective_.empty()) collective_ = collective;
  refresh();
  return *this;
}

Failure& Failure::for_tensor(std::string_view tensor) {
  if (tensors_.empty()) tensors_.emplace_back(tensor);
  refresh();
  return *this;
}

Failure& Failure::for_tensors(std::span<const std::string> tensors) {
  if (tensors_.empty()) tensors_.assign(tensors.begin(), tensors.end());
  refresh();
  return *this;
}

Failure& Failure::set_kind(FailureKind kind) {
  kind_ = kind;
  return *this;
}

Failure& Failure::set_peer(int peer) {
  peer_ = peer;
  return *this;
}

Failure& Failure::set_cause(std::string cause) {
  cause_ = std::move(cause);
  refresh();
  return *this;
}

Failure& Failure::add_cause(std::string_view more) {
  if (!more.empty()) {
    cause_ += "; ";
    cause_ += more;
  }
  refresh();
  return *this;
}

std::string Failure::body() const {
  const std::string cause = cause_.empty() ? std::string("unknown error") : cause_;
  if (!tensors_.empty()) {
    return (collective_.empty() ? std::string("collective") : collective_) + " of " +
           names_text(tensors_) + " failed: " + cause;
  }
  if (!collective_.empty()) return cause + " in " + collective_;
  return cause;
}

std::string Failure::told() const {
  return rank_ >= 0 ? "rank " + std::to_string(rank_) + ": " + cause_ : cause_;
}

void Failure::refresh() {
  text_ = rank_ >= 0 ? "rank " + std::to_string(rank_) + ": " + body() : body();
}

}  // namespace ringlet::common
