// Every choice of carriers, shared window and listening address that
// Communicator::create makes, from the world and the settings alone.
#include "core/bootstrap/link_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ringlet::core {
namespace {

using K = CarrierKind;

// The two addresses are asked for only where a plan needs them: a question
// asked elsewhere fails the test.
struct Facts {
  int reaching_asked = 0;
  int nic_asked = 0;
  std::string reaching = "10.0.0.7";
  std::string nic;
  std::string nic_asked_for;  // the address reaching rank 0 the NIC was asked against

  LinkFacts make(TransportKind t, std::string interface = "", bool have_ucx = true) {
    LinkFacts f;
    f.transport = t;
    f.interface = std::move(interface);
    f.have_ucx = have_ucx;
    f.address_reaching_rank0 = [this] {
      ++reaching_asked;
      return reaching;
    };
    f.nearest_nic_address = [this](const std::string& reaching_rank0) {
      ++nic_asked;
      nic_asked_for = reaching_rank0;
      return nic;
    };
    return f;
  }
};

// The ConfigError plan_links throws, "" where it throws none.
std::string refusal(const World& w, const LinkFacts& f) {
  try {
    plan_links(w, f);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Ranks 0,1 on host a; 2,3 on b: this is rank `rank`.
World two_hosts(int rank) { return derive_world(rank, {"a", "a", "b", "b"}); }
World one_host(int rank, int size) {
  return derive_world(rank, std::vector<std::string>(size, "a"));
}

TEST(LinkPlan, AutoOnOneHostIsSharedMemoryAndTheWindowOnLoopback) {
  Facts facts;
  const LinkPlan p = plan_links(one_host(1, 3), facts.make(TransportKind::kAuto));
  EXPECT_TRUE(p.shm);
  EXPECT_FALSE(p.tcp);
  EXPECT_FALSE(p.ucx);
  EXPECT_EQ(p.carrier_of, (std::vector<K>{K::kShm, K::kNone, K::kShm}));
  EXPECT_TRUE(p.world_window);
  EXPECT_EQ(p.address, "127.0.0.1");
  EXPECT_EQ(p.address_why, "loopback: one host");
  EXPECT_EQ(facts.reaching_asked + facts.nic_asked, 0);
}

TEST(LinkPlan, OneRankAloneHasNoCarrierAndNoWindow) {
  Facts facts;
  const LinkPlan p = plan_links(one_host(0, 1), facts.make(TransportKind::kAuto));
  EXPECT_FALSE(p.shm || p.tcp || p.ucx);
  EXPECT_EQ(p.carrier_of, (std::vector<K>{K::kNone}));
  EXPECT_FALSE(p.world_window);
}

TEST(LinkPlan, AutoAcrossHostsIsSharedMemoryWithinAndTcpAcross) {
  Facts facts;
  const LinkPlan p = plan_links(two_hosts(2), facts.make(TransportKind::kAuto));
  EXPECT_TRUE(p.shm);
  EXPECT_TRUE(p.tcp);
  EXPECT_FALSE(p.ucx);
  EXPECT_EQ(p.carrier_of, (std::vector<K>{K::kTcp, K::kTcp, K::kNone, K::kShm}));
  EXPECT_FALSE(p.world_window);
  EXPECT_EQ(p.address, "10.0.0.7");
  EXPECT_EQ(p.address_why, "the address reaching rank 0");
  EXPECT_EQ(facts.reaching_asked, 1);
  EXPECT_EQ(facts.nic_asked, 1);
  EXPECT_EQ(facts.nic_asked_for, "10.0.0.7");
}

TEST(LinkPlan, AutoWithOneRankPerHostHasNoSharedMemoryCarrier) {
  Facts facts;
  const LinkPlan p = plan_links(derive_world(0, {"a", "b", "c"}), facts.make(TransportKind::kAuto));
  EXPECT_FALSE(p.shm);
  EXPECT_TRUE(p.tcp);
  EXPECT_EQ(p.carrier_of, (std::vector<K>{K::kNone, K::kTcp, K::kTcp}));
}

TEST(LinkPlan, AcrossHostsTheNearestNicOnRankZerosSubnetWins) {
  Facts facts;
  facts.nic = "192.168.5.2";
  const LinkPlan p = plan_links(two_hosts(0), facts.make(TransportKind::kAuto));
  EXPECT_EQ(p.address, "192.168.5.2");
  EXPECT_EQ(p.address_why, "the nearest NIC's, on rank 0's subnet");
  // The same address as the route's keeps the route's reason.
  facts.nic = facts.reaching;
  EXPECT_EQ(plan_links(two_hosts(0), facts.make(TransportKind::kAuto)).address_why,
            "the address reaching rank 0");
}

TEST(LinkPlan, TcpNamesTheCarrierOfEveryPairAndLeavesTheWindowOut) {
  Facts facts;
  const LinkPlan one = plan_links(one_host(0, 2), facts.make(TransportKind::kTcp));
  EXPECT_FALSE(one.shm);
  EXPECT_TRUE(one.tcp);
  EXPECT_EQ(one.carrier_of, (std::vector<K>{K::kNone, K::kTcp}));
  EXPECT_FALSE(one.world_window);
  EXPECT_EQ(one.address, "127.0.0.1");
  const LinkPlan two = plan_links(two_hosts(1), facts.make(TransportKind::kTcp));
  EXPECT_EQ(two.carrier_of, (std::vector<K>{K::kTcp, K::kNone, K::kTcp, K::kTcp}));
}

TEST(LinkPlan, UcxNamesTheCarrierOfEveryPairWhereBuilt) {
  Facts facts;
  const LinkPlan p = plan_links(two_hosts(3), facts.make(TransportKind::kUcx));
  EXPECT_FALSE(p.shm);
  EXPECT_FALSE(p.tcp);
  EXPECT_TRUE(p.ucx);
  EXPECT_EQ(p.carrier_of, (std::vector<K>{K::kUcx, K::kUcx, K::kUcx, K::kNone}));
  EXPECT_FALSE(p.world_window);
  EXPECT_FALSE(plan_links(one_host(0, 2), facts.make(TransportKind::kUcx)).world_window);
  const std::string no_ucx =
      refusal(two_hosts(3), facts.make(TransportKind::kUcx, "", /*have_ucx=*/false));
  EXPECT_NE(no_ucx.find("RINGLET_TRANSPORT=ucx: this build has no UCX carrier"), std::string::npos)
      << "refusal: '" << no_ucx << "'";
}

TEST(LinkPlan, ShmOnOneHostIsTheWindowAndRefusedAcrossHosts) {
  Facts facts;
  const LinkPlan p = plan_links(one_host(0, 4), facts.make(TransportKind::kShm));
  EXPECT_TRUE(p.shm);
  EXPECT_TRUE(p.world_window);
  EXPECT_EQ(p.carrier_of, (std::vector<K>{K::kNone, K::kShm, K::kShm, K::kShm}));
  const std::string across = refusal(two_hosts(0), facts.make(TransportKind::kShm));
  EXPECT_NE(across.find("RINGLET_TRANSPORT=shm: the job spans 2 hosts"), std::string::npos)
      << "refusal: '" << across << "'";
}

TEST(LinkPlan, ANamedInterfaceIsTheReasonAndNoNicIsLookedFor) {
  Facts facts;
  const LinkPlan across = plan_links(two_hosts(2), facts.make(TransportKind::kAuto, "eth1"));
  EXPECT_EQ(across.address_why, "RINGLET_NETWORK_INTERFACE=eth1");
  EXPECT_EQ(across.address, "10.0.0.7");  // the route's, as without the plan
  EXPECT_EQ(facts.nic_asked, 0);
  const LinkPlan within = plan_links(one_host(0, 2), facts.make(TransportKind::kTcp, "lo"));
  EXPECT_EQ(within.address_why, "RINGLET_NETWORK_INTERFACE=lo");
  EXPECT_EQ(within.address, "127.0.0.1");
}

TEST(LinkPlan, CarrierNamesAreTheLogsWords) {
  EXPECT_EQ(to_string(K::kShm), "shm");
  EXPECT_EQ(to_string(K::kTcp), "tcp");
  EXPECT_EQ(to_string(K::kUcx), "ucx");
  EXPECT_EQ(to_string(K::kNone), "none");
}

}  // namespace
}  // namespace ringlet::core
