// The soak's per-rank bookkeeping: the buffers of one collective on this
// rank, the check of what it returned against the reference, and the totals
// and checksum that the ranks compare at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "plan.h"
#include "ringlet/ringlet.h"
#include "values.h"

namespace soak {
// A buffer of one tensor, placed at a random whole-element offset from its
// allocation's start, as a view into a larger tensor would be.
class Buffer {
 public:
  Buffer(size_t bytes, size_t offset) : storage_(bytes + offset), offset_(offset) {}
  void* data() { return storage_.data() + offset_; }
  const void* data() const { return storage_.data() + offset_; }

 private:
  std::vector<std::byte> storage_;
  size_t offset_;
};

// A 64-bit digest that every rank can fold in the same order.
struct Digest {
  uint64_t h = 0x6a09e667f3bcc908ULL;
  void add(uint64_t v) { h = mix(h ^ v) + 0x9e3779b97f4a7c15ULL; }
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, b + i, 8);
      add(w);
    }
    uint64_t tail = n;
    for (; i < n; ++i) tail = (tail << 8) | b[i];
    add(tail);
  }
};

struct Totals {
  int64_t collectives = 0;
  int64_t bytes_checked = 0;
  int64_t wrong = 0;
};

// One collective of a batch on this rank: its buffers and handles.
struct Live {
  const Collective* c = nullptr;
  std::vector<Buffer> inputs;   // one per tensor
  std::vector<Buffer> outputs;  // allreduce out of place, blocking calls
  std::vector<int64_t> handles;
  std::vector<ringlet::Result> results;
};

class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}
  // Checks every output of `l` (and that inputs given out of place are
  // untouched), counting wrong elements and folding shared results into the
  // checksum.
  void check(const Live& l, int64_t batch);
  // Every rank folds every collective of the plan, member or not.
  void fold_plan(const Collective& c);
  Totals& totals() { return totals_; }
  Digest& digest() { return digest_; }

 private:
  void compare(const Live& l, int tensor, const void* out, uint64_t elements, int64_t batch);
  void input_untouched(const Live& l, int tensor, int64_t batch);
  void note(const Collective& c, int64_t batch, const std::string& what);

  int rank_;
  Totals totals_;
  Digest digest_;
  int notes_ = 0;
};

}  // namespace soak
