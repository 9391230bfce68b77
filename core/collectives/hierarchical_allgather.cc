// Hierarchical allgather across hosts, per-rank counts, any number of ranks
// per host, in three steps on the groups of Communicator::host_groups():
//   (1) every host's ranks gather their blocks among themselves (through the
//       host's window: direct_allgather), so each holds its host's blocks;
//   (2) the hosts' first ranks, one per host, gather every host's blocks
//       across the hosts (the ring over TCP, with per-host counts);
//   (3) each first rank broadcasts the other hosts' blocks to its host's
//       ranks (through the window: direct_broadcast).
// Each host sends its own blocks to the network once per other host's first
// rank along the ring: (H-1)/H of the message leaves a host, against the flat
// ring's (HL-1)/(HL), in H-1 network steps rather than HL-1 (see
// algorithm_table.cc for when that wins). Through the first ranks rather than
// one ring per local index, as Horovod's hierarchical allgather does for
// uneven hosts, so that hosts of any size take part alike.
//
// The steps work in host order: host after host (in the order of their lowest
// ranks), each host's ranks ascending. Where that is rank order (each host's
// ranks consecutive, as launchers place them) the output itself is the
// buffer; elsewhere the blocks are gathered into the fusion buffer and copied
// into rank order at the end. In place (send is the output's own block) is
// safe either way: the block is read by (1) before anything writes the output.
#include <algorithm>
#include <vector>

#include "core/collectives/algorithms.h"
#include "core/collectives/group_steps.h"
#include "core/collectives/workspace.h"
#include "ringlet/kernels/cpu.h"

namespace ringlet::core::collectives {

void hierarchical_allgather(Communicator& comm, const void* send, void* recv,
                            std::span<const size_t> counts, DataType dtype) {
  const World& w = comm.world();
  const Communicator::HostGroups groups = comm.host_groups();
  Workspace& ws = comm.workspace();
  const size_t es = dtype_size(dtype);
  const int hosts = w.cross_size;
  const int here = w.cross_rank;

  // Host h's blocks start at host_at[h] of the host-ordered buffer and hold
  // host_total[h] elements; rank r's block starts at at[r] there.
  std::vector<size_t>& at = ws.peer_offset;
  std::vector<size_t>& host_total = ws.group_counts;
  std::vector<size_t>& host_at = ws.group_offsets;
  at.resize(w.size);
  host_total.assign(hosts, 0);
  host_at.resize(hosts);
  size_t total = 0;
  bool rank_order = true;  // host order is rank order: the ranks come host after host
  int next = 0;
  for (int h = 0; h < hosts; ++h) {
    host_at[h] = total;
    for (int r : w.ranks_on_host[h]) {
      rank_order = rank_order && r == next++;
      at[r] = total;
      total += counts[r];
      host_total[h] += counts[r];
    }
  }
  if (total == 0) return;

  std::byte* buffer = static_cast<std::byte*>(recv);
  if (!rank_order) {
    if (ws.fusion_buffer.size() < total * es) ws.fusion_buffer.resize(total * es);
    buffer = ws.fusion_buffer.data();
  }
  const std::vector<int>& locals = w.ranks_on_host[here];
  std::vector<size_t>& local_counts = ws.peer_count;
  local_counts.resize(locals.size());
  for (size_t i = 0; i < locals.size(); ++i) local_counts[i] = counts[locals[i]];

  std::byte* mine = buffer + host_at[here] * es;
  step::allgather(*groups.host, send, mine, local_counts, dtype);  // (1)
  if (groups.host->rank() == 0) {
    // The first ranks, in rank order, are the hosts in host order.
    step::allgather(*groups.cross, mine, buffer, host_total, dtype);  // (2)
  }
  const size_t after = host_at[here] + host_total[here];
  step::broadcast(*groups.host, buffer, host_at[here], dtype, 0);  // (3)
  step::broadcast(*groups.host, buffer + after * es, total - after, dtype, 0);

  if (!rank_order) {
    size_t to = 0;
    for (int r = 0; r < w.size; ++r) {
      if (counts[r] > 0) {
        kernels::cpu::copy(static_cast<std::byte*>(recv) + to * es, buffer + at[r] * es,
                           counts[r] * es);
      }
      to += counts[r];
    }
  }
}

}  // namespace ringlet::core::collectives
