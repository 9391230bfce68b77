#include "core/bootstrap/store_wire.h"

namespace ringlet::core::bootstrap::wire {
namespace {

Digest mac_of(const Channel& c, std::span<const uint8_t> header, std::span<const uint8_t> payload) {
  std::vector<uint8_t> trailer(c.nonce.begin(), c.nonce.end());
  trailer.insert(trailer.end(), c.client_nonce.begin(), c.client_nonce.end());
  trailer.push_back(static_cast<uint8_t>(c.direction));
  put_u64(trailer, c.sequence);
  return c.hmac->compute({header, payload, trailer});
}

}  // namespace

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int s = 56; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

std::vector<uint8_t> encode(Channel& channel, Op op, std::span<const uint8_t> payload) {
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + payload.size() + kMacBytes);
  put_u32(out, static_cast<uint32_t>(payload.size()));
  out.push_back(static_cast<uint8_t>(op));
  out.insert(out.end(), payload.begin(), payload.end());
  const Digest mac = mac_of(channel, std::span(out).first(kHeaderBytes), payload);
  out.insert(out.end(), mac.begin(), mac.end());
  ++channel.sequence;
  return out;
}

std::vector<uint8_t> encode_refusal(const std::string& why) {
  std::vector<uint8_t> out;
  put_u32(out, static_cast<uint32_t>(why.size()));
  out.push_back(static_cast<uint8_t>(Op::kRefused));
  out.insert(out.end(), why.begin(), why.end());
  out.resize(out.size() + kMacBytes, 0);
  return out;
}

Decoded decode(Channel& channel, std::span<const uint8_t> buffer, bool accept_refusal) {
  Decoded d;
  if (buffer.size() < kHeaderBytes) return d;
  const uint32_t length = get_u32(buffer.data());
  if (length > kMaxPayload) {
    d.status = Status::kBad;
    d.why = "length " + std::to_string(length) + " exceeds the limit of " +
            std::to_string(kMaxPayload) + " bytes";
    return d;
  }
  const size_t total = kHeaderBytes + length + kMacBytes;
  if (buffer.size() < total) return d;
  const auto header = buffer.first(kHeaderBytes);
  const auto payload = buffer.subspan(kHeaderBytes, length);
  const auto mac = buffer.subspan(kHeaderBytes + length, kMacBytes);
  const Op op = static_cast<Op>(header[4]);
  d.consumed = total;
  if (accept_refusal && op == Op::kRefused) {
    d.status = Status::kFrame;
    d.frame = {op, {payload.begin(), payload.end()}};
    return d;
  }
  const Digest expected = mac_of(channel, header, payload);
  if (!Hmac::equal(expected, mac)) {
    d.status = Status::kBad;
    d.why = "bad HMAC (wrong RINGLET_SECRET, a replayed frame, or garbage)";
    return d;
  }
  ++channel.sequence;
  d.status = Status::kFrame;
  d.frame = {op, {payload.begin(), payload.end()}};
  return d;
}

std::vector<uint8_t> key_payload(const std::string& key, std::span<const uint8_t> rest) {
  std::vector<uint8_t> out;
  out.reserve(4 + key.size() + rest.size());
  put_u32(out, static_cast<uint32_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

bool split_key(std::span<const uint8_t> payload, std::string& key, std::span<const uint8_t>& rest) {
  if (payload.size() < 4) return false;
  const uint32_t n = get_u32(payload.data());
  if (n > kMaxKey || n > payload.size() - 4) return false;
  key.assign(payload.begin() + 4, payload.begin() + 4 + n);
  rest = payload.subspan(4 + n);
  return true;
}

Request parse_request(const Frame& frame) {
  Request r;
  r.op = frame.op;
  if (r.op != Op::kSet && r.op != Op::kGet && r.op != Op::kAdd && r.op != Op::kTryGet &&
      r.op != Op::kWill) {
    throw BadRequest("unknown op " + std::to_string(static_cast<int>(frame.op)));
  }
  std::span<const uint8_t> rest;
  if (!split_key(frame.payload, r.key, rest)) throw BadRequest("malformed key in the payload");
  if (r.op == Op::kSet || r.op == Op::kWill) r.value = rest;
  if (r.op == Op::kAdd) {
    if (rest.size() != 8) {
      throw BadRequest("ADD of '" + r.key + "' carries " + std::to_string(rest.size()) +
                       " bytes of delta, not 8");
    }
    r.delta = static_cast<int64_t>(get_u64(rest.data()));
  }
  return r;
}

}  // namespace ringlet::core::bootstrap::wire
