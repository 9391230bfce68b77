// Pairwise tests of every carrier with real processes: each rank is a forked
// child with its own carrier, meeting the other through a file-backed store.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "file_store.h"
#include "job_dir.h"
#include "ringlet/common/logging.h"
#include "ringlet/transport/transport.h"
#include "tests/common/forked_ranks.h"

#if RINGLET_HAVE_UCX
#include "ucx/library.h"
#endif

namespace ringlet::transport::testing {
namespace {

using ringlet::test::expect_all_passed;
using ringlet::test::run_ranks;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr size_t kMiB = size_t{1} << 20;

uint8_t pattern(size_t i, int message, int from) {
  return static_cast<uint8_t>(i * 131 + static_cast<size_t>(message) * 7 + from * 59 + (i >> 12));
}

std::vector<uint8_t> make_message(size_t bytes, int message, int from) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = pattern(i, message, from);
  return v;
}

// Index of the first wrong byte, or -1.
int64_t first_wrong(const std::vector<uint8_t>& v, int message, int from) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != pattern(i, message, from)) return static_cast<int64_t>(i);
  }
  return -1;
}

// The carrier of kind `kind` ("tcp", "shm" or "ucx").
std::unique_ptr<Carrier> make_carrier(const std::string& kind, const CarrierOptions& options) {
  if (kind == "tcp") return make_tcp_carrier(options);
#if RINGLET_HAVE_UCX
  if (kind == "ucx") return make_ucx_carrier(options);
#endif
  return make_shm_carrier(options);
}

// How the peer goes away in the middle of a 64 MiB transfer.
enum class Exit { kSigkill, kExit, kClose };

class PairTest : public ::testing::TestWithParam<std::string> {
 protected:
  void lose_peer_mid_transfer(Exit how);

  void TearDown() override {
    if (GetParam() == "shm") {
      EXPECT_TRUE(leftover_segments(job_.job_id).empty())
          << "segments left in /dev/shm, e.g. " << leftover_segments(job_.job_id).front();
    }
  }

  // What one rank needs: its store, carrier and the pair to the other rank.
  struct Rank {
    std::unique_ptr<FileStore> store;
    std::unique_ptr<Carrier> carrier;
    std::unique_ptr<Pair> pair;
  };

  Rank join(int rank, int size = 2, int peer = -1) {
    Rank r;
    r.store = std::make_unique<FileStore>(job_.dir);
    CarrierOptions options;
    options.rank = rank;
    options.size = size;
    options.job_id = job_.job_id;
    options.store = r.store.get();
    options.secret = job_.secret;
    r.carrier = make_carrier(GetParam(), options);
    if (peer < 0) peer = 1 - rank;
    r.pair = r.carrier->connect(peer, Clock::now() + seconds(20));
    return r;
  }

  // Progresses until `done` or the deadline; the carrier's wait is used
  // whenever a round moved nothing, as the runtime would.
  static void drive(Rank& r, const std::function<bool()>& done, seconds limit = seconds(30)) {
    auto deadline = Clock::now() + limit;
    while (!done()) {
      if (!r.pair->progress()) r.carrier->wait_for_activity(std::chrono::microseconds(1000));
      ASSERT_LT(Clock::now(), deadline) << "transfer did not finish";
    }
  }

  JobDir job_;
};

TEST_P(PairTest, SizesBothWaysWithContent) {
  const std::vector<size_t> sizes = {0, 1, 4095, kMiB, 64 * kMiB};
  expect_all_passed(run_ranks(2, [&](int rank) {
    Rank r = join(rank);
    for (size_t m = 0; m < sizes.size(); ++m) {
      std::vector<uint8_t> out = make_message(sizes[m], static_cast<int>(m), rank);
      std::vector<uint8_t> in(sizes[m], 0xEE);
      Request send, recv;
      r.pair->post_recv(in.data(), in.size(), recv);
      r.pair->post_send(out.data(), out.size(), send);
      drive(r, [&] { return !send.pending() && !recv.pending(); });
      ASSERT_TRUE(send.done()) << send.error();
      ASSERT_TRUE(recv.done()) << recv.error();
      EXPECT_EQ(first_wrong(in, static_cast<int>(m), 1 - rank), -1) << "size " << sizes[m];
    }
    EXPECT_FALSE(r.pair->busy());
  }));
}

