#include "tcp/handshake.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "ringlet/common/failure.h"
#include "ringlet/common/hmac.h"

namespace ringlet::transport::tcp::handshake {
namespace {

constexpr std::array<uint8_t, 4> kMagic = {'R', 'L', 'T', 'H'};
// Domain labels, "ringlet/<link>/v1/dial" and ".../accept": a MAC made for
// one direction, one kind of link (or for the store) is never valid in
// another place.
std::string label(std::string_view link, bool dialing) {
  return "ringlet/" + std::string(link) + "/v1/" + (dialing ? "dial" : "accept");
}

void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

bool same(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return common::Hmac::equal(a, b);
}

std::string rank_text(int32_t r) { return "rank " + std::to_string(r); }

// Shape, then the fields every step checks alike: the kind, the job, and
// that the frame is addressed from `from` (any rank when -1) to `me`.
bool accept_frame(const Identity& me, std::span<const uint8_t> bytes, Kind kind, int32_t from,
                  Message& m, std::string& why) {
  if (!parse(bytes, me.size, m, why)) return false;
  if (m.kind != kind) {
    why = "expected frame kind " + std::to_string(static_cast<int>(kind)) + ", got " +
          std::to_string(static_cast<int>(m.kind));
    return false;
  }
  if (!same(m.job, me.job)) {
    why = "the sender belongs to another job (job id differs)";
    return false;
  }
  if (m.to != me.rank) {
    why = "the frame is addressed to " + rank_text(m.to) + ", not to this " + rank_text(me.rank);
    return false;
  }
  if (m.from == me.rank || (from >= 0 && m.from != from)) {
    why = "the frame claims to come from " + rank_text(m.from) +
          (from >= 0 ? ", expected " + rank_text(from) : std::string(", this rank itself"));
    return false;
  }
  return true;
}

}  // namespace

Bytes32 job_digest(std::string_view job_id) {
  return common::sha256(
      {reinterpret_cast<const uint8_t*>(job_id.data()), job_id.size()});
}

Frame encode(const Message& m) {
  Frame f{};
  uint8_t* p = f.data();
  std::copy(kMagic.begin(), kMagic.end(), p);
  put_u16(p + 4, kVersion);
  put_u16(p + 6, static_cast<uint16_t>(m.kind));
  put_u32(p + 8, static_cast<uint32_t>(m.from));
  put_u32(p + 12, static_cast<uint32_t>(m.to));
  std::copy(m.job.begin(), m.job.end(), p + 16);
  std::copy(m.nonce.begin(), m.nonce.end(), p + 48);
  std::copy(m.mac.begin(), m.mac.end(), p + 80);
  return f;
}

bool parse(std::span<const uint8_t> bytes, int32_t size, Message& out, std::string& why) {
  if (bytes.size() != kFrameBytes) {
    why = "handshake frame of " + std::to_string(bytes.size()) + " bytes, expected " +
          std::to_string(kFrameBytes);
    return false;
  }
  const uint8_t* p = bytes.data();
  if (!std::equal(kMagic.begin(), kMagic.end(), p)) {
    why = "not a Ringlet data-link handshake (bad magic)";
    return false;
  }
  if (const uint16_t v = get_u16(p + 4); v != kVersion) {
    why = "handshake version " + std::to_string(v) + ", expected " + std::to_string(kVersion);
    return false;
  }
  const uint16_t kind = get_u16(p + 6);
  if (kind < static_cast<uint16_t>(Kind::kHello) || kind > static_cast<uint16_t>(Kind::kWelcome)) {
    why = "unknown handshake frame kind " + std::to_string(kind);
    return false;
  }
  const auto from = static_cast<int32_t>(get_u32(p + 8));
  const auto to = static_cast<int32_t>(get_u32(p + 12));
  if (from < 0 || from >= size || to < 0 || to >= size) {
    why = "ranks " + std::to_string(from) + " -> " + std::to_string(to) +
          " outside a job of " + std::to_string(size);
    return false;
  }
  out.kind = static_cast<Kind>(kind);
  out.from = from;
  out.to = to;
  std::copy(p + 16, p + 48, out.job.begin());
  std::copy(p + 48, p + 80, out.nonce.begin());
  std::copy(p + 80, p + 112, out.mac.begin());
  return true;
}

Bytes32 proof(std::span<const uint8_t> key, bool dialing, const Bytes32& dialer_nonce,
              const Bytes32& acceptor_nonce, const Bytes32& job, int32_t prover,
              int32_t verifier, std::string_view link) {
  if (key.empty()) throw common::caller_error("data-link handshake with an empty key");
  const std::string text = label(link, dialing);
  std::vector<uint8_t> data(text.begin(), text.end());
  data.insert(data.end(), dialer_nonce.begin(), dialer_nonce.end());
  data.insert(data.end(), acceptor_nonce.begin(), acceptor_nonce.end());
  data.insert(data.end(), job.begin(), job.end());
  uint8_t ranks[8];
  put_u32(ranks, static_cast<uint32_t>(prover));
  put_u32(ranks + 4, static_cast<uint32_t>(verifier));
  data.insert(data.end(), ranks, ranks + 8);
  return common::Hmac(std::vector<uint8_t>(key.begin(), key.end())).compute({data});
}

Frame hello(const Identity& me, int32_t peer, const Bytes32& dialer_nonce) {
  return encode({Kind::kHello, me.rank, peer, me.job, dialer_nonce, {}});
}

bool check_hello(const Identity& me, std::span<const uint8_t> bytes, int32_t& dialer,
                 Bytes32& dialer_nonce, std::string& why) {
  Message m;
  if (!accept_frame(me, bytes, Kind::kHello, -1, m, why)) return false;
  dialer = m.from;
  dialer_nonce = m.nonce;
  return true;
}

Frame challenge(const Identity& me, int32_t dialer, const Bytes32& dialer_nonce,
                const Bytes32& acceptor_nonce) {
  return encode({Kind::kChallenge, me.rank, dialer, me.job, acceptor_nonce,
                 proof(me.key, /*dialing=*/false, dialer_nonce, acceptor_nonce, me.job, me.rank,
                       dialer, me.link)});
}

bool check_challenge(const Identity& me, int32_t peer, const Bytes32& dialer_nonce,
                     std::span<const uint8_t> bytes, Bytes32& acceptor_nonce, std::string& why) {
  Message m;
  if (!accept_frame(me, bytes, Kind::kChallenge, peer, m, why)) return false;
  const Bytes32 expected =
      proof(me.key, /*dialing=*/false, dialer_nonce, m.nonce, me.job, peer, me.rank, me.link);
  if (!same(expected, m.mac)) {
    why = rank_text(peer) + "'s listener did not prove the job secret (RINGLET_SECRET differs?)";
    return false;
  }
  acceptor_nonce = m.nonce;
  return true;
}

Frame proof_frame(const Identity& me, int32_t peer, const Bytes32& dialer_nonce,
                  const Bytes32& acceptor_nonce) {
  return encode({Kind::kProof, me.rank, peer, me.job, {},
                 proof(me.key, /*dialing=*/true, dialer_nonce, acceptor_nonce, me.job, me.rank,
                       peer, me.link)});
}

bool check_proof(const Identity& me, int32_t dialer, const Bytes32& dialer_nonce,
                 const Bytes32& acceptor_nonce, std::span<const uint8_t> bytes,
                 std::string& why) {
  Message m;
  if (!accept_frame(me, bytes, Kind::kProof, dialer, m, why)) return false;
  const Bytes32 expected =
      proof(me.key, /*dialing=*/true, dialer_nonce, acceptor_nonce, me.job, dialer, me.rank,
            me.link);
  if (!same(expected, m.mac)) {
    why = "the peer claiming to be " + rank_text(dialer) +
          " did not prove the job secret (RINGLET_SECRET differs?)";
    return false;
  }
  return true;
}

Frame welcome(const Identity& me, int32_t dialer) {
  return encode({Kind::kWelcome, me.rank, dialer, me.job, {}, {}});
}

bool check_welcome(const Identity& me, int32_t peer, std::span<const uint8_t> bytes,
                   std::string& why) {
  Message m;
  return accept_frame(me, bytes, Kind::kWelcome, peer, m, why);
}

}  // namespace ringlet::transport::tcp::handshake
