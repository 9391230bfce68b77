// Direct allgather through the shared-memory window (one host), per-rank
// counts. Each round takes up to a round (window_layout.h) of every rank's block: each
// rank copies its piece into its staging half slice by slice, publishing
// staged = (g, k+1) after each slice, and copies its own piece straight into
// its output; then it copies every peer's piece slice by slice from the
// peer's staging into its output as the peer's flag shows it, starting with
// the next rank so that not every reader hits the same segment. Each byte is
// written twice (staging, output) and nothing is forwarded. Slices of
// direct_slice_bytes so that readers start while the writer is still staging.
// The number of rounds follows from the largest block, which every rank knows.
#include <algorithm>
#include <vector>

#include "core/collectives/algorithms.h"
#include "core/collectives/window_layout.h"

namespace ringlet::core::collectives {

void direct_allgather(Communicator& comm, const void* send, void* recv,
                      std::span<const size_t> counts, DataType dtype) {
  namespace cpu = kernels::cpu;
  WindowView v(comm);
  Workspace& ws = comm.workspace();
  const int n = v.size();
  const int me = v.me();
  const size_t es = dtype_size(dtype);
  const size_t re = v.round_elems(es);
  const size_t slice = std::max<size_t>(1, ws.tuning.direct_slice_bytes / es);
  std::vector<size_t> offsets(n);
  size_t total = 0, largest = 0;
  for (int r = 0; r < n; ++r) {
    offsets[r] = total;
    total += counts[r];
    largest = std::max(largest, counts[r]);
  }
  const cpu::Store store = v.store_for(total * es);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  std::byte* own = out + offsets[me] * es;

  for (size_t lo = 0; lo < largest; lo += re) {
    const uint64_t g = ws.next_round();
    auto piece = [&](int r) { return counts[r] > lo ? std::min(re, counts[r] - lo) : 0; };
    v.wait_half_free(g);
    std::byte* mine = v.staging(me, g);
    const size_t my_len = piece(me);
    for (size_t k = 0; k * slice < my_len; ++k) {
      const size_t len = std::min(slice, my_len - k * slice);
      cpu::copy(mine + k * slice * es, in + (lo + k * slice) * es, len * es);
      v.publish(v.control(me).staged, flag_value(g, k + 1));
    }
    if (own != in && my_len > 0) cpu::copy(own + lo * es, in + lo * es, my_len * es);
    for (int q = 1; q < n; ++q) {
      const int p = (me + q) % n;
      const size_t len_p = piece(p);
      for (size_t k = 0; k * slice < len_p; ++k) {
        const size_t len = std::min(slice, len_p - k * slice);
        v.wait_at_least(p, &SegmentControl::staged, flag_value(g, k + 1));
        cpu::copy(out + (offsets[p] + lo + k * slice) * es, v.staging(p, g) + k * slice * es,
                  len * es, store);
      }
    }
    v.finish_round(g);
  }
}

}  // namespace ringlet::core::collectives
