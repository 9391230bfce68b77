// Single-process tests of the runtime's pieces: the wire format, the
// negotiator's order, validation and fusion, the handle table, the timeline
// writer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/runtime/handle_table.h"
#include "core/runtime/negotiation.h"
#include "core/runtime/response_cache.h"
#include "core/runtime/runtime_error.h"
#include "core/timeline/timeline.h"
#include "tests/common/throws_failure.h"

namespace ringlet::core::runtime {
namespace {

Metadata allreduce(const std::string& name, std::vector<int64_t> shape, DataType t = DataType::kFloat32) {
  Metadata m;
  m.name = name;
  m.dtype = t;
  m.shape = std::move(shape);
  return m;
}

TEST(Wire, RoundTrip) {
  RankMessage msg;
  msg.shutdown = true;
  Metadata m = allreduce("fc1.weight", {4, 5});
  m.kind = CollectiveKind::kAlltoall;
  m.splits = {1, 3};
  m.prescale = 0.25;
  msg.ready = {m, allreduce("b", {})};
  RankMessage back = decode(encode(msg));
  EXPECT_TRUE(back.shutdown);
  ASSERT_EQ(back.ready.size(), 2u);
  EXPECT_EQ(back.ready[0].name, "fc1.weight");
  EXPECT_EQ(back.ready[0].shape, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(back.ready[0].splits, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(back.ready[0].prescale, 0.25);
  EXPECT_EQ(back.ready[0].kind, CollectiveKind::kAlltoall);
  EXPECT_TRUE(back.ready[1].shape.empty());
  std::string bytes = encode(msg);
  bytes.pop_back();
  EXPECT_THROW(decode(bytes), std::runtime_error);
}

TEST(Wire, StalledNamesRoundTrip) {
  RankMessage msg;
  msg.stalled = {{"a", "ringlet: stall timeout ..."}, {"b", ""}};
  EXPECT_EQ(decode(encode(msg)).stalled, msg.stalled);
  std::string bytes = encode(msg);
  bytes.resize(bytes.size() - 3);
  EXPECT_THROW(decode(bytes), std::runtime_error);
}

// What a peer sent that cannot be read is a protocol failure naming that
// peer: neither this rank's mistake nor an internal one.
TEST(Wire, MalformedMessageIsATransportFailureNamingTheSender) {
  RankMessage msg;
  msg.ready = {allreduce("fc1.weight", {4, 5})};
  const std::string good = encode(msg);

  std::string truncated = good;
  truncated.pop_back();
  std::string trailing = good + "x";
  RankMessage bad_dtype = msg;
  bad_dtype.ready[0].dtype = static_cast<DataType>(99);
  for (const std::string& bytes : {truncated, trailing, encode(bad_dtype)}) {
    try {
      decode(bytes, 3);
      ADD_FAILURE() << "decoded a malformed message";
    } catch (const common::Failure& f) {
      EXPECT_EQ(f.kind(), common::FailureKind::kTransport) << f.what();
      EXPECT_EQ(f.peer(), 3) << f.what();
      EXPECT_EQ(f.cause().rfind("rank 3 sent a ", 0), 0u) << f.cause();
      EXPECT_NE(f.cause().find("negotiation message"), std::string::npos) << f.cause();
    }
  }
  const std::pair<std::string, std::string> causes[] = {
      {truncated, "rank 1 sent a truncated negotiation message"},
      {trailing, "rank 1 sent a negotiation message with trailing bytes"},
      {encode(bad_dtype),
       "rank 1 sent a malformed negotiation message: tensor 'fc1.weight' has data type 99"},
  };
  for (const auto& [bytes, cause] : causes) {
    try {
      decode(bytes, 1);
      ADD_FAILURE() << "decoded a malformed message";
    } catch (const common::Failure& f) {
      EXPECT_EQ(f.cause(), cause);
    }
  }
  // Unattributed (a fuzzer, a test): the same kind, no peer.
  EXPECT_TRUE(test::throws_failure(common::FailureKind::kTransport, [&] { decode(truncated); }));
}

TEST(Negotiator, DropForgetsAStalledNameAndItsGroup) {
  Negotiator n(2);
  auto member = [](const std::string& name) {
    Metadata m = allreduce(name, {4});
    m.group = "g0";
    m.group_size = 3;
    return m;
  };
  std::vector<RankMessage> c(2);
  c[0].ready = {allreduce("lonely", {4}), member("a"), member("b"), member("c")};
  c[1].ready = {member("a")};  // "a" complete and held for its group; "b", "c" wait
  EXPECT_TRUE(n.add_cycle(c, 1 << 20).empty());
  EXPECT_EQ(n.drop("lonely"), std::vector<std::string>{"lonely"});
  auto dropped = n.drop("b");
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(n.waiting().empty());
  EXPECT_TRUE(n.drop("unknown").empty());
  // Submitted again later, the name negotiates afresh.
  std::vector<RankMessage> again(2);
  again[0].ready = {allreduce("lonely", {4})};
  again[1].ready = {allreduce("lonely", {4})};
  EXPECT_EQ(n.add_cycle(again, 1 << 20).size(), 1u);
}

TEST(Negotiator, RunsWhenReadyEverywhereInRank0Order) {
  Negotiator n(2);
  std::vector<RankMessage> c1(2), c2(2);
  c1[0].ready = {allreduce("a", {4}), allreduce("b", {4})};
  c1[1].ready = {allreduce("b", {4})};
  auto r1 = n.add_cycle(c1, 0);  // fusion off
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].names, std::vector<std::string>{"b"});
  EXPECT_EQ(n.waiting().at("a"), std::vector<int>{1});
  c2[1].ready = {allreduce("a", {4})};
  auto r2 = n.add_cycle(c2, 0);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0].names, std::vector<std::string>{"a"});
  EXPECT_TRUE(n.waiting().empty());
}