TEST_P(PairTest, SixtyFourInFlightEachWay) {
  constexpr int kCount = 64;
  expect_all_passed(run_ranks(2, [&](int rank) {
    Rank r = join(rank);
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<Request> sends(kCount), recvs(kCount);
    for (int m = 0; m < kCount; ++m) {
      size_t bytes = static_cast<size_t>(m % 7) * 40000 + static_cast<size_t>(m);
      out.push_back(make_message(bytes, m, rank));
      in.emplace_back(bytes);
    }
    for (int m = 0; m < kCount; ++m) r.pair->post_recv(in[m].data(), in[m].size(), recvs[m]);
    for (int m = 0; m < kCount; ++m) r.pair->post_send(out[m].data(), out[m].size(), sends[m]);
    EXPECT_TRUE(r.pair->busy());
    drive(r, [&] { return !r.pair->busy(); });
    for (int m = 0; m < kCount; ++m) {
      ASSERT_TRUE(sends[m].done()) << sends[m].error();
      ASSERT_TRUE(recvs[m].done()) << recvs[m].error();
      EXPECT_EQ(first_wrong(in[m], m, 1 - rank), -1) << "message " << m;
    }
  }));
}

TEST_P(PairTest, BidirectionalLargeSimultaneous) {
  constexpr int kCount = 4;
  const size_t bytes = 16 * kMiB + 3;
  expect_all_passed(run_ranks(2, [&](int rank) {
    Rank r = join(rank);
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<Request> sends(kCount), recvs(kCount);
    for (int m = 0; m < kCount; ++m) {
      out.push_back(make_message(bytes, m, rank));
      in.emplace_back(bytes);
    }
    // Sends first on both sides: neither may need its peer's receive posted
    // before it can make progress on its own.
    for (int m = 0; m < kCount; ++m) r.pair->post_send(out[m].data(), bytes, sends[m]);
    for (int m = 0; m < kCount; ++m) r.pair->post_recv(in[m].data(), bytes, recvs[m]);
    drive(r, [&] { return !r.pair->busy(); });
    for (int m = 0; m < kCount; ++m) {
      ASSERT_TRUE(recvs[m].done()) << recvs[m].error();
      EXPECT_EQ(first_wrong(in[m], m, 1 - rank), -1) << "message " << m;
    }
  }));
}

TEST_P(PairTest, SizeMismatchFailsBothEnds) {
  expect_all_passed(run_ranks(2, [&](int rank) {
    Rank r = join(rank);
    std::vector<uint8_t> buf(200);
    Request a, b;
    if (rank == 0) {
      r.pair->post_recv(buf.data(), 200, a);
      drive(r, [&] { return !a.pending(); });
      ASSERT_TRUE(a.failed());
      EXPECT_NE(a.error().find("100"), std::string::npos) << a.error();
      EXPECT_NE(a.error().find("200"), std::string::npos) << a.error();
      EXPECT_NE(a.error().find("rank 0"), std::string::npos) << a.error();
      EXPECT_NE(a.error().find("rank 1"), std::string::npos) << a.error();
      r.store->get("test/mismatch-seen", Clock::now() + seconds(20));
    } else {
      r.pair->post_send(buf.data(), 100, a);
      r.pair->post_recv(buf.data(), 8, b);
      drive(r, [&] { return !b.pending(); });
      ASSERT_TRUE(b.failed());
      EXPECT_NE(b.error().find("100"), std::string::npos) << b.error();
      EXPECT_NE(b.error().find("200"), std::string::npos) << b.error();
      r.store->set("test/mismatch-seen", {1});
    }
  }));
}

