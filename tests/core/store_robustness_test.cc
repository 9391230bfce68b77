// What an unauthenticated or broken peer can do to the store: nothing but get
// its own connection dropped (and counted), while good clients keep going.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <thread>

#include "core/bootstrap/fd.h"
#include "core/bootstrap/store.h"
#include "core/bootstrap/store_wire.h"
#include "ringlet/common/failure.h"

namespace ringlet::core {
namespace {

using namespace std::chrono_literals;
using bootstrap::UniqueFd;
using transport::Clock;
namespace wire = bootstrap::wire;

constexpr const char* kSecret = "feedfacecafebeef";

std::string at(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// The nonce this file's raw clients send after the store's hello.
constexpr wire::Nonce kClientNonce = {0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// A plain TCP connection to the store, past its hello and with kClientNonce
// sent; nonce gets the hello's nonce.
UniqueFd raw_connect(uint16_t port, wire::Nonce* nonce = nullptr) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  uint8_t hello[wire::kHelloBytes];
  size_t got = 0;
  while (got < sizeof hello) {
    ssize_t n = ::recv(fd.get(), hello + got, sizeof hello - got, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  EXPECT_EQ(got, sizeof hello);
  if (nonce) std::copy(hello + wire::kMagic.size(), hello + sizeof hello, nonce->begin());
  EXPECT_EQ(::send(fd.get(), kClientNonce.data(), kClientNonce.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(kClientNonce.size()));
  return fd;
}

void send_all(const UniqueFd& fd, std::span<const uint8_t> data) {
  ASSERT_EQ(::send(fd.get(), data.data(), data.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(data.size()));
}

bool wait_refused(const StoreServer& server, uint64_t n) {
  const auto end = Clock::now() + 5s;
  while (server.refused() < n && Clock::now() < end) std::this_thread::sleep_for(5ms);
  return server.refused() == n;
}

// True once the server has closed the connection (EOF after any refusal note).
bool closed_by_server(const UniqueFd& fd) {
  const auto end = Clock::now() + 5s;
  uint8_t buf[256];
  while (Clock::now() < end) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

// A good client still gets served.
void expect_serving(uint16_t port, const std::string& key) {
  StoreClient good(at(port), kSecret, 0, Clock::now() + 5s);
  good.set(key, {1, 2, 3});
  EXPECT_EQ(good.get(key, Clock::now() + 5s), (std::vector<uint8_t>{1, 2, 3}));
}

TEST(StoreRobustness, WrongSecretIsRefused) {
  StoreServer server(0, kSecret);
  StoreClient good(at(server.port()), kSecret, 0, Clock::now() + 5s);
  StoreClient bad(at(server.port()), "0000000000000000", 1, Clock::now() + 5s);
  try {
    bad.set("bad-only", {1});
    FAIL() << "a client with the wrong secret was served";
  } catch (const common::Failure& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), common::FailureKind::kTransport) << msg;
    EXPECT_EQ(e.peer(), 0) << msg;
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
    EXPECT_NE(msg.find("RINGLET_SECRET"), std::string::npos) << msg;
  }
  EXPECT_TRUE(wait_refused(server, 1));
  good.set("k", {7});
  EXPECT_EQ(good.get("k", Clock::now() + 5s), std::vector<uint8_t>{7});
  // What the refused client sent never landed.
  EXPECT_THROW(good.get("bad-only", Clock::now() + 100ms), transport::Timeout);
}

TEST(StoreRobustness, NoSecretIsRefused) {
  // What a client without the secret can compute: a MAC under the empty key
  // (HMAC pads it with zeros, the same as the one-byte key 0x00).
  StoreServer server(0, kSecret);
  wire::Nonce nonce;
  UniqueFd fd = raw_connect(server.port(), &nonce);
  common::Hmac empty(std::vector<uint8_t>{0});
  wire::Channel ch{&empty, nonce, wire::Direction::kToServer, 0, kClientNonce};
  send_all(fd, wire::encode(ch, wire::Op::kSet, wire::key_payload("k", std::vector<uint8_t>{1})));
  EXPECT_TRUE(wait_refused(server, 1));
  EXPECT_TRUE(closed_by_server(fd));
  expect_serving(server.port(), "after-no-secret");
}

TEST(StoreRobustness, AnEmptySecretIsRefusedAtStart) {
  try {
    StoreServer server(0, "");
    FAIL() << "a store started without a secret";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("RINGLET_SECRET"), std::string::npos) << e.what();
  }
  StoreServer server(0, kSecret);
  try {
    StoreClient client(at(server.port()), "", 3, Clock::now() + 5s);
    FAIL() << "a client started without a secret";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("RINGLET_SECRET"), std::string::npos) << e.what();
  }
}

TEST(StoreRobustness, ASlowDripBlocksNobody) {
  StoreServer server(0, kSecret);
  UniqueFd drip = raw_connect(server.port());
  std::jthread dripper([&] {
    // A whole frame, one byte every 10 ms, with a MAC that is wrong.
    std::vector<uint8_t> frame = {0, 0, 0, 5, 1, 0, 0, 0, 1, 'k'};
    frame.resize(frame.size() + wire::kMacBytes, 0x5a);
    for (uint8_t b : frame) {
      ::send(drip.get(), &b, 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(10ms);
    }
  });
  const auto start = Clock::now();
  for (int i = 0; i < 20; ++i) expect_serving(server.port(), "d" + std::to_string(i));
  EXPECT_LT(Clock::now() - start, 5s);
  dripper.join();
  EXPECT_TRUE(wait_refused(server, 1));
  EXPECT_TRUE(closed_by_server(drip));
}

// The address a host name or the rendezvous gives is the only one served.
TEST(StoreRobustness, ListensOnlyOnTheRendezvousAddress) {
  StoreServer loopback(0, kSecret);  // 127.0.0.1
  // The same port on another local address (127.0.0.2 is loopback too, but
  // not the address bound) must refuse the connection.
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(loopback.port());
  ASSERT_EQ(::inet_pton(AF_INET, "127.0.0.2", &a.sin_addr), 1);
  EXPECT_NE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0)
      << "the store answers on an address it was not given";
  expect_serving(loopback.port(), "bound");
  // A host name is served at what it resolves to.
  StoreServer named("localhost", 0, kSecret);
  StoreClient client("localhost:" + std::to_string(named.port()), kSecret, 0, Clock::now() + 5s);
  client.set("k", {4});
  EXPECT_EQ(client.get("k", Clock::now() + 5s), std::vector<uint8_t>{4});
  try {
    StoreServer nowhere("no-such-host.invalid", 0, kSecret);
    FAIL() << "a store listens at a host that does not resolve";
  } catch (const common::Failure& e) {
    // Where the store listens is the launch's choice: a configuration error.
    EXPECT_EQ(e.kind(), common::FailureKind::kConfig) << e.what();
    EXPECT_NE(std::string(e.what()).find("RINGLET_RENDEZVOUS"), std::string::npos) << e.what();
  }
}

TEST(StoreRobustness, GarbageIsRefused) {
  StoreServer server(0, kSecret);
  UniqueFd fd = raw_connect(server.port());
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  send_all(fd, std::span(reinterpret_cast<const uint8_t*>(http.data()), http.size()));
  EXPECT_TRUE(wait_refused(server, 1));
  EXPECT_TRUE(closed_by_server(fd));
  expect_serving(server.port(), "after-garbage");
}

TEST(StoreRobustness, HugeLengthIsRefusedWithoutWaitingForTheBody) {
  StoreServer server(0, kSecret);
  UniqueFd fd = raw_connect(server.port());
  const uint8_t header[] = {0xff, 0xff, 0xff, 0xf0, 1};
  send_all(fd, header);
  EXPECT_TRUE(wait_refused(server, 1));
  EXPECT_TRUE(closed_by_server(fd));
  expect_serving(server.port(), "after-huge");
}

TEST(StoreRobustness, TruncatedFrameIsRefused) {
  StoreServer server(0, kSecret);
  {
    UniqueFd fd = raw_connect(server.port());
    const uint8_t partial[] = {0, 0, 0, 100, 1, 'a', 'b', 'c'};
    send_all(fd, partial);
  }  // closes mid-frame
  EXPECT_TRUE(wait_refused(server, 1));
  expect_serving(server.port(), "after-truncated");
}

TEST(StoreRobustness, CleanCloseIsNotARefusal) {
  StoreServer server(0, kSecret);
  { UniqueFd fd = raw_connect(server.port()); }
  expect_serving(server.port(), "x");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.refused(), 0u);
}

TEST(StoreRobustness, StalledHalfFrameBlocksNobody) {
  StoreServer server(0, kSecret);
  UniqueFd stalled = raw_connect(server.port());
  const uint8_t partial[] = {0, 0, 0, 50, 1, 0, 0};
  send_all(stalled, partial);
  const auto start = Clock::now();
  for (int i = 0; i < 20; ++i) expect_serving(server.port(), "k" + std::to_string(i));
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(server.refused(), 0u);  // still only stalled, not wrong
  stalled.reset();
  EXPECT_TRUE(wait_refused(server, 1));
}

TEST(StoreRobustness, UnknownOpIsRefusedEvenWhenAuthentic) {
  StoreServer server(0, kSecret);
  wire::Nonce nonce;
  UniqueFd fd = raw_connect(server.port(), &nonce);
  common::Hmac hmac(common::secret_key(kSecret));
  wire::Channel ch{&hmac, nonce, wire::Direction::kToServer, 0, kClientNonce};
  const auto frame = wire::encode(ch, static_cast<wire::Op>(42), wire::key_payload("k"));
  send_all(fd, frame);
  EXPECT_TRUE(wait_refused(server, 1));
  expect_serving(server.port(), "after-unknown");
}

TEST(StoreRobustness, ReplayedFramesAreRefused) {
  StoreServer server(0, kSecret);
  common::Hmac hmac(common::secret_key(kSecret));
  wire::Nonce nonce;
  UniqueFd fd = raw_connect(server.port(), &nonce);
  wire::Channel ch{&hmac, nonce, wire::Direction::kToServer, 0, kClientNonce};
  const std::vector<uint8_t> value{9};
  const auto frame = wire::encode(ch, wire::Op::kSet, wire::key_payload("r", value));
  send_all(fd, frame);  // authentic: accepted
  // Replayed on the same connection: the sequence number has moved on.
  send_all(fd, frame);
  EXPECT_TRUE(wait_refused(server, 1));
  // Replayed on a fresh connection: another nonce.
  UniqueFd other = raw_connect(server.port());
  send_all(other, frame);
  EXPECT_TRUE(wait_refused(server, 2));
  StoreClient good(at(server.port()), kSecret, 0, Clock::now() + 5s);
  EXPECT_EQ(good.get("r", Clock::now() + 5s), value);
}

// The client's nonce is bound into every MAC: a frame made for another
// client nonce (a recording of another connection that happened to meet the
// same server nonce) is refused.
TEST(StoreRobustness, AFrameForAnotherClientNonceIsRefused) {
  StoreServer server(0, kSecret);
  common::Hmac hmac(common::secret_key(kSecret));
  wire::Nonce nonce;
  UniqueFd fd = raw_connect(server.port(), &nonce);
  wire::Nonce other = kClientNonce;
  other[0] ^= 1;
  wire::Channel ch{&hmac, nonce, wire::Direction::kToServer, 0, other};
  send_all(fd, wire::encode(ch, wire::Op::kSet, wire::key_payload("n", std::vector<uint8_t>{1})));
  EXPECT_TRUE(wait_refused(server, 1));
  EXPECT_TRUE(closed_by_server(fd));
  expect_serving(server.port(), "after-other-client-nonce");
}

TEST(StoreRobustness, ManyBadClientsAtOnce) {
  StoreServer server(0, kSecret);
  std::vector<UniqueFd> bad;
  for (int i = 0; i < 20; ++i) {
    bad.push_back(raw_connect(server.port()));
    const uint8_t junk[] = {0, 0, 0, 1, 1, static_cast<uint8_t>(i)};
    send_all(bad.back(), junk);  // a body, then a MAC that never comes
  }
  expect_serving(server.port(), "busy");
  bad.clear();
  EXPECT_TRUE(wait_refused(server, 20));
  expect_serving(server.port(), "after");
}

// A fake rank 0 on loopback: accepts one client, greets it with `hello` and
// answers its first frame with `reply`, whatever it asked.
class FakeStore {
 public:
  FakeStore(std::vector<uint8_t> hello, std::vector<uint8_t> reply)
      : listener_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener_.get(), 4), 0);
    socklen_t len = sizeof a;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::jthread([this, hello = std::move(hello), reply = std::move(reply)] {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return;
      UniqueFd c(::accept(listener_.get(), nullptr, nullptr));
      ::send(c.get(), hello.data(), hello.size(), MSG_NOSIGNAL);
      uint8_t buf[512];
      pollfd q{c.get(), POLLIN, 0};
      if (::poll(&q, 1, 5000) <= 0 || ::recv(c.get(), buf, sizeof buf, 0) <= 0) return;
      ::send(c.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
      // Hold the connection until the client has read the reply and let go.
      ::poll(&q, 1, 5000);
    });
  }
  uint16_t port() const { return port_; }

