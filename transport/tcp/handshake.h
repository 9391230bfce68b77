// The data-link handshake: mutual challenge and response under the job's key,
// before a single byte of data flows. TCP links run it on their socket; UCX
// links (transport/ucx/) run the same frames as tagged messages, under labels
// of their own (Identity::link). Pure functions over fixed-size
// frames (no I/O, no randomness, no clock): the carrier feeds them bytes and
// nonces, and a fuzzer can feed them anything.
//
//   dialer   -> acceptor   HELLO      from, to, job digest, dialer nonce
//   acceptor -> dialer     CHALLENGE  from, to, job digest, acceptor nonce,
//                                     MAC("accept", both nonces, job, acceptor, dialer)
//   dialer   -> acceptor   PROOF      from, to, job digest,
//                                     MAC("dial", both nonces, job, dialer, acceptor)
//   acceptor -> dialer     WELCOME    from, to, job digest: the link is taken
//                                     (without it a dialer whose connection was
//                                     dropped, e.g. for taking too long, retries)
//
// Each side's MAC covers the nonce the other side just drew, so a recorded
// exchange proves nothing on a new connection; the direction label and the
// rank order keep one side's MAC from passing as the other's. Every frame is
// kFrameBytes long:
//
//   magic "RLTH" | version u16 | kind u16 | from i32 | to i32 |
//   job digest[32] | nonce[32] | mac[32]                (integers little-endian)
//
// The job digest (SHA-256 of the job id) lets a listener tell a stray
// connection from another job apart from a forgery in its log; the MACs are
// what decide.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ringlet::transport::tcp::handshake {

inline constexpr size_t kFrameBytes = 4 + 2 + 2 + 4 + 4 + 32 + 32 + 32;
inline constexpr uint16_t kVersion = 1;
inline constexpr std::string_view kTcpLink = "tcp-link";
inline constexpr std::string_view kUcxLink = "ucx-link";

using Frame = std::array<uint8_t, kFrameBytes>;
using Bytes32 = std::array<uint8_t, 32>;  // nonces, MACs, job digests

enum class Kind : uint16_t { kHello = 1, kChallenge = 2, kProof = 3, kWelcome = 4 };

struct Message {
  Kind kind = Kind::kHello;
  int32_t from = -1;  // the rank that sends this frame
  int32_t to = -1;    // the rank it means to reach
  Bytes32 job{};      // job_digest() of the sender's job id
  Bytes32 nonce{};    // zero in a PROOF
  Bytes32 mac{};      // zero in a HELLO
};

// What one side of a link knows before the handshake.
struct Identity {
  std::span<const uint8_t> key;  // the job's secret; must not be empty
  Bytes32 job{};                 // job_digest(job id)
  int32_t rank = -1;             // this side
  int32_t size = 0;              // ranks in the job
  // The kind of link, in every MAC's label ("ringlet/<link>/v1/dial").
  std::string_view link = kTcpLink;
};

Bytes32 job_digest(std::string_view job_id);

Frame encode(const Message& message);

// A frame's shape only: magic, version, kind, and ranks within [0, size).
// Returns false with `why` set otherwise. Never reads past `bytes`; anything
// but exactly kFrameBytes is refused.
bool parse(std::span<const uint8_t> bytes, int32_t size, Message& out, std::string& why);

// The MAC that `prover` sends to `verifier`; `dialing` says which side proves.
Bytes32 proof(std::span<const uint8_t> key, bool dialing, const Bytes32& dialer_nonce,
              const Bytes32& acceptor_nonce, const Bytes32& job, int32_t prover,
              int32_t verifier, std::string_view link = kTcpLink);

// The steps, each from one side's point of view. A check returns false with
// `why` (for the log or the error) and leaves the link to be dropped.

// Dialer: its opening frame.
Frame hello(const Identity& me, int32_t peer, const Bytes32& dialer_nonce);

// Acceptor: a HELLO meant for it from another rank of its job. On success
// `dialer` is the sender and `dialer_nonce` its nonce.
bool check_hello(const Identity& me, std::span<const uint8_t> bytes, int32_t& dialer,
                 Bytes32& dialer_nonce, std::string& why);

// Acceptor: its answer, proving the key over the dialer's nonce.
Frame challenge(const Identity& me, int32_t dialer, const Bytes32& dialer_nonce,
                const Bytes32& acceptor_nonce);

// Dialer: the CHALLENGE from `peer` must prove the key over its own nonce. On
// success `acceptor_nonce` is the acceptor's nonce.
bool check_challenge(const Identity& me, int32_t peer, const Bytes32& dialer_nonce,
                     std::span<const uint8_t> bytes, Bytes32& acceptor_nonce, std::string& why);

// Dialer: its proof over the acceptor's nonce.
Frame proof_frame(const Identity& me, int32_t peer, const Bytes32& dialer_nonce,
                  const Bytes32& acceptor_nonce);

// Acceptor: the dialer's PROOF must prove the key over its own nonce.
bool check_proof(const Identity& me, int32_t dialer, const Bytes32& dialer_nonce,
                 const Bytes32& acceptor_nonce, std::span<const uint8_t> bytes, std::string& why);

// Acceptor: the link is taken.
Frame welcome(const Identity& me, int32_t dialer);

// Dialer: the acceptor's WELCOME.
bool check_welcome(const Identity& me, int32_t peer, std::span<const uint8_t> bytes,
                   std::string& why);

}  // namespace ringlet::transport::tcp::handshake