// A peer that finishes first sends its last message and closes at once; the
// survivor, slower, posts its receive only after the close: the message must
// still arrive, and only a receive beyond it fails.
TEST_P(PairTest, LastMessageBeforeCloseIsDelivered) {
  expect_all_passed(run_ranks(2, [&](int rank) {
    Rank r = join(rank);
    std::vector<uint8_t> buf = make_message(3000, 5, 1);
    if (rank == 1) {
      Request send;
      r.pair->post_send(buf.data(), buf.size(), send);
      drive(r, [&] { return !send.pending(); });
      ASSERT_TRUE(send.done()) << send.error();
      r.pair.reset();  // closes; the data may still sit in the peer's buffers
      r.store->set("test/closed", {1});
      return;
    }
    r.store->get("test/closed", Clock::now() + seconds(20));
    std::this_thread::sleep_for(milliseconds(50));
    for (int i = 0; i < 3; ++i) r.pair->progress();  // observes the close first
    std::vector<uint8_t> in(3000);
    Request recv, more;
    r.pair->post_recv(in.data(), in.size(), recv);
    drive(r, [&] { return !recv.pending(); });
    ASSERT_TRUE(recv.done()) << recv.error();
    EXPECT_EQ(first_wrong(in, 5, 1), -1);
    r.pair->post_recv(in.data(), in.size(), more);
    try {
      drive(r, [&] { return !more.pending(); });
    } catch (const PeerLost&) {
    }
    EXPECT_TRUE(more.failed());
  }));
}

TEST_P(PairTest, PeerSigkilledMidTransfer) { lose_peer_mid_transfer(Exit::kSigkill); }
TEST_P(PairTest, PeerExitsMidTransfer) { lose_peer_mid_transfer(Exit::kExit); }
TEST_P(PairTest, PeerClosesPairMidTransfer) { lose_peer_mid_transfer(Exit::kClose); }

INSTANTIATE_TEST_SUITE_P(Carriers, PairTest,
                         ::testing::Values("tcp", "shm"
#if RINGLET_HAVE_UCX
                                           ,
                                           "ucx"
#endif
                                           ),
                         [](const auto& info) { return info.param; });

void PairTest::lose_peer_mid_transfer(Exit how) {
  const size_t bytes = 64 * kMiB;
  auto exits = run_ranks(2, [&](int rank) {
    Rank r = join(rank);
    std::vector<uint8_t> out(bytes, 1), in(bytes);
    Request send, recv;
    r.pair->post_recv(in.data(), bytes, recv);
    if (rank == 1) {
      // Take part for a moment, then vanish with the transfer half done.
      auto until = Clock::now() + milliseconds(30);
      while (Clock::now() < until) r.pair->progress();
      if (how == Exit::kSigkill) ::raise(SIGKILL);
      if (how == Exit::kExit) ::_exit(0);
      r.pair.reset();
      ::_exit(0);
    }
    r.pair->post_send(out.data(), bytes, send);
    auto start = Clock::now();
    try {
      drive(
          r, [] { return false; }, seconds(10));
      ADD_FAILURE() << "no PeerLost";
    } catch (const PeerLost& e) {
      std::string what = e.what();
      EXPECT_EQ(e.peer(), 1);
      EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
      EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
      EXPECT_LT(Clock::now() - start, seconds(5));
      EXPECT_TRUE(recv.failed());
      EXPECT_TRUE(send.failed() || send.done());
      // Later calls keep failing.
      EXPECT_THROW(r.pair->progress(), PeerLost);
    }
  });
  EXPECT_EQ(exits[0].code, 0);
  EXPECT_FALSE(exits[0].signaled);
}