 private:
  UniqueFd listener_;
  uint16_t port_ = 0;
  std::jthread thread_;
};

std::vector<uint8_t> good_hello() {
  std::vector<uint8_t> hello(wire::kMagic.begin(), wire::kMagic.end());
  hello.resize(wire::kHelloBytes, 7);
  return hello;
}

// A rank 0 that breaks the store's protocol: the client's failure is a
// transport failure naming rank 0, not an internal one.
TEST(StoreRobustness, RepliesOutsideTheProtocolAreTransportFailuresNamingRankZero) {
  // A reply whose MAC is wrong.
  std::vector<uint8_t> forged = {0, 0, 0, 1, static_cast<uint8_t>(wire::Op::kOk), 1};
  forged.resize(forged.size() + wire::kMacBytes, 0x5a);
  FakeStore forger(good_hello(), forged);
  StoreClient client(at(forger.port()), kSecret, 2, Clock::now() + 5s);
  try {
    client.set("k", {1});
    FAIL() << "a forged reply was accepted";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kTransport) << e.what();
    EXPECT_EQ(e.rank(), 2) << e.what();
    EXPECT_EQ(e.peer(), 0) << e.what();
    EXPECT_NE(std::string(e.what()).find("failed authentication"), std::string::npos) << e.what();
  }

  // A greeting that is not the store's.
  std::vector<uint8_t> stranger = good_hello();
  stranger[0] = 'X';
  FakeStore other(stranger, {});
  try {
    StoreClient wrong(at(other.port()), kSecret, 1, Clock::now() + 5s);
    FAIL() << "a stranger's greeting was accepted";
  } catch (const common::Failure& e) {
    EXPECT_EQ(e.kind(), common::FailureKind::kTransport) << e.what();
    EXPECT_EQ(e.peer(), 0) << e.what();
    EXPECT_NE(std::string(e.what()).find("did not greet as a Ringlet store"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ringlet::core
