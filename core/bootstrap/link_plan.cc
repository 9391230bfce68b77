#include "core/bootstrap/link_plan.h"

namespace ringlet::core {

void check_transport_built(TransportKind transport, bool have_ucx) {
  if (transport == TransportKind::kUcx && !have_ucx) {
    throw ConfigError(
        "RINGLET_TRANSPORT=ucx: this build has no UCX carrier (accepted: auto|shm|tcp)");
  }
}

LinkPlan plan_links(const World& w, const LinkFacts& facts) {
  check_transport_built(facts.transport, facts.have_ucx);
  const TransportKind t = facts.transport;
  if (t == TransportKind::kShm && !w.single_host()) {
    throw ConfigError("RINGLET_TRANSPORT=shm: the job spans " + std::to_string(w.cross_size) +
                      " hosts; shared memory reaches only one (use auto or tcp)");
  }
  LinkPlan plan;
  // auto: shm within a host, TCP across hosts. UCX only where named: over
  // Ethernet, UCX 1.13's tcp transport moves 64 KiB and up 1.5 to 2 times
  // slower than Ringlet's own TCP links (measured side by side), and whether
  // every host has an RDMA device, where UCX would win, is not a fact every
  // rank shares at this point. tcp and ucx name the carrier of every pair,
  // within a host too (and leave the shared window out, so the host's
  // collectives run over it).
  bool any_shared_host = false;
  for (const auto& ranks : w.ranks_on_host) any_shared_host |= ranks.size() > 1;
  plan.shm = (t == TransportKind::kAuto || t == TransportKind::kShm) && any_shared_host;
  plan.ucx = t == TransportKind::kUcx;
  plan.tcp = t == TransportKind::kTcp || (t == TransportKind::kAuto && !w.single_host());
  const CarrierKind across = plan.ucx   ? CarrierKind::kUcx
                             : plan.tcp ? CarrierKind::kTcp
                                        : CarrierKind::kNone;
  plan.carrier_of.assign(w.size, CarrierKind::kNone);
  for (int peer = 0; peer < w.size; ++peer) {
    if (peer == w.rank) continue;
    const bool same_host = w.host_of[peer] == w.host_of[w.rank];
    plan.carrier_of[peer] = (same_host && plan.shm) ? CarrierKind::kShm : across;
  }
  plan.world_window =
      w.single_host() && (t == TransportKind::kAuto || t == TransportKind::kShm) && w.size > 1;

  // Without a named interface, data links listen where this rank reaches the
  // store from: loopback when the whole job is on one host (nothing outside
  // it needs to connect), else the source address of the route to rank 0,
  // which the other hosts can reach as rank 0 reached them; across hosts,
  // better the NIC nearest the rank on rank 0's subnet (placement.h).
  if (!facts.interface.empty()) {
    plan.address_why = "RINGLET_NETWORK_INTERFACE=" + facts.interface;
    if (!w.single_host())
      plan.address = facts.address_reaching_rank0();
    else
      plan.address = "127.0.0.1";
    return plan;
  }
  if (w.single_host()) {
    plan.address = "127.0.0.1";
    plan.address_why = "loopback: one host";
    return plan;
  }
  plan.address = facts.address_reaching_rank0();
  plan.address_why = "the address reaching rank 0";
  const std::string nic = facts.nearest_nic_address(plan.address);
  if (!nic.empty() && nic != plan.address) {
    plan.address = nic;
    plan.address_why = "the nearest NIC's, on rank 0's subnet";
  }
  return plan;
}

std::string_view to_string(CarrierKind k) {
  switch (k) {
    case CarrierKind::kNone:
      return "none";
    case CarrierKind::kShm:
      return "shm";
    case CarrierKind::kTcp:
      return "tcp";
    case CarrierKind::kUcx:
      return "ucx";
  }
  return "?";
}

}  // namespace ringlet::core