// A peer killed while nothing moves: this rank waits on a receive the peer
// never answers. Only the carrier's own liveness (a socket's end, a pid, UCX's
// keepalive) can tell, and it must, well before the runtime's timeout.
TEST_P(PairTest, PeerSigkilledWhileWaitingForIt) {
  auto exits = run_ranks(2, [&](int rank) {
    Rank r = join(rank);
    if (rank == 1) {
      r.store->set("test/connected", {1});
      r.store->get("test/kill", Clock::now() + seconds(20));
      ::raise(SIGKILL);
    }
    r.store->get("test/connected", Clock::now() + seconds(20));
    uint64_t word = 0;
    Request recv;
    r.pair->post_recv(&word, sizeof word, recv);
    // Idle for a moment first, as a rank waiting on a slow peer would be.
    auto until = Clock::now() + milliseconds(200);
    while (Clock::now() < until) {
      if (!r.pair->progress()) r.carrier->wait_for_activity(std::chrono::microseconds(1000));
    }
    r.store->set("test/kill", {1});
    auto start = Clock::now();
    try {
      drive(
          r, [] { return false; }, seconds(10));
      ADD_FAILURE() << "no PeerLost";
    } catch (const PeerLost& e) {
      EXPECT_EQ(e.peer(), 1);
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
      EXPECT_LT(Clock::now() - start, seconds(5));
      EXPECT_TRUE(recv.failed());
    }
  });
  EXPECT_EQ(exits[0].code, 0);
  EXPECT_FALSE(exits[0].signaled);
}

// Four ranks on a ring, each sending right and receiving from the left with
// several slices in flight: more ranks than cores here, so it also checks
// that waits give the core away instead of starving the peer.
TEST_P(PairTest, RingOfFourOversubscribed) {
  constexpr int n = 4;
  constexpr int kIters = 40;
  constexpr int kInFlight = 4;
  const std::vector<size_t> sizes = {0, 8, 4096, kMiB + 1};
  const std::string kind = GetParam();
  expect_all_passed(run_ranks(n, [&](int rank) {
    FileStore store(job_.dir);
    CarrierOptions options{rank, n, job_.job_id, &store, "", "", job_.secret};
    auto carrier = make_carrier(kind, options);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    std::unique_ptr<Pair> to_right, from_left;
    // Right first, then left: the order whose waits form a cycle.
    for (int peer : {right, left}) {
      auto pair = carrier->connect(peer, Clock::now() + seconds(20));
      (peer == right ? to_right : from_left) = std::move(pair);
    }
    for (int it = 0; it < kIters; ++it) {
      size_t bytes = sizes[it % sizes.size()];
      std::vector<std::vector<uint8_t>> out, in;
      std::vector<Request> sends(kInFlight), recvs(kInFlight);
      for (int k = 0; k < kInFlight; ++k) {
        out.push_back(make_message(bytes, it * kInFlight + k, rank));
        in.emplace_back(bytes);
        from_left->post_recv(in[k].data(), bytes, recvs[k]);
        to_right->post_send(out[k].data(), bytes, sends[k]);
      }
      auto deadline = Clock::now() + seconds(30);
      while (to_right->busy() || from_left->busy()) {
        bool moved = to_right->progress();
        moved |= from_left->progress();
        if (!moved) carrier->wait_for_activity(std::chrono::microseconds(1000));
        ASSERT_LT(Clock::now(), deadline);
      }
      for (int k = 0; k < kInFlight; ++k) {
        ASSERT_TRUE(recvs[k].done()) << recvs[k].error();
        ASSERT_EQ(first_wrong(in[k], it * kInFlight + k, left), -1) << "iteration " << it;
      }
    }
    // Nobody leaves while a neighbour may still be waiting for its last slice.
    store.set("test/ring-done/" + std::to_string(rank), {1});
    for (int r = 0; r < n; ++r)
      store.get("test/ring-done/" + std::to_string(r), Clock::now() + seconds(20));
  }));
}

