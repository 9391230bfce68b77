// The rendezvous store's wire format, shared by server and client.
//
//   hello (server -> client, once, on accept):  "RLS1" | nonce[16]
//   client nonce (client -> server, once, before its first frame):  nonce[16]
//   frame (both ways):  length u32 | op u8 | payload[length] | mac[32]
//   mac = HMAC-SHA256(key, length | op | payload | server nonce | client nonce |
//                          direction u8 | sequence u64)
//
// Integers are big-endian. Both ends draw a fresh nonce per connection and
// the sequence counts the frames of one direction of it, so a recorded frame
// is worth nothing when replayed: not on another connection (whichever end
// the replayer plays), not later on the same one, not reflected back the
// other way.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringlet/common/hmac.h"

namespace ringlet::core::bootstrap::wire {

using common::Digest;
using common::Hmac;

enum class Op : uint8_t {
  kSet = 1,  // key, value -> ok
  kGet = 2,  // key -> ok(value), answered only once the key exists
  kAdd = 3,  // key, delta i64 -> ok(new value i64); the value is stored as decimal text
  kTryGet = 4,  // key -> ok(found u8 | value), at once
  kWill = 5,    // key, value -> ok; when this connection closes, the server sets
                // key to value unless key is set by then (the last one sent
                // counts; an empty key takes it back)
  kOk = 0x80,
  kError = 0x81,    // an authenticated request the server could not do (text)
  kRefused = 0x82,  // best effort, unauthenticated: why the server drops this connection
};

enum class Direction : uint8_t { kToServer = 0, kToClient = 1 };

using Nonce = std::array<uint8_t, 16>;
inline constexpr std::array<uint8_t, 4> kMagic = {'R', 'L', 'S', '1'};
inline constexpr size_t kHelloBytes = kMagic.size() + Nonce{}.size();
inline constexpr size_t kHeaderBytes = 5;
// The key under which a server keeps its identity: the client reads it to
// tell one store from another behind the same address.
inline constexpr char kInstanceKey[] = "ringlet.store/instance";
inline constexpr size_t kMacBytes = 32;
// Nothing exchanged at rendezvous comes near this; a length beyond it is garbage
// or an attack, and must not make the server buffer it.
inline constexpr uint32_t kMaxPayload = 64u << 20;
inline constexpr uint32_t kMaxKey = 4096;

struct Frame {
  Op op{};
  std::vector<uint8_t> payload;
};

// Where one connection's direction stands: the next sequence number to use or expect.
struct Channel {
  const Hmac* hmac = nullptr;
  Nonce nonce{};  // the server's, from its hello
  Direction direction{};
  uint64_t sequence = 0;
  Nonce client_nonce{};  // the client's, sent before its first frame
};

std::vector<uint8_t> encode(Channel& channel, Op op, std::span<const uint8_t> payload);

// An unauthenticated kRefused frame (its MAC is zeros).
std::vector<uint8_t> encode_refusal(const std::string& why);

enum class Status { kNeedMore, kFrame, kBad };
struct Decoded {
  Status status = Status::kNeedMore;
  Frame frame;
  size_t consumed = 0;  // bytes of the buffer the frame took
  std::string why;      // for kBad
};

// Looks at the start of `buffer`. Refuses a too-long length as soon as the
// header is in, without waiting for the body. With `accept_refusal`, a
// kRefused frame passes unauthenticated (clients use this to report why).
Decoded decode(Channel& channel, std::span<const uint8_t> buffer, bool accept_refusal = false);

// A request as the server reads it from an authenticated frame: kSet and
// kWill carry key | value, kGet and kTryGet a key (anything after it is
// ignored), kAdd key | delta i64.
struct Request {
  Op op{};
  std::string key;
  std::span<const uint8_t> value;  // kSet, kWill; a view into the frame's payload
  int64_t delta = 0;               // kAdd
};

// A frame that authenticated but does not hold a request the server knows.
class BadRequest : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads `frame` (which must outlive the result). Throws BadRequest naming
// what is wrong: an unknown op, a malformed key, an ADD whose delta is not
// 8 bytes.
Request parse_request(const Frame& frame);

// Payload helpers: a key is u32 length | bytes.
void put_u32(std::vector<uint8_t>& out, uint32_t v);
void put_u64(std::vector<uint8_t>& out, uint64_t v);
uint32_t get_u32(const uint8_t* p);
uint64_t get_u64(const uint8_t* p);
std::vector<uint8_t> key_payload(const std::string& key, std::span<const uint8_t> rest = {});
// Splits a payload into key and the rest; false when malformed.
bool split_key(std::span<const uint8_t> payload, std::string& key, std::span<const uint8_t>& rest);

}  // namespace ringlet::core::bootstrap::wire