Metadata transfer(const std::string& name, CollectiveKind kind, int from, int to,
                  std::vector<int64_t> shape = {4}, DataType t = DataType::kFloat32) {
  Metadata m = allreduce(name, std::move(shape), t);
  m.kind = kind;
  m.root = from;
  m.peer = to;
  return m;
}

TEST(Wire, TransferRoundTrip) {
  RankMessage msg;
  msg.ready = {transfer("t", CollectiveKind::kRecv, 2, 0, {})};
  const RankMessage back = decode(encode(msg));
  ASSERT_EQ(back.ready.size(), 1u);
  EXPECT_EQ(back.ready[0].kind, CollectiveKind::kRecv);
  EXPECT_EQ(back.ready[0].root, 2);
  EXPECT_EQ(back.ready[0].peer, 0);
}

// A transfer runs once its two ranks reported it, whatever the others do, in
// the order of the cycle that completed it; only its two ranks are awaited.
TEST(Negotiator, TransferRunsWhenItsTwoRanksReported) {
  Negotiator n(3);
  std::vector<RankMessage> c1(3), c2(3);
  c1[2].ready = {transfer("t", CollectiveKind::kSend, 2, 1, {2, 3})};
  c1[0].ready = {allreduce("a", {4})};
  EXPECT_TRUE(n.add_cycle(c1, 0).empty());
  EXPECT_EQ(n.waiting().at("t"), std::vector<int>{1});
  EXPECT_EQ(n.waiting().at("a"), (std::vector<int>{1, 2}));
  c2[1].ready = {allreduce("a", {4}), transfer("t", CollectiveKind::kRecv, 2, 1, {6})};
  c2[2].ready = {allreduce("a", {4})};
  const auto r = n.add_cycle(c2, 1 << 20);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].names, std::vector<std::string>{"a"});  // rank 0's order first
  EXPECT_EQ(r[1].names, std::vector<std::string>{"t"});
  EXPECT_EQ(r[1].kind, CollectiveKind::kSend);
  EXPECT_TRUE(r[1].error.empty()) << r[1].error;
  ASSERT_EQ(r[1].meta.size(), 1u);
  EXPECT_EQ(r[1].meta[0].shape, (std::vector<int64_t>{2, 3}));  // the sender's
  EXPECT_EQ(r[1].bytes, 24);
  EXPECT_TRUE(n.waiting().empty());
}

TEST(Negotiator, TransferInAProcessSetNamesGlobalRanks) {
  Negotiator n(2, {1, 3});
  std::vector<RankMessage> c(2);
  c[1].ready = {transfer("t", CollectiveKind::kSend, 3, 1)};
  EXPECT_TRUE(n.add_cycle(c, 0).empty());
  EXPECT_EQ(n.waiting().at("t"), std::vector<int>{1});
  std::vector<RankMessage> c2(2);
  c2[0].ready = {transfer("t", CollectiveKind::kRecv, 3, 1)};
  const auto r = n.add_cycle(c2, 0);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error.empty()) << r[0].error;
}