TEST_P(PairTest, ConnectTimesOutNamingThePeerAndCleansUp) {
  FileStore store(job_.dir);
  CarrierOptions options{0, 2, job_.job_id, &store, "", "", job_.secret};
  auto carrier = make_carrier(GetParam(), options);
  try {
    carrier->connect(1, Clock::now() + milliseconds(200));
    ADD_FAILURE() << "no timeout";
  } catch (const Timeout& e) {
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
}

// The dialing side (higher rank) creates the shm channels: when the peer
// exists but never connects, they must be gone after the Timeout. A ucx
// acceptor answers only while it connects too, so its dialer times out alike.
TEST_P(PairTest, DialerTimesOutWhenPeerNeverConnects) {
  FileStore store(job_.dir);
  CarrierOptions first{0, 2, job_.job_id, &store, "", "", job_.secret};
  CarrierOptions second{1, 2, job_.job_id, &store, "", "", job_.secret};
  bool tcp = GetParam() == "tcp";
  auto idle = make_carrier(GetParam(), first);
  auto dialer = make_carrier(GetParam(), second);
  if (!tcp) {
    EXPECT_THROW(dialer->connect(0, Clock::now() + milliseconds(200)), Timeout);
    return;
  }
  // A tcp carrier authenticates arrivals on its own thread: the dialer's link
  // is made (and kept) before the idle side asks for it, then handed over.
  std::unique_ptr<Pair> dialed, accepted;
  EXPECT_NO_THROW(dialed = dialer->connect(0, Clock::now() + seconds(5)));
  EXPECT_NO_THROW(accepted = idle->connect(1, Clock::now() + milliseconds(500)));
}

// A dialer gives up at its deadline, not a poll or a sleep later: when the
// peer never starts (no address or rank page in the store), and for shm and
// ucx when the peer exists but never serves the request (HELLO) it filed.
TEST_P(PairTest, DialerGivesUpAtItsDeadline) {
  FileStore store(job_.dir);
  CarrierOptions second{1, 2, job_.job_id, &store, "", "", job_.secret};
  const bool tcp = GetParam() == "tcp";
  auto dialer = make_carrier(GetParam(), second);
  // Late is bounded generously: a loaded machine (or a sanitizer) may hold
  // the process off the core for a while, but never seconds per wait slice.
  const auto limit = milliseconds(300);
  const auto late = seconds(2);
  auto start = Clock::now();
  EXPECT_THROW(dialer->connect(0, start + limit), Timeout);
  auto took = Clock::now() - start;
  EXPECT_GE(took, limit);
  EXPECT_LT(took, limit + late) << "gave up long after its deadline";
  if (tcp) return;  // a tcp peer that exists answers on its own thread

  CarrierOptions first{0, 2, job_.job_id, &store, "", "", job_.secret};
  auto idle = make_carrier(GetParam(), first);
  start = Clock::now();
  EXPECT_THROW(dialer->connect(0, start + limit), Timeout);
  took = Clock::now() - start;
  EXPECT_GE(took, limit);
  EXPECT_LT(took, limit + late) << "gave up long after its deadline";

  // The request it gave up is taken back: the same two carriers connect at
  // the next try, and the channels of the failed tries are gone (TearDown).
  // (ucx: the idle side answers the abandoned HELLO too; the dialer knows
  // that answer for a stale one and waits for the answer to its new HELLO.)
  std::unique_ptr<Pair> accepted;
  std::string accept_error;
  std::thread acceptor([&] {
    try {
      accepted = idle->connect(1, Clock::now() + seconds(20));
    } catch (const std::exception& e) {
      accept_error = e.what();
    }
  });
  std::unique_ptr<Pair> dialed;
  EXPECT_NO_THROW(dialed = dialer->connect(0, Clock::now() + seconds(20)));
  acceptor.join();
  EXPECT_TRUE(accept_error.empty()) << accept_error;
  EXPECT_TRUE(dialed != nullptr);
  EXPECT_TRUE(accepted != nullptr);
}

// Connections that arrive while a rank waits for another peer are kept for
// it, so connect() may be called in any order, even one with a cycle.
TEST_P(PairTest, ConnectInAnyOrder) {
  const std::string kind = GetParam();
  expect_all_passed(run_ranks(3, [&](int rank) {
    FileStore store(job_.dir);
    CarrierOptions options{rank, 3, job_.job_id, &store, "", "", job_.secret};
    auto carrier = make_carrier(kind, options);
    const std::vector<std::vector<int>> order = {{2, 1}, {0, 2}, {1, 0}};
    std::vector<std::unique_ptr<Pair>> pairs(3);
    for (int peer : order[rank]) pairs[peer] = carrier->connect(peer, Clock::now() + seconds(20));
    // One message to each peer, rank number as content.
    std::vector<int32_t> got(3, -1);
    std::vector<Request> reqs(4);
    int32_t me = rank;
    int k = 0;
    for (int peer : order[rank]) {
      pairs[peer]->post_recv(&got[peer], sizeof(int32_t), reqs[k++]);
      pairs[peer]->post_send(&me, sizeof me, reqs[k++]);
    }
    auto deadline = Clock::now() + seconds(20);
    for (bool busy = true; busy;) {
      busy = false;
      for (int peer : order[rank]) {
        pairs[peer]->progress();
        busy |= pairs[peer]->busy();
      }
      if (busy) carrier->wait_for_activity(std::chrono::microseconds(1000));
      ASSERT_LT(Clock::now(), deadline);
    }
    for (int peer : order[rank]) EXPECT_EQ(got[peer], peer);
  }));
}

// TCP links are authenticated with the job's key, and listen on one address.
class TcpSecurity : public ::testing::Test {
 protected:
  JobDir job_;
};

TEST_F(TcpSecurity, AnEmptySecretIsRefused) {
  FileStore store(job_.dir);
  CarrierOptions options{0, 2, job_.job_id, &store, "", "", ""};
  try {
    make_tcp_carrier(options);
    FAIL() << "a tcp carrier started without a secret";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no job secret"), std::string::npos) << e.what();
  }
}

TEST_F(TcpSecurity, ListensOnLoopbackUnlessTold) {
  FileStore store(job_.dir);
  CarrierOptions options{0, 2, job_.job_id, &store, "", "", job_.secret};
  auto carrier = make_tcp_carrier(options);
  const auto published = store.get("tcp/addr/0", Clock::now() + seconds(5));
  EXPECT_EQ(std::string(published.begin(), published.end()).rfind("127.0.0.1:", 0), 0u);
}

TEST_F(TcpSecurity, ListensOnTheInterfaceNamedOrSaysWhichThereAre) {
  FileStore store(job_.dir);
  CarrierOptions on_lo{0, 2, job_.job_id, &store, "lo", "", job_.secret};
  auto carrier = make_tcp_carrier(on_lo);
  const auto published = store.get("tcp/addr/0", Clock::now() + seconds(5));
  EXPECT_EQ(std::string(published.begin(), published.end()).rfind("127.0.0.1:", 0), 0u);

  CarrierOptions missing{1, 2, job_.job_id, &store, "nosuch0", "", job_.secret};
  try {
    make_tcp_carrier(missing);
    FAIL() << "a tcp carrier listened on an interface this host does not have";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'nosuch0' has no IPv4 address"), std::string::npos) << what;
    EXPECT_NE(what.find("interfaces with one: "), std::string::npos) << what;
    EXPECT_NE(what.find("lo"), std::string::npos) << what;
  }
}

// An address a peer published that is not host:port (a port that is not a
// number, or out of range) is a transport failure naming that peer, not this
// rank's invalid argument.
TEST_F(TcpSecurity, ABadPublishedAddressNamesThePeer) {
  for (const std::string bad : {"127.0.0.1:http", "127.0.0.1:70000", "127.0.0.1:", "nocolon"}) {
    FileStore store(job_.dir);
    store.set("tcp/addr/0", {bad.begin(), bad.end()});
    CarrierOptions options{1, 2, job_.job_id, &store, "", "", job_.secret};
    auto carrier = make_tcp_carrier(options);
    try {
      carrier->connect(0, Clock::now() + seconds(5));
      ADD_FAILURE() << "connected to '" << bad << "'";
    } catch (const Timeout& e) {
      ADD_FAILURE() << "timed out on '" << bad << "': " << e.what();
    } catch (const Error& e) {
      EXPECT_EQ(e.peer(), 0) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad tcp address '" + bad + "' for rank 0"),
                std::string::npos)
          << e.what();
    }
  }
}

