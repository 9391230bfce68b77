// Which carriers a rank creates, which of them reaches each peer, whether the
// job's ranks share one window, and where the data links listen: the choices
// of Communicator::create, made here from the world and the settings alone so
// that each is tested without starting processes.
//
// Which carriers exist follows from facts every rank shares (the world and
// RINGLET_TRANSPORT), so that every rank creates the same ones: a carrier may
// publish its address collectively.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/bootstrap/world.h"
#include "core/config.h"

namespace ringlet::core {

enum class CarrierKind : uint8_t { kNone, kShm, kTcp, kUcx };

// What the plan reads beyond the world. The two addresses are asked for only
// where the job spans hosts (the nearest NIC only where no interface is
// named): finding them reads the store's socket or the topology.
struct LinkFacts {
  TransportKind transport = TransportKind::kAuto;  // RINGLET_TRANSPORT
  std::string interface;                           // RINGLET_NETWORK_INTERFACE; "" unset
  bool have_ucx = false;                           // this build has the UCX carrier
  // The source address of this rank's connection to rank 0's store.
  std::function<std::string()> address_reaching_rank0;
  // The address of the NIC nearest this rank on rank 0's subnet, given the
  // address reaching rank 0; "" none.
  std::function<std::string(const std::string& reaching_rank0)> nearest_nic_address;
};

struct LinkPlan {
  // The carriers to create, in this order: shm, then tcp or ucx.
  bool shm = false;
  bool tcp = false;
  bool ucx = false;
  std::vector<CarrierKind> carrier_of;  // per global rank; kNone for this rank
  // One shared window over all of the job's ranks (one host, shm allowed).
  bool world_window = false;
  // Where data links listen (unless `interface` names one), and why, for the
  // info log.
  std::string address;
  std::string address_why;
};

// Throws ConfigError naming RINGLET_TRANSPORT where the transport it names is
// not in this build; called before the rendezvous too, so that a bad setting
// fails before the other ranks wait.
void check_transport_built(TransportKind transport, bool have_ucx);

// Throws ConfigError where the transport cannot reach every rank (shm across
// hosts) or is not built.
LinkPlan plan_links(const World& w, const LinkFacts& facts);

std::string_view to_string(CarrierKind k);

}  // namespace ringlet::core