TEST(Negotiator, MismatchedTransfersFailNamingBothRanks) {
  struct Case {
    Metadata a, b;
    int rank_a, rank_b;
    std::string expected;
  };
  const Case cases[] = {
      {transfer("t", CollectiveKind::kSend, 0, 1, {4}),
       transfer("t", CollectiveKind::kRecv, 0, 1, {5}), 0, 1,
       "Mismatched send and recv sizes for 't': rank 0 sends float [4], rank 1 receives into "
       "float [5]"},
      {transfer("t", CollectiveKind::kSend, 0, 1, {4}),
       transfer("t", CollectiveKind::kRecv, 0, 1, {4}, DataType::kInt32), 0, 1,
       "Mismatched send and recv data types for 't': rank 0 sends float [4], rank 1 receives "
       "into int32 [4]"},
      // Both sent: the receiver's report is not a recv.
      {transfer("t", CollectiveKind::kSend, 0, 1), transfer("t", CollectiveKind::kSend, 0, 1), 0, 1,
       "Mismatched send and recv 't': rank 1 submitted send of a transfer from rank 0 to rank 1"},
      // A rank that is not a party.
      {transfer("t", CollectiveKind::kSend, 0, 1), transfer("t", CollectiveKind::kRecv, 0, 1), 0, 2,
       "Mismatched send and recv 't': rank 2 submitted recv of a transfer from rank 0 to rank 1"},
      // An allreduce under a transfer's name.
      {transfer("t", CollectiveKind::kSend, 0, 1), allreduce("t", {4}), 0, 1,
       "Mismatched send and recv 't': rank 1 submitted allreduce of a transfer from rank 0 to "
       "rank 1"},
  };
  for (const Case& k : cases) {
    Negotiator n(3);
    std::vector<RankMessage> c(3);
    c[k.rank_a].ready = {k.a};
    c[k.rank_b].ready = {k.b};
    const auto r = n.add_cycle(c, 0);
    ASSERT_EQ(r.size(), 1u) << k.expected;
    EXPECT_EQ(r[0].error, k.expected);
    EXPECT_TRUE(n.waiting().empty());
  }
}

TEST(Negotiator, FusesCompatibleAllreducesUpToThreshold) {
  Negotiator n(2);
  std::vector<RankMessage> c(2);
  for (int r = 0; r < 2; ++r) {
    c[r].ready = {allreduce("x", {8}), allreduce("i", {8}, DataType::kInt32), allreduce("y", {8}),
                  allreduce("z", {8})};
    if (r == 1) std::reverse(c[r].ready.begin(), c[r].ready.end());
  }
  auto resp = n.add_cycle(c, 64);  // room for two 32-byte tensors
  ASSERT_EQ(resp.size(), 3u);
  EXPECT_EQ(resp[0].names, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(resp[0].bytes, 64);
  EXPECT_EQ(resp[1].names, std::vector<std::string>{"i"});
  EXPECT_EQ(resp[2].names, std::vector<std::string>{"z"});
}

TEST(Negotiator, GroupWaitsForAllMembersAndIgnoresThreshold) {
  Negotiator n(2);
  auto member = [](const std::string& name) {
    Metadata m = allreduce(name, {1000});
    m.group = "g0";
    m.group_size = 2;
    return m;
  };
  std::vector<RankMessage> c1(2), c2(2);
  c1[0].ready = {member("a"), member("b")};
  c1[1].ready = {member("a")};
  EXPECT_TRUE(n.add_cycle(c1, 16).empty());
  c2[1].ready = {member("b")};
  auto r = n.add_cycle(c2, 16);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r[0].group);
  EXPECT_EQ(r[0].bytes, 8000);
}

TEST(Negotiator, MismatchNamesTensorRanksAndValues) {
  Negotiator n(3);
  std::vector<RankMessage> c(3);
  c[0].ready = {allreduce("fc1.weight", {4, 5})};
  c[1].ready = {allreduce("fc1.weight", {4, 5})};
  c[2].ready = {allreduce("fc1.weight", {4, 6})};
  auto resp = n.add_cycle(c, 1 << 20);
  ASSERT_EQ(resp.size(), 1u);
  EXPECT_EQ(resp[0].error,
            "Mismatched allreduce tensor shapes for 'fc1.weight': rank 0 sent [4, 5], rank 2 sent [4, 6]");
}