// A rank with another secret reaches the listener but neither side takes the
// link: the dialer fails naming the secret, the acceptor keeps waiting.
TEST_F(TcpSecurity, ADifferentSecretNeverConnects) {
  const std::string job_dir = job_.dir, job_id = job_.job_id, secret = job_.secret;
  expect_all_passed(run_ranks(2, [&](int rank) {
    FileStore store(job_dir);
    const std::string mine = rank == 0 ? secret : secret + "x";
    CarrierOptions options{rank, 2, job_id, &store, "", "", mine};
    auto carrier = make_tcp_carrier(options);
    if (rank == 1) {
      try {
        carrier->connect(0, Clock::now() + seconds(10));
        ADD_FAILURE() << "a link with the wrong secret was made";
      } catch (const Timeout&) {
        ADD_FAILURE() << "timed out instead of naming the failed handshake";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("RINGLET_SECRET"), std::string::npos) << e.what();
      }
      store.set("test/dialer-done", {1});
    } else {
      EXPECT_THROW(carrier->connect(1, Clock::now() + milliseconds(1500)), Timeout);
      store.get("test/dialer-done", Clock::now() + seconds(20));
    }
  }));
}

#if RINGLET_HAVE_UCX
// UCX links: the same secret rules as TCP's, addresses through the store, one
// link per pair and carrier, and CUDA memory only where UCX has it.
class UcxCarrier : public ::testing::Test {
 protected:
  JobDir job_;
};

