// Barrier over pairs: a zero-byte token goes twice around the ring, started
// by ring position 0. When position 0 gets the first token back, every rank
// has entered; the second pass carries that news to everyone. 2n small
// messages in sequence: fine for a barrier, which is off the hot path (the
// window barrier below is the fast one within a host).
#include <algorithm>
#include <array>

#include "core/collectives/algorithms.h"
#include "core/collectives/workspace.h"

namespace ringlet::core::collectives {

void ring_barrier(Communicator& comm) {
  const World& w = comm.world();
  const int n = w.size;
  const int pos =
      static_cast<int>(std::find(w.ring.begin(), w.ring.end(), w.rank) - w.ring.begin());
  transport::Pair* left = &comm.pair(w.ring[(pos + n - 1) % n]);
  transport::Pair* right = &comm.pair(w.ring[(pos + 1) % n]);
  Workspace& ws = comm.workspace();
  char token = 0;
  auto pass = [&](transport::Pair* p, bool send) {
    transport::Request* r = send ? &ws.send_reqs[0] : &ws.recv_reqs[0];
    if (send)
      p->post_send(&token, 0, *r);
    else
      p->post_recv(&token, 0, *r);
    comm.wait_all(std::span(&r, 1), std::span(&p, 1), comm.deadline());
  };
  for (int round = 0; round < 2; ++round) {
    if (pos == 0) {
      pass(right, true);
      pass(left, false);
    } else {
      pass(left, false);
      pass(right, true);
    }
  }
}

}  // namespace ringlet::core::collectives
