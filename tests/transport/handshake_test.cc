// The data-link handshake as pure functions: a complete exchange passes, and
// every way of getting one field wrong (key, nonce, job, ranks, direction,
// size, kind) is refused with a reason.
#include "tcp/handshake.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string_view>
#include <vector>

#include "tests/common/throws_failure.h"

namespace ringlet::transport::tcp::handshake {
namespace {

const std::vector<uint8_t> kKey = {0xfe, 0xed, 0xfa, 0xce};
const std::vector<uint8_t> kOtherKey = {0xfe, 0xed, 0xfa, 0xcf};

Identity side(int32_t rank, const std::vector<uint8_t>& key = kKey,
              std::string_view job = "job-a") {
  Identity me;
  me.key = key;
  me.job = job_digest(job);
  me.rank = rank;
  me.size = 4;
  return me;
}

Bytes32 filled(uint8_t b) {
  Bytes32 n;
  n.fill(b);
  return n;
}

// Runs the whole exchange between `dialer` (to `acceptor.rank`) and
// `acceptor`; returns the first refusal, or "" when both sides accept.
std::string exchange(const Identity& dialer, const Identity& acceptor) {
  const Bytes32 dn = filled(1), an = filled(2);
  std::string why;
  int32_t from = -1;
  Bytes32 got_dn{};
  if (!check_hello(acceptor, hello(dialer, acceptor.rank, dn), from, got_dn, why)) return why;
  if (from != dialer.rank || got_dn != dn) return "hello fields lost";
  Bytes32 got_an{};
  if (!check_challenge(dialer, acceptor.rank, dn, challenge(acceptor, from, dn, an), got_an, why))
    return why;
  if (got_an != an) return "challenge nonce lost";
  if (!check_proof(acceptor, from, dn, an, proof_frame(dialer, acceptor.rank, dn, an), why))
    return why;
  if (!check_welcome(dialer, acceptor.rank, welcome(acceptor, from), why)) return why;
  return "";
}

TEST(Handshake, SameKeyAndJobPass) { EXPECT_EQ(exchange(side(3), side(1)), ""); }

// A UCX link runs the same frames under labels of its own: two ucx sides
// pass, and a MAC made for a TCP link never passes on a UCX one (or back).
TEST(Handshake, EachKindOfLinkHasItsOwnLabels) {
  Identity tcp_dialer = side(3), tcp_acceptor = side(1);
  Identity ucx_dialer = side(3), ucx_acceptor = side(1);
  ucx_dialer.link = ucx_acceptor.link = kUcxLink;
  EXPECT_EQ(exchange(ucx_dialer, ucx_acceptor), "");
  EXPECT_NE(exchange(tcp_dialer, ucx_acceptor).find("RINGLET_SECRET"), std::string::npos);
  EXPECT_NE(exchange(ucx_dialer, tcp_acceptor).find("RINGLET_SECRET"), std::string::npos);
  const Bytes32 dn = filled(1), an = filled(2), job = job_digest("job-a");
  EXPECT_NE(proof(kKey, true, dn, an, job, 3, 1, kTcpLink),
            proof(kKey, true, dn, an, job, 3, 1, kUcxLink));
  // The TCP link's MAC is what it always was: HMAC-SHA256 under the key of
  // "ringlet/tcp-link/v1/dial", both nonces, the job digest and the two ranks
  // (little-endian), computed here with OpenSSL directly.
  std::vector<uint8_t> data;
  for (char c : std::string_view("ringlet/tcp-link/v1/dial")) data.push_back(uint8_t(c));
  data.insert(data.end(), dn.begin(), dn.end());
  data.insert(data.end(), an.begin(), an.end());
  data.insert(data.end(), job.begin(), job.end());
  for (uint8_t b : {3, 0, 0, 0, 1, 0, 0, 0}) data.push_back(b);
  Bytes32 expected{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), kKey.data(), static_cast<int>(kKey.size()), data.data(), data.size(),
       expected.data(), &length);
  ASSERT_EQ(length, 32u);
  EXPECT_EQ(proof(kKey, true, dn, an, job, 3, 1), expected);
}

TEST(Handshake, WrongKeyIsRefusedBothWays) {
  // The acceptor has the key, the dialer does not: the dialer cannot check
  // the challenge (and could not make a proof).
  EXPECT_NE(exchange(side(3, kOtherKey), side(1)).find("RINGLET_SECRET"), std::string::npos);
  const Bytes32 dn = filled(1), an = filled(2);
  std::string why;
  EXPECT_FALSE(check_proof(side(1), 3, dn, an, proof_frame(side(3, kOtherKey), 1, dn, an), why));
  EXPECT_NE(why.find("did not prove the job secret"), std::string::npos) << why;
}

TEST(Handshake, AnotherJobIsRefused) {
  EXPECT_NE(exchange(side(3, kKey, "job-b"), side(1)).find("another job"), std::string::npos);
}

TEST(Handshake, AProofForOtherNoncesIsRefused) {
  // A recorded proof, made for the nonces of an earlier connection.
  const Frame old = proof_frame(side(3), 1, filled(1), filled(2));
  std::string why;
  EXPECT_FALSE(check_proof(side(1), 3, filled(1), filled(9), old, why));
  EXPECT_FALSE(check_proof(side(1), 3, filled(9), filled(2), old, why));
  EXPECT_TRUE(check_proof(side(1), 3, filled(1), filled(2), old, why)) << why;
}

TEST(Handshake, OneDirectionsMacIsNotTheOthers) {
  // The acceptor's MAC over the same nonces, reflected back as a PROOF.
  const Frame c = challenge(side(1), 3, filled(1), filled(2));
  Message m;
  std::string why;
  ASSERT_TRUE(parse(c, 4, m, why)) << why;
  const Frame reflected = encode({Kind::kProof, 3, 1, m.job, {}, m.mac});
  EXPECT_FALSE(check_proof(side(1), 3, filled(1), filled(2), reflected, why));
}

TEST(Handshake, RanksAreBoundIntoTheProof) {
  // Rank 2's valid proof, relabelled as rank 3's.
  const Frame p = proof_frame(side(2), 1, filled(1), filled(2));
  Message m;
  std::string why;
  ASSERT_TRUE(parse(p, 4, m, why)) << why;
  m.from = 3;
  EXPECT_FALSE(check_proof(side(1), 3, filled(1), filled(2), encode(m), why));
}

TEST(Handshake, MisaddressedFramesAreRefused) {
  std::string why;
  int32_t from = -1;
  Bytes32 n{};
  EXPECT_FALSE(check_hello(side(1), hello(side(3), 2, filled(1)), from, n, why));
  EXPECT_NE(why.find("addressed to rank 2"), std::string::npos) << why;
  EXPECT_FALSE(check_hello(side(1), hello(side(1), 1, filled(1)), from, n, why));
  // A challenge from a rank other than the one dialled.
  Bytes32 an{};
  EXPECT_FALSE(check_challenge(side(3), 1, filled(1), challenge(side(2), 3, filled(1), filled(2)),
                               an, why));
}

TEST(Handshake, ParseRefusesEverySizeButOne) {
  const Frame good = hello(side(3), 1, filled(1));
  Message m;
  std::string why;
  for (size_t n = 0; n < kFrameBytes + 8; ++n) {
    std::vector<uint8_t> bytes(n, 0);
    std::copy_n(good.begin(), std::min(n, kFrameBytes), bytes.begin());
    EXPECT_EQ(parse(bytes, 4, m, why), n == kFrameBytes) << n;
  }
}

TEST(Handshake, ParseRefusesBadFields) {
  Message m;
  std::string why;
  Frame f = hello(side(3), 1, filled(1));
  f[0] = 'X';
  EXPECT_FALSE(parse(f, 4, m, why));
  EXPECT_NE(why.find("magic"), std::string::npos) << why;
  f = hello(side(3), 1, filled(1));
  f[4] = 9;  // version
  EXPECT_FALSE(parse(f, 4, m, why));
  f = hello(side(3), 1, filled(1));
  f[6] = 77;  // kind
  EXPECT_FALSE(parse(f, 4, m, why));
  // Ranks outside the job, negative or too large.
  EXPECT_FALSE(parse(hello(side(3), 7, filled(1)), 4, m, why));
  EXPECT_FALSE(parse(encode({Kind::kHello, -5, 1, {}, {}, {}}), 4, m, why));
  EXPECT_TRUE(parse(hello(side(3), 1, filled(1)), 4, m, why)) << why;
  EXPECT_EQ(m.from, 3);
  EXPECT_EQ(m.to, 1);
}

TEST(Handshake, AnEmptyKeyIsRefused) {
  const std::vector<uint8_t> none;
  EXPECT_TRUE(test::throws_failure(common::FailureKind::kInvalidArgument, [&] {
    proof(none, true, filled(1), filled(2), job_digest("j"), 1, 2);
  }));
}

}  // namespace
}  // namespace ringlet::transport::tcp::handshake