TEST_F(UcxCarrier, AnEmptySecretIsRefused) {
  FileStore store(job_.dir);
  CarrierOptions options{0, 2, job_.job_id, &store, "", "", ""};
  try {
    make_ucx_carrier(options);
    FAIL() << "a ucx carrier started without a secret";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no job secret"), std::string::npos) << e.what();
  }
}

TEST_F(UcxCarrier, PublishesItsWorkerAddressInTheStore) {
  FileStore store(job_.dir);
  CarrierOptions options{0, 2, job_.job_id, &store, "", "", job_.secret};
  auto carrier = make_ucx_carrier(options);
  EXPECT_EQ(carrier->name(), "ucx");
  EXPECT_FALSE(store.get("ucx/addr/0", Clock::now() + seconds(5)).empty());
}

// Ringlet's UCX defaults (docs/environment.md) fill in only the variables the
// user left unset, and the segment sizes and protocol threshold only on a
// host without RDMA devices; each one set is said at debug level. In a forked
// rank, so that the variable and the log settings stay there.
TEST_F(UcxCarrier, DefaultsOnlyWhereTheUserLeftTheVariableUnset) {
  const bool rdma = std::filesystem::is_directory("/sys/class/infiniband") &&
                    !std::filesystem::is_empty("/sys/class/infiniband");
  expect_all_passed(run_ranks(1, [&](int) {
    ::setenv("UCX_RNDV_THRESH", "auto", 1);
    ::unsetenv("UCX_TCP_TX_SEG_SIZE");
    ::unsetenv("UCX_KEEPALIVE_INTERVAL");
    char path[] = "/tmp/ringlet-ucx-log-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    common::LogSettings log = common::log_settings();
    log.level = common::LogLevel::kDebug;
    log.fd = fd;
    common::configure_log(log);
    FileStore store(job_.dir);
    CarrierOptions options{0, 1, job_.job_id, &store, "", "", job_.secret};
    auto carrier = make_ucx_carrier(options);
    std::ifstream in(path);
    const std::string lines((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ::unlink(path);
    EXPECT_NE(lines.find("ucx: UCX_KEEPALIVE_INTERVAL=1s (Ringlet's default"), std::string::npos)
        << lines;
    EXPECT_EQ(lines.find("UCX_RNDV_THRESH"), std::string::npos) << lines;
    EXPECT_EQ(lines.find("ucx: UCX_TCP_TX_SEG_SIZE=256k (Ringlet's default") != std::string::npos,
              !rdma)
        << lines;
  }));
}

// Whether UCX itself (asked here directly) carries CUDA memory decides
// supports(kCuda); host memory always. Where it does not, a CUDA post fails
// at once, naming why, and the pair stays usable.
TEST_F(UcxCarrier, CudaMemoryOnlyWhereUcxHasIt) {
  const ucx::Library& lib = ucx::library();
  ucp_config_t* config = nullptr;
  ASSERT_EQ(lib.ucp_config_read(nullptr, nullptr, &config), UCS_OK);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  ucp_context_h context = nullptr;
  ASSERT_EQ(lib.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &context), UCS_OK);
  lib.ucp_config_release(config);
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  ASSERT_EQ(lib.ucp_context_query(context, &attr), UCS_OK);
  lib.ucp_cleanup(context);
  const bool ucx_cuda = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

  expect_all_passed(run_ranks(2, [&](int rank) {
    FileStore store(job_.dir);
    CarrierOptions options{rank, 2, job_.job_id, &store, "", "", job_.secret};
    auto carrier = make_ucx_carrier(options);
    EXPECT_TRUE(carrier->supports(MemoryKind::kHost));
    EXPECT_EQ(carrier->supports(MemoryKind::kCuda), ucx_cuda);
    auto pair = carrier->connect(1 - rank, Clock::now() + seconds(20));
    if (!ucx_cuda) {
      uint64_t word = 0;
      Request refused;
      pair->post_send(&word, sizeof word, refused, MemoryKind::kCuda);
      ASSERT_TRUE(refused.failed());
      EXPECT_NE(refused.error().find("host memory only"), std::string::npos) << refused.error();
    }
    uint64_t out = 1000 + static_cast<uint64_t>(rank), in = 0;
    Request send, recv;
    pair->post_recv(&in, sizeof in, recv);
    pair->post_send(&out, sizeof out, send);
    auto deadline = Clock::now() + seconds(20);
    while (pair->busy()) {
      if (!pair->progress()) carrier->wait_for_activity(std::chrono::microseconds(1000));
      ASSERT_LT(Clock::now(), deadline);
    }
    ASSERT_TRUE(recv.done()) << recv.error();
    EXPECT_EQ(in, 1000u + static_cast<uint64_t>(1 - rank));
  }));
}

// A pair's tags start from sequence 0, so a carrier links each pair once:
// the second connect() to the same peer is refused by name, not mixed up
// with what the first link left behind.
TEST_F(UcxCarrier, EachPairIsLinkedOnce) {
  expect_all_passed(run_ranks(2, [&](int rank) {
    FileStore store(job_.dir);
    CarrierOptions options{rank, 2, job_.job_id, &store, "", "", job_.secret};
    auto carrier = make_ucx_carrier(options);
    auto pair = carrier->connect(1 - rank, Clock::now() + seconds(20));
    try {
      carrier->connect(1 - rank, Clock::now() + seconds(1));
      ADD_FAILURE() << "linked twice";
    } catch (const Timeout& e) {
      ADD_FAILURE() << "timed out instead of refusing: " << e.what();
    } catch (const Error& e) {
      EXPECT_EQ(e.peer(), 1 - rank);
      EXPECT_NE(std::string(e.what()).find("each pair is linked once"), std::string::npos)
          << e.what();
    }
  }));
}

// A rank with another secret reaches the peer's worker, but the handshake
// fails: the dialer names the secret, the acceptor never hands out a pair.
TEST_F(UcxCarrier, ADifferentSecretNeverConnects) {
  const std::string job_dir = job_.dir, job_id = job_.job_id, secret = job_.secret;
  expect_all_passed(run_ranks(2, [&](int rank) {
    FileStore store(job_dir);
    const std::string mine = rank == 0 ? secret : secret + "x";
    CarrierOptions options{rank, 2, job_id, &store, "", "", mine};
    auto carrier = make_ucx_carrier(options);
    if (rank == 1) {
      try {
        carrier->connect(0, Clock::now() + seconds(10));
        ADD_FAILURE() << "a link with the wrong secret was made";
      } catch (const Timeout&) {
        ADD_FAILURE() << "timed out instead of naming the failed handshake";
      } catch (const Error& e) {
        EXPECT_EQ(e.peer(), 0);
        EXPECT_NE(std::string(e.what()).find("RINGLET_SECRET"), std::string::npos) << e.what();
      }
      store.set("test/dialer-done", {1});
    } else {
      EXPECT_THROW(carrier->connect(1, Clock::now() + milliseconds(1500)), Timeout);
      store.get("test/dialer-done", Clock::now() + seconds(20));
    }
  }));
}
#endif  // RINGLET_HAVE_UCX

}  // namespace
}  // namespace ringlet::transport::testing
