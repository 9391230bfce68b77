// The 64-bit UCX tag of every message a UCX link sends:
//
//   kind (2 bits) | sender's rank (22 bits) | sequence (40 bits)
//
// UCX matches tags per worker, not per endpoint, so the sender's rank is what
// tells one peer's messages from another's. The sequence numbers a pair's
// data messages per direction (the k-th send carries k, the k-th receive asks
// for k with every bit matched), so that matching is exactly the transport
// contract's "k-th send meets the peer's k-th receive" without relying on how
// UCX orders messages. It wraps at 2^40, far beyond any number in flight.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>

namespace ringlet::transport::ucx {

enum class TagKind : uint64_t {
  kData = 0,       // a pair's payload, sequence = its number in the direction
  kHandshake = 1,  // a data-link handshake frame (tcp/handshake.h)
  kNotice = 2,     // a pair's notice: size mismatch or closed (ucx_pair.h)
};

inline constexpr int kSeqBits = 40;
inline constexpr int kRankBits = 22;
inline constexpr int kMaxRanks = 1 << kRankBits;
inline constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;

inline constexpr ucp_tag_t make_tag(TagKind kind, int from, uint64_t seq = 0) {
  return (static_cast<uint64_t>(kind) << (kRankBits + kSeqBits)) |
         (static_cast<uint64_t>(from) << kSeqBits) | (seq & kSeqMask);
}

// Matches every bit: one message of one sender.
inline constexpr ucp_tag_t kExactMask = ~ucp_tag_t{0};
// Matches the kind and the sender, any sequence.
inline constexpr ucp_tag_t kSenderMask = ~kSeqMask;
// Matches the kind only: any sender.
inline constexpr ucp_tag_t kKindMask = ~((uint64_t{1} << (kRankBits + kSeqBits)) - 1);

inline constexpr int tag_sender(ucp_tag_t tag) {
  return static_cast<int>((tag >> kSeqBits) & (kMaxRanks - 1));
}

}  // namespace ringlet::transport::ucx
