// The rendezvous store's frames, as the server reads a client's bytes and as
// a client reads the server's.
//
// Input: one flags byte, then the bytes of one direction of a connection
// (server side: the client's nonce, then its frames).
//   bit 0    sign: every complete frame in the stream gets the MAC it needs
//            under the job key, so the fuzzer reaches what follows the HMAC
//            check (the request parser) and not only the check itself;
//   bits 1-3 arrival: the stream arrives in pieces of 1 << n bytes (7: at once),
//            as a client that drips its bytes would deliver it;
//   bit 4    client side: the stream is what the server sends (the hello, then
//            replies, a refusal passing unauthenticated), read as the client does.
// Server side, the bytes go through what StoreServer does with a connection's
// input: the client's nonce, the early refusal of a too-long length, wire::decode, then
// wire::parse_request on each authenticated frame. A refusal (kBad, BadRequest)
// ends the connection, as it does in the server.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "ringlet/common/hmac.h"
#include "core/bootstrap/store_wire.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

namespace wire = ringlet::core::bootstrap::wire;
using ringlet::common::Hmac;

const Hmac& job_key() {
  static const Hmac hmac(ringlet::common::secret_key("feedfacecafebeef"));
  return hmac;
}

constexpr wire::Nonce kNonce = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
// The client side's own nonce (its bytes to the server are not in the input).
constexpr wire::Nonce kClientNonce = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
constexpr size_t kNonceBytes = kNonce.size();

void check(bool ok) {
  if (!ok) std::abort();
}

// Rewrites the MAC of every complete frame from `at` on, as the sender on
// `channel` would have computed it.
void sign(std::vector<uint8_t>& stream, size_t at, wire::Channel channel) {
  while (stream.size() - at >= wire::kHeaderBytes) {
    const uint32_t length = wire::get_u32(stream.data() + at);
    if (length > wire::kMaxPayload) return;
    const size_t total = wire::kHeaderBytes + length + wire::kMacBytes;
    if (stream.size() - at < total) return;
    const auto op = static_cast<wire::Op>(stream[at + 4]);
    const auto frame =
        wire::encode(channel, op, std::span(stream).subspan(at + wire::kHeaderBytes, length));
    std::copy(frame.end() - wire::kMacBytes, frame.end(),
              stream.begin() + static_cast<ptrdiff_t>(at + wire::kHeaderBytes + length));
    at += total;
  }
}

// What the server does with the bytes one connection has sent so far; false
// once it refused the connection.
bool server_takes(wire::Channel& in, bool& nonce_taken, std::vector<uint8_t>& rx) {
  if (!nonce_taken) {
    if (rx.size() < kNonceBytes) return true;
    std::copy_n(rx.begin(), kNonceBytes, in.client_nonce.begin());
    rx.erase(rx.begin(), rx.begin() + kNonceBytes);
    nonce_taken = true;
  }
  if (rx.size() >= wire::kHeaderBytes && wire::get_u32(rx.data()) > wire::kMaxPayload) {
    check(wire::decode(in, rx).status == wire::Status::kBad);
    return false;
  }
  size_t offset = 0;
  for (;;) {
    wire::Decoded d = wire::decode(in, std::span(rx).subspan(offset));
    if (d.status == wire::Status::kNeedMore) break;
    if (d.status == wire::Status::kBad) return false;
    check(d.consumed == wire::kHeaderBytes + d.frame.payload.size() + wire::kMacBytes);
    check(d.consumed <= rx.size() - offset);
    offset += d.consumed;
    try {
      const wire::Request r = wire::parse_request(d.frame);
      check(r.key.size() <= wire::kMaxKey);
      check(r.value.empty() ||
            (r.value.data() >= d.frame.payload.data() &&
             r.value.data() + r.value.size() <= d.frame.payload.data() + d.frame.payload.size()));
    } catch (const wire::BadRequest&) {
      return false;
    }
  }
  rx.erase(rx.begin(), rx.begin() + static_cast<ptrdiff_t>(offset));
  return true;
}

// What a client does with the server's bytes: the hello (magic, nonce), then
// one reply per call; a refusal passes unauthenticated and ends the connection.
struct ClientSide {
  bool hello_done = false;
  wire::Channel in{&job_key(), {}, wire::Direction::kToClient, 0, kClientNonce};

  bool takes(std::vector<uint8_t>& rx) {
    if (!hello_done) {
      if (rx.size() < wire::kHelloBytes) return true;
      if (!std::equal(wire::kMagic.begin(), wire::kMagic.end(), rx.begin())) return false;
      std::copy(rx.begin() + wire::kMagic.size(), rx.begin() + wire::kHelloBytes, in.nonce.begin());
      rx.erase(rx.begin(), rx.begin() + wire::kHelloBytes);
      hello_done = true;
    }
    for (;;) {
      wire::Decoded d = wire::decode(in, rx, /*accept_refusal=*/true);
      if (d.status == wire::Status::kNeedMore) return true;
      if (d.status == wire::Status::kBad) return false;
      check(d.consumed <= rx.size());
      rx.erase(rx.begin(), rx.begin() + static_cast<ptrdiff_t>(d.consumed));
      if (d.frame.op == wire::Op::kRefused || d.frame.op == wire::Op::kError) return false;
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringlet::fuzz::FuzzInput input(data, size);
  const uint8_t flags = input.u8();
  const bool client = (flags & 0x10) != 0;
  const size_t piece = ((flags >> 1) & 7) == 7 ? SIZE_MAX : size_t{1} << ((flags >> 1) & 7);
  const auto rest = input.rest();
  std::vector<uint8_t> stream(rest.begin(), rest.end());

  if (flags & 1) {
    if (!client && stream.size() >= kNonceBytes) {
      wire::Nonce theirs;
      std::copy_n(stream.begin(), kNonceBytes, theirs.begin());
      sign(stream, kNonceBytes, {&job_key(), kNonce, wire::Direction::kToServer, 0, theirs});
    } else if (client && stream.size() >= wire::kHelloBytes) {
      wire::Nonce nonce;
      std::copy(stream.begin() + wire::kMagic.size(), stream.begin() + wire::kHelloBytes,
                nonce.begin());
      sign(stream, wire::kHelloBytes,
           {&job_key(), nonce, wire::Direction::kToClient, 0, kClientNonce});
    }
  }

  wire::Channel server_in{&job_key(), kNonce, wire::Direction::kToServer, 0};
  bool nonce_taken = false;
  ClientSide client_side;
  std::vector<uint8_t> rx;
  for (size_t at = 0; at < stream.size();) {
    const size_t n = std::min(piece, stream.size() - at);
    rx.insert(rx.end(), stream.begin() + static_cast<ptrdiff_t>(at),
              stream.begin() + static_cast<ptrdiff_t>(at + n));
    at += n;
    if (!(client ? client_side.takes(rx) : server_takes(server_in, nonce_taken, rx))) break;
  }
  return 0;
}