TEST(Negotiator, AllgatherAllowsDifferentFirstDimension) {
  Negotiator n(2);
  std::vector<RankMessage> c(2);
  Metadata a = allreduce("g", {2, 3}), b = allreduce("g", {5, 3});
  a.kind = b.kind = CollectiveKind::kAllgather;
  c[0].ready = {a};
  c[1].ready = {b};
  auto resp = n.add_cycle(c, 1 << 20);
  ASSERT_EQ(resp.size(), 1u);
  EXPECT_EQ(resp[0].error, "");
  EXPECT_EQ(resp[0].per_rank[0][1], std::vector<int64_t>{5});
}

TEST(ResponseCache, SlotsLruEvictionAndErase) {
  ResponseCache c(2);
  c.put(allreduce("a", {4}));
  c.put(allreduce("b", {4}));
  EXPECT_EQ(c.find(allreduce("a", {4})), 0u);
  EXPECT_EQ(c.find(allreduce("b", {4})), 1u);
  EXPECT_FALSE(c.find(allreduce("a", {5})));  // same name, other metadata
  EXPECT_EQ(c.slot_of("a"), 0u);
  c.touch(0);                     // a is now the most recently used
  c.put(allreduce("c", {4}));     // evicts b, reuses its slot
  EXPECT_FALSE(c.slot_of("b"));
  EXPECT_EQ(c.find(allreduce("c", {4})), 1u);
  c.erase(0);
  EXPECT_EQ(c.at(0), nullptr);
  c.put(allreduce("d", {4}));
  EXPECT_EQ(c.slot_of("d"), 0u);
  EXPECT_EQ(c.span(), 2u);
  ResponseCache off(0);
  off.put(allreduce("a", {4}));
  EXPECT_FALSE(off.find(allreduce("a", {4})));
}

TEST(HandleTable, CompleteFailAndRelease) {
  HandleTable t;
  Handle a = t.create(), b = t.create();
  EXPECT_FALSE(t.poll(a));
  constexpr auto kGrace = std::chrono::seconds(30);
  EXPECT_EQ(t.wait(a, std::chrono::milliseconds(1), kGrace), HandleTable::Waited::kTimedOut);
  std::thread th([&] { t.complete(a, Result{{}, {3}, {}}); });
  EXPECT_EQ(t.wait(a, std::chrono::seconds(10), kGrace), HandleTable::Waited::kCompleted);
  th.join();
  EXPECT_EQ(t.take(a, kGrace).shape, std::vector<int64_t>{3});
  EXPECT_TRUE(test::throws_failure(common::FailureKind::kInvalidArgument, [&] { t.poll(a); }));
  t.fail(b, ErrorKind::kPeerLost, "boom");
  try {
    t.take(b, kGrace);
    ADD_FAILURE() << "take() of a failed handle returned";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPeerLost);
    EXPECT_STREQ(e.what(), "boom");
  }
  EXPECT_EQ(t.size(), 0u);
}

TEST(Timeline, AFileThatCannotBeCreatedIsAnInvalidArgumentNamingIt) {
  try {
    timeline::Timeline tl("/nonexistent/ringlet_tl.json", false);
    FAIL() << "a timeline opened in a missing directory";
  } catch (const common::Failure& f) {
    EXPECT_EQ(f.kind(), common::FailureKind::kInvalidArgument) << f.what();
    EXPECT_NE(f.cause().find("/nonexistent/ringlet_tl.json"), std::string::npos) << f.cause();
  }
}

TEST(Timeline, ValidJsonAfterEveryFlush) {
  const std::string path = "/tmp/ringlet_tl_unit_" + std::to_string(::getpid()) + ".json";
  auto parse = [&] {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return nlohmann::json::parse(s.str());
  };
  {
    timeline::Timeline tl(path, true);
    EXPECT_TRUE(parse().empty());
    tl.negotiate_start("w", "ALLREDUCE");
    tl.rank_ready("w", 0);
    tl.flush();
    EXPECT_EQ(parse().size(), 4u);  // 2 metadata + B + i
    tl.negotiate_end("w");
    tl.op_start("w", "ALLREDUCE", 32);
    tl.activity_start("w", "QUEUE");
    tl.activity_end("w");
    tl.op_end("w");
    tl.cycle_start();
    tl.flush();
    auto j = parse();
    EXPECT_EQ(j.size(), 10u);
    EXPECT_EQ(j[2]["name"], "NEGOTIATE_ALLREDUCE");
    EXPECT_EQ(j[5]["args"]["bytes"], 32);
  }
  EXPECT_EQ(parse().size(), 10u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ringlet::core::runtime
