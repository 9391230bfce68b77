// The TCP data link's handshake (transport/tcp/handshake.h): the frames each
// side of a new connection reads from the other, HELLO and PROOF on the
// acceptor's side, CHALLENGE and WELCOME on the dialer's.
//
// Input: the step (byte % 5: check_hello, check_challenge, check_proof,
// check_welcome, or parse alone), a flags byte (bit 0: sign, i.e. take the
// job from the frame and write into its MAC field the proof the check
// expects, so the fuzzer reaches what follows the MAC; bits 1-3: the job's
// size, 1-8; bits 4-6: this rank),
// then the peer's bytes. A refusal is a false return with its reason; a
// frame that passes must parse, name ranks of the job and come from the peer
// the step expects.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tcp/handshake.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

namespace hs = ringlet::transport::tcp::handshake;

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr uint8_t kKey[] = {0xfe, 0xed, 0xfa, 0xce, 0xca, 0xfe, 0xbe, 0xef};
// Where the fields lie in a frame (handshake.h).
constexpr size_t kJobAt = 4 + 2 + 2 + 4 + 4;
constexpr size_t kNonceAt = kJobAt + 32;
constexpr size_t kMacAt = kNonceAt + 32;

hs::Bytes32 filled(uint8_t v) {
  hs::Bytes32 b;
  b.fill(v);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringlet::fuzz::FuzzInput input(data, size);
  const int step = input.u8() % 5;
  const uint8_t flags = input.u8();
  const bool sign = (flags & 1) != 0;
  const int32_t ranks = 1 + ((flags >> 1) & 7);
  const auto rest = input.rest();
  std::vector<uint8_t> frame(rest.begin(), rest.end());
  hs::Identity me{kKey, hs::job_digest("fuzz-job"), ((flags >> 4) & 7) % ranks, ranks};
  // Signing takes the job from the frame too, so a frame recorded in any job
  // passes for one of this job.
  if (sign && frame.size() == hs::kFrameBytes) {
    std::copy(frame.begin() + kJobAt, frame.begin() + kNonceAt, me.job.begin());
  }
  const int32_t peer = (me.rank + 1) % ranks;
  const hs::Bytes32 dialer_nonce = filled(0x11);
  hs::Bytes32 acceptor_nonce = filled(0x22);
  std::string why;

  // The MAC the check will look for, over the nonce the frame carries where
  // the frame brings it.
  auto sign_as = [&](bool dialing, int32_t prover, const hs::Bytes32& dn, const hs::Bytes32& an) {
    if (!sign || frame.size() != hs::kFrameBytes) return;
    const hs::Bytes32 mac = hs::proof(kKey, dialing, dn, an, me.job, prover, me.rank);
    std::copy(mac.begin(), mac.end(), frame.begin() + kMacAt);
  };

  bool passed = false;
  switch (step) {
    case 0: {
      int32_t dialer = -1;
      hs::Bytes32 nonce{};
      passed = hs::check_hello(me, frame, dialer, nonce, why);
      if (passed) check(dialer >= 0 && dialer < ranks && dialer != me.rank);
      break;
    }
    case 1: {
      if (frame.size() == hs::kFrameBytes) {
        std::copy(frame.begin() + kNonceAt, frame.begin() + kMacAt, acceptor_nonce.begin());
      }
      sign_as(false, peer, dialer_nonce, acceptor_nonce);
      hs::Bytes32 nonce{};
      passed = hs::check_challenge(me, peer, dialer_nonce, frame, nonce, why);
      break;
    }
    case 2:
      sign_as(true, peer, dialer_nonce, acceptor_nonce);
      passed = hs::check_proof(me, peer, dialer_nonce, acceptor_nonce, frame, why);
      break;
    case 3:
      passed = hs::check_welcome(me, peer, frame, why);
      break;
    default: {
      hs::Message m;
      passed = hs::parse(frame, ranks, m, why);
      if (passed) check(m.from >= 0 && m.from < ranks && m.to >= 0 && m.to < ranks);
      break;
    }
  }
  if (passed) {
    hs::Message m;
    check(hs::parse(frame, ranks, m, why));
  } else {
    check(!why.empty());
  }
  return 0;
}
