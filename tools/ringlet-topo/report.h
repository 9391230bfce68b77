// ringlet-topo's output: the topology, the job's placement and ring, and what
// this build and machine can run a job with; as text, or as one JSON object.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "capabilities.h"
#include "job_plan.h"
#include "ringlet/topology/topology.h"

namespace ringlet_topo {

struct Report {
  ringlet::topology::Topology topology;  // its first host is the one shown
  std::string source;                    // where the topology came from, in words
  JobPlan job;
  std::vector<Capability> transports, launchers;
};

void print_text(const Report& r, std::ostream& out);
nlohmann::json to_json(const Report& r);

}  // namespace ringlet_topo
